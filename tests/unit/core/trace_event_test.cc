#include "common/bus/trace_event.h"

#include <algorithm>
#include <set>
#include <thread>

#include <doctest/doctest.h>
#include <prometheus/registry.h>

#include "common/bus/sync_message.h"
#include "common/bus/topology.h"
#include "common/bus/trace_recorder.h"
#include "common/time_format.h"
#include "tests/fakes/common/amqp/fake_session.h"
#include "tests/fakes/common/fake_clock.h"

using namespace syncbus;
using namespace std::chrono_literals;

namespace {

TraceEvent Settled() {
  TraceEvent e;
  e.step = TraceStep::kSettled;
  e.cluster = "fleet/c-1";
  e.request = "fleet/c-1/0123456789ab/7";
  e.at = *ParseRfc3339("2026-11-23T22:56:02.442Z");
  e.duration = 2500ms;
  e.actor = "syncbus-consumer/c-1";
  e.lane = "change";
  e.attempt = 2;
  e.redelivered = true;
  e.outcome = TraceOutcome::kRetry;
  e.tier = "30s";
  e.error = "failing sets: a";
  e.prepare = 260ms;
  e.target = 1900ms;
  e.store = 137ms;
  e.sets = {{"SyncSet", "a", 3, 10, false, "503"}, {"SelectorSyncSet", "g", 0, 0, true, ""}};
  return e;
}

double Count(prometheus::Registry& registry, const std::string& result) {
  for (const auto& f : registry.Collect()) {
    if (f.name != "syncbus_trace_events_total") continue;
    for (const auto& m : f.metric) {
      if (m.label.size() == 1 && m.label[0].value == result) return m.counter.value;
    }
  }
  return -1;
}

// Every event of the trace stream's messages, in order.
std::vector<TraceEvent> Events(const std::vector<amqp::Message>& messages) {
  std::vector<TraceEvent> out;
  for (const auto& m : messages) {
    auto decoded = DecodeTraceMessage(m.body);
    REQUIRE_MESSAGE(decoded.ok(), decoded.status().message());
    CHECK(decoded->invalid == 0);
    for (auto& e : decoded->events) out.push_back(std::move(e));
  }
  return out;
}

std::vector<const TraceEvent*> Pointers(const std::vector<TraceEvent>& events) {
  std::vector<const TraceEvent*> out;
  for (const auto& e : events) out.push_back(&e);
  return out;
}

// A FakeSession whose broker refuses the publications of a flush at the given positions (a
// stream leader that nacked one message of a pipelined batch).
class RefusingSession final : public amqp::Session {
 public:
  RefusingSession(amqp::FakeSession& inner, std::set<size_t> refused)
      : inner_(inner), refused_(std::move(refused)) {}
  Status Connect() override { return inner_.Connect(); }
  bool connected() const override { return inner_.connected(); }
  void Close() override { inner_.Close(); }
  Status RenewPublishChannel() override { return inner_.RenewPublishChannel(); }
  Status Declare(const amqp::Topology& t) override { return inner_.Declare(t); }
  Result<std::string> DeclareReplyQueue() override { return inner_.DeclareReplyQueue(); }
  Status Publish(const amqp::Publication& p, std::chrono::milliseconds timeout) override {
    return inner_.Publish(p, timeout);
  }
  std::vector<Status> PublishAll(const std::vector<amqp::Publication>& publications,
                                 std::chrono::milliseconds timeout) override {
    std::vector<Status> out;
    for (size_t i = 0; i < publications.size(); ++i) {
      out.push_back(refused_.contains(i) ? Unavailable("basic.nack")
                                         : inner_.Publish(publications[i], timeout));
    }
    return out;
  }
  Result<std::string> Consume(const std::string& q, uint16_t prefetch) override {
    return inner_.Consume(q, prefetch);
  }
  Result<std::string> ConsumeStream(const std::string& q, uint16_t prefetch,
                                    int64_t from) override {
    return inner_.ConsumeStream(q, prefetch, from);
  }
  Status Cancel(const std::string& tag) override { return inner_.Cancel(tag); }
  Result<std::optional<amqp::Delivery>> Next(std::chrono::milliseconds timeout) override {
    return inner_.Next(timeout);
  }
  Status Ack(uint64_t tag) override { return inner_.Ack(tag); }
  Status Nack(uint64_t tag, bool requeue) override { return inner_.Nack(tag, requeue); }
  Status Reject(uint64_t tag, bool requeue) override { return inner_.Reject(tag, requeue); }
  Result<std::optional<amqp::Delivery>> Get(const std::string& q) override { return inner_.Get(q); }
  Result<amqp::QueueInfo> Inspect(const std::string& q) override { return inner_.Inspect(q); }
  Status Poll() override { return inner_.Poll(); }

 private:
  amqp::FakeSession& inner_;
  std::set<size_t> refused_;
};

// A fake broker with syncbus's topology declared over `session`, the daemon's connection.
struct DeclaredBroker {
  FakeClock clock;
  amqp::FakeBroker broker{clock};
  amqp::FakeSession session{broker, "daemon"};
  DeclaredBroker() {
    REQUIRE(session.Connect().ok());
    REQUIRE(session.Declare(amqp::SyncbusTopology()).ok());
  }
};

}  // namespace

TEST_CASE("a trace event encodes and decodes losslessly, for every step") {
  TraceEvent settled = Settled();
  auto back = DecodeTraceEvent(EncodeTraceEvent(settled));
  REQUIRE_MESSAGE(back.ok(), back.status().message());
  CHECK(*back == settled);

  TraceEvent published;
  published.step = TraceStep::kPublished;
  published.cluster = "fleet/c-1";
  published.request = "id";
  published.at = *ParseRfc3339("2026-11-23T22:55:59.441Z");
  published.decided_at = *ParseRfc3339("2026-11-23T22:55:59.439Z");
  published.reason = "startup";
  published.lane = "resync";
  back = DecodeTraceEvent(EncodeTraceEvent(published));
  REQUIRE(back.ok());
  CHECK(*back == published);
}

TEST_CASE("trace event decoding names what is wrong") {
  struct Case {
    std::string body;
    const char* expect;
  };
  const std::string head =
      R"({"version":1,"cluster":"a/b","request":"r","at":"2026-11-23T22:56:02Z",)";
  Case cases[] = {
      {"not json", "not valid JSON"},
      {"[1]", "not a JSON object"},
      {R"({"step":"delivered"})", "missing field \"version\""},
      {R"({"version":2,"step":"delivered"})", "unsupported version 2"},
      {R"({"version":1,"step":"lost"})", "unknown step \"lost\""},
      {R"({"version":1,"step":"delivered","request":"r","at":"2026-11-23T22:56:02Z"})",
       "missing field \"cluster\""},
      {R"({"version":1,"step":"delivered","cluster":"b","request":"r","at":"2026-11-23T22:56:02Z"})",
       "namespace/name"},
      {R"({"version":1,"step":"delivered","cluster":"A/b","request":"r","at":"2026-11-23T22:56:02Z"})",
       "namespace/name"},
      {R"({"version":1,"step":"delivered","cluster":"a/b","request":"r","at":"noon"})",
       "\"at\" is not an RFC 3339 time"},
      {head + R"("step":"delivered","durationMs":-1})", "\"durationMs\" is out of range"},
      {head + R"("step":"delivered","lane":"fast"})", "unknown lane \"fast\""},
      {head + R"("step":"settled"})", "belongs to settled events"},
      {head + R"("step":"delivered","outcome":"applied"})", "belongs to settled events"},
      {head + R"("step":"settled","outcome":"vanished"})", "unknown outcome \"vanished\""},
      {head + R"("step":"settled","outcome":"applied","sets":{}})", "\"sets\" must be an array"},
      {head + R"("step":"settled","outcome":"applied","sets":[{"kind":"Pod","name":"x"}]})",
       "sets[0].kind"},
      {head + R"("step":"settled","outcome":"applied","sets":[{"kind":"SyncSet"}]})",
       "missing field \"sets[0].name\""},
      {head + R"("step":"delivered","attempt":"2"})", "\"attempt\" must be an integer"},
      {std::string(kMaxTraceEventBytes + 1, ' '), "exceeds the limit"},
  };
  for (const auto& c : cases) {
    auto r = DecodeTraceEvent(c.body);
    INFO(c.body.substr(0, 120));
    REQUIRE_FALSE(r.ok());
    CHECK_MESSAGE(r.status().message().find(c.expect) != std::string::npos, r.status().message());
  }
  std::string many = head + R"("step":"settled","outcome":"applied","sets":[)";
  for (size_t i = 0; i <= kMaxTraceSets; ++i)
    many += std::string(i ? "," : "") + R"({"kind":"SyncSet","name":"s"})";
  auto r = DecodeTraceEvent(many + "]}");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("more than 64 sets") != std::string::npos);
}

TEST_CASE("events are batched many to a message, within the batch's bounds, and read back") {
  std::vector<TraceEvent> events;
  for (int i = 0; i < 7; ++i) {
    TraceEvent e = Settled();
    e.attempt = i;
    events.push_back(e);
  }
  auto one = TraceBatches(Pointers(events));
  REQUIRE(one.size() == 1);
  const amqp::Publication& p = one[0].publication;
  CHECK(p.exchange == amqp::kTraceExchange);
  CHECK_FALSE(p.mandatory);
  CHECK(p.message.message_id == "fleet/c-1/0123456789ab/7/settled+7");
  CHECK(p.message.timestamp == 1795474562);
  CHECK(p.message.app_id == "syncbus-consumer/c-1");
  CHECK(Events({p.message}) == events);

  auto by_count = TraceBatches(Pointers(events), 3);
  REQUIRE(by_count.size() == 3);
  CHECK(by_count[0].first == 0);
  CHECK(by_count[0].end == 3);
  CHECK(by_count[2].first == 6);
  CHECK(by_count[2].end == 7);
  std::vector<amqp::Message> messages;
  for (const auto& b : by_count) messages.push_back(b.publication.message);
  CHECK(Events(messages) == events);

  // By size: no body over the bound, unless one event alone is larger.
  const size_t size = one[0].publication.message.body.size();
  auto by_bytes = TraceBatches(Pointers(events), 100, size / 3);
  CHECK(by_bytes.size() >= 3);
  messages.clear();
  for (const auto& b : by_bytes) {
    CHECK(b.publication.message.body.size() <= size / 3);
    messages.push_back(b.publication.message);
  }
  CHECK(Events(messages) == events);
  CHECK(TraceBatches(Pointers(events), 100, 10).size() == 7);
  CHECK(TraceBatches({}).empty());
}

TEST_CASE("a trace message is a batch or one event, and a bad event spoils only itself") {
  const std::string v1 = EncodeTraceEvent(Settled());
  auto single = DecodeTraceMessage(v1);
  REQUIRE_MESSAGE(single.ok(), single.status().message());
  CHECK(single->events == std::vector<TraceEvent>{Settled()});

  const std::string event = v1.substr(0, v1.size() - 1);  // still carries "version":1: ignored
  auto mixed = DecodeTraceMessage(R"({"version":2,"events":[)" + event + R"(},{"step":"lost"},7,)" +
                                  event + "}]}");
  REQUIRE_MESSAGE(mixed.ok(), mixed.status().message());
  CHECK(mixed->events.size() == 2);
  CHECK(mixed->invalid == 2);

  std::string too_many = "0";
  for (size_t i = 0; i < kMaxTraceBatchEvents; ++i) too_many += ",0";
  struct Case {
    std::string body;
    const char* expect;
  };
  Case cases[] = {
      {"[]", "not a JSON object"},
      {R"({"events":[]})", "missing field \"version\""},
      {R"({"version":3,"events":[]})", "unsupported version 3"},
      {R"({"version":2})", "\"events\" must be an array"},
      {R"({"version":2,"events":{}})", "\"events\" must be an array"},
      {R"({"version":2,"events":[)" + too_many + "]}", "more than 2000 events"},
      {R"({"version":1,"step":"lost"})", "unknown step"},
      {"{\"version\":1,\"pad\":\"" + std::string(kMaxTraceEventBytes, ' ') + "\"}",
       "exceeds the limit of 16384"},
      {"{\"version\":2,\"pad\":\"" + std::string(kMaxTraceMessageBytes, ' ') + "\"}",
       "exceeds the limit of 1048576"},
  };
  for (const auto& c : cases) {
    auto r = DecodeTraceMessage(c.body);
    INFO(c.body.substr(0, 120));
    REQUIRE_FALSE(r.ok());
    CHECK_MESSAGE(r.status().message().find(c.expect) != std::string::npos, r.status().message());
  }
}

TEST_CASE("the recorder stamps its actor, publishes on flush and counts what it publishes") {
  DeclaredBroker b;
  prometheus::Registry registry;
  TraceRecorder recorder("consumer-7", registry);
  recorder.Record(Settled());
  recorder.Record(Settled());
  CHECK(recorder.buffered() == 2);
  auto flushed = recorder.Flush(b.session, 1s);
  REQUIRE(flushed.ok());
  CHECK(*flushed == 2);
  CHECK(recorder.buffered() == 0);
  auto messages = b.broker.ReadyMessages(amqp::kTraceQueue);
  REQUIRE(messages.size() == 1);  // one batch
  auto events = Events(messages);
  REQUIRE(events.size() == 2);
  CHECK(events[0].actor == "consumer-7");
  CHECK(Count(registry, "published") == 2);
  auto empty = recorder.Flush(b.session, 1s);  // nothing buffered: no publish
  REQUIRE(empty.ok());
  CHECK(*empty == 0);
}

TEST_CASE("a refused batch keeps its events, in order, and the confirmed ones are not sent again") {
  DeclaredBroker b;
  prometheus::Registry registry;
  TraceRecorder recorder("c", registry, 10000, &b.clock);
  const size_t total = kTraceBatchEvents * 2 + 10;  // three batches, bounded by their count
  for (size_t i = 0; i < total; ++i) {
    TraceEvent e;
    e.step = TraceStep::kDelivered;
    e.cluster = "fleet/c-1";
    e.request = "fleet/c-1/0123456789ab/7";
    e.attempt = static_cast<int>(i);
    recorder.Record(e);
  }
  RefusingSession refusing(b.session, {1});
  auto flushed = recorder.Flush(refusing);
  REQUIRE_FALSE(flushed.ok());
  CHECK(flushed.status().message().find("(500 kept, 0 dropped") != std::string::npos);
  CHECK(recorder.buffered() == kTraceBatchEvents);
  CHECK(Count(registry, "published") == kTraceBatchEvents + 10);

  b.clock.Advance(TraceRecorder::kFirstHoldOff);
  auto sent = recorder.Flush(b.session);
  REQUIRE_MESSAGE(sent.ok(), sent.status().ToString());
  CHECK(*sent == kTraceBatchEvents);
  auto events = Events(b.broker.ReadyMessages(amqp::kTraceQueue));
  REQUIRE(events.size() == total);
  std::vector<int> order;
  for (const auto& e : events) order.push_back(e.attempt);
  std::vector<int> expected;
  for (size_t i = 0; i < total; ++i) expected.push_back(static_cast<int>(i));
  std::sort(order.begin(), order.end());
  CHECK(order == expected);                                                     // each once
  CHECK(events.back().attempt == static_cast<int>(2 * kTraceBatchEvents - 1));  // sent last
}

TEST_CASE("a full recorder drops its oldest events and counts them") {
  prometheus::Registry registry;
  TraceRecorder recorder("c", registry, 3);
  for (int i = 0; i < 5; ++i) {
    TraceEvent e = Settled();
    e.attempt = i;
    recorder.Record(e);
  }
  CHECK(recorder.buffered() == 3);
  CHECK(Count(registry, "dropped-full") == 2);

  DeclaredBroker b;
  REQUIRE(recorder.Flush(b.session, 1s).ok());
  auto events = Events(b.broker.ReadyMessages(amqp::kTraceQueue));
  REQUIRE(events.size() == 3);
  CHECK(events[0].attempt == 2);  // the newest three survive
}

TEST_CASE("a refused event is kept for two more flushes, then dropped and counted") {
  FakeClock clock;
  amqp::FakeBroker broker(clock);
  amqp::FakeSession session(broker, "daemon");
  REQUIRE(session.Connect().ok());  // no topology: the trace exchange does not exist
  prometheus::Registry registry;
  TraceRecorder recorder("c", registry, 100, &clock);
  recorder.Record(Settled());
  for (int flush = 1; flush <= TraceRecorder::kMaxFlushes; ++flush) {
    auto flushed = recorder.Flush(session, 1s);
    REQUIRE_FALSE(flushed.ok());
    const bool last = flush == TraceRecorder::kMaxFlushes;
    CHECK(flushed.status().message().find(last ? "(0 kept, 1 dropped" : "(1 kept, 0 dropped") !=
          std::string::npos);
    CHECK(recorder.buffered() == (last ? 0 : 1));
    clock.Advance(TraceRecorder::kMaxHoldOff);
  }
  CHECK(Count(registry, "dropped-failed") == 1);
}

TEST_CASE("a flush that loses its connection keeps the events for the next, in order") {
  DeclaredBroker b;
  prometheus::Registry registry;
  TraceRecorder recorder("c", registry, 100, &b.clock);
  for (int i = 0; i < 3; ++i) {
    TraceEvent e = Settled();
    e.attempt = i;
    recorder.Record(e);
  }
  b.broker.DropConnections();  // the broker closed it (a restart, missed heartbeats)
  auto lost = recorder.Flush(b.session);
  REQUIRE_FALSE(lost.ok());
  CHECK(recorder.buffered() == 3);
  CHECK(Count(registry, "dropped-failed") == 0);

  TraceEvent later = Settled();
  later.attempt = 3;
  recorder.Record(later);
  REQUIRE(b.session.Connect().ok());
  b.clock.Advance(TraceRecorder::kFirstHoldOff);
  auto sent = recorder.Flush(b.session);
  REQUIRE_MESSAGE(sent.ok(), sent.status().ToString());
  CHECK(*sent == 4);
  auto events = Events(b.broker.ReadyMessages(amqp::kTraceQueue));
  REQUIRE(events.size() == 4);
  for (int i = 0; i < 4; ++i) CHECK(events[i].attempt == i);
}

TEST_CASE("after a failed flush the recorder holds off, longer each time, and keeps its events") {
  FakeClock clock;
  amqp::FakeBroker broker(clock);
  amqp::FakeSession session(broker, "daemon");
  REQUIRE(session.Connect().ok());  // no topology yet: flushes fail
  prometheus::Registry registry;
  TraceRecorder recorder("c", registry, 100, &clock);
  recorder.Record(Settled());
  auto failed = recorder.Flush(session);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().message().find("next attempt in 5 s") != std::string::npos);
  REQUIRE(session.Declare(amqp::SyncbusTopology()).ok());  // the broker is fine again

  recorder.Record(Settled());
  auto held = recorder.Flush(session);  // within the hold-off: nothing is sent
  REQUIRE(held.ok());
  CHECK(*held == 0);
  CHECK(recorder.buffered() == 2);  // the failed one is kept
  clock.Advance(5s);
  auto sent = recorder.Flush(session);
  REQUIRE(sent.ok());
  CHECK(*sent == 2);
  CHECK(Events(broker.ReadyMessages(amqp::kTraceQueue)).size() == 2);

  // A success resets the hold-off; repeated failures double it up to a minute.
  amqp::FakeSession bare(broker, "other");  // never connected: every publish fails
  std::vector<std::string> waits;
  for (int i = 0; i < 6; ++i) {
    recorder.Record(Settled());
    auto f = recorder.Flush(bare);
    REQUIRE_FALSE(f.ok());
    std::string message = f.status().message();
    size_t at = message.find("next attempt in ");
    waits.push_back(message.substr(at, message.find(')', at) - at));
    clock.Advance(60s);
  }
  CHECK(waits == std::vector<std::string>{"next attempt in 5 s", "next attempt in 10 s",
                                          "next attempt in 20 s", "next attempt in 40 s",
                                          "next attempt in 60 s", "next attempt in 60 s"});
}

TEST_CASE("the recorder takes events from many threads at once [concurrent]") {
  prometheus::Registry registry;
  TraceRecorder recorder("c", registry, 100000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) recorder.Record(Settled());
    });
  }
  for (auto& t : threads) t.join();
  CHECK(recorder.buffered() == 2000);
}
