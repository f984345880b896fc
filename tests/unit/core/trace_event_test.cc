#include "common/bus/trace_event.h"

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

TEST_CASE(
    "a trace publication goes to the trace exchange, not mandatory, with the cluster header") {
  amqp::Publication p = TraceEventPublication(Settled());
  CHECK(p.exchange == amqp::kTraceExchange);
  CHECK_FALSE(p.mandatory);
  CHECK(p.message.headers[kClusterHeader] == "fleet/c-1");
  CHECK(p.message.message_id == "fleet/c-1/0123456789ab/7/settled");
  CHECK(p.message.timestamp == 1795474562);
  CHECK(DecodeTraceEvent(p.message.body).ok());
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
  REQUIRE(messages.size() == 2);
  auto e = DecodeTraceEvent(messages[0].body);
  REQUIRE(e.ok());
  CHECK(e->actor == "consumer-7");
  CHECK(Count(registry, "published") == 2);
  auto empty = recorder.Flush(b.session, 1s);  // nothing buffered: no publish
  REQUIRE(empty.ok());
  CHECK(*empty == 0);
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
  auto messages = b.broker.ReadyMessages(amqp::kTraceQueue);
  REQUIRE(messages.size() == 3);
  CHECK(DecodeTraceEvent(messages[0].body)->attempt == 2);  // the newest three survive
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
  auto messages = b.broker.ReadyMessages(amqp::kTraceQueue);
  REQUIRE(messages.size() == 4);
  for (int i = 0; i < 4; ++i) CHECK(DecodeTraceEvent(messages[i].body)->attempt == i);
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
  CHECK(broker.ReadyMessages(amqp::kTraceQueue).size() == 2);

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
