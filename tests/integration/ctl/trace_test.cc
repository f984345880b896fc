// The trace stream on a real RabbitMQ 3.10: events are read from a point in time without being
// consumed, in batches and one to a message (as syncbus wrote them before batches), filtered by
// cluster, undecodable ones skipped and counted; an empty window ends on quiet; a second copy of
// an event is read once, in whatever batch it came; `dlq replay` records the replay; and a daemon's
// recorder reaches it, through a flusher whose connection outlives a quiet spell.
#include <thread>

#include <doctest/doctest.h>
#include <prometheus/registry.h>

#include "common/amqp/session_impl.h"
#include "common/bus/retry_policy.h"
#include "common/bus/sync_message.h"
#include "common/bus/topology.h"
#include "common/bus/trace_event.h"
#include "common/bus/trace_flusher.h"
#include "common/bus/trace_recorder.h"
#include "common/random_impl.h"
#include "ctl/dead_letters.h"
#include "ctl/trace_reader.h"
#include "tests/support/test_broker.h"

using namespace syncbus;
using namespace syncbus::ctl;
using namespace std::chrono_literals;

namespace {

struct TraceBroker {
  testing::TestVhost vhost = testing::NewTestVhost();
  amqp::RabbitmqSession session{vhost.Options("trace-test")};

  TraceBroker() {
    REQUIRE(session.Connect().ok());
    REQUIRE(session.Declare(amqp::SyncbusTopology()).ok());
  }
};

TraceEvent Event(const std::string& cluster, WallTime at, TraceStep step = TraceStep::kDelivered) {
  TraceEvent e;
  e.step = step;
  e.cluster = cluster;
  e.request = cluster + "/rev/1";
  e.at = at;
  e.lane = "change";
  e.actor = "test";
  if (step == TraceStep::kSettled) e.outcome = TraceOutcome::kApplied;
  return e;
}

// Events in one message of the trace exchange, as a recorder's flush sends them.
amqp::Publication Batch(const std::vector<TraceEvent>& events) {
  std::vector<const TraceEvent*> pointers;
  for (const auto& e : events) pointers.push_back(&e);
  auto batches = TraceBatches(pointers);
  REQUIRE(batches.size() == 1);
  return batches[0].publication;
}

// One event alone, as syncbus wrote them before batches (version 1).
amqp::Publication Single(const TraceEvent& event) {
  amqp::Publication p{amqp::kTraceExchange, "", {}};
  p.message.body = EncodeTraceEvent(event);
  p.message.content_type = "application/json";
  return p;
}

}  // namespace

TEST_CASE(
    "a trace read starts at a point in time, filters by cluster and leaves the stream as it was") {
  TraceBroker b;
  const WallTime now = RealClock().WallNow();
  const TraceEvent settled = Event("ns1/a", now - 7s, TraceStep::kSettled);
  std::vector<amqp::Publication> pubs = {
      Single(Event("ns1/old", now - 2h)),
      Single(Event("ns1/a", now - 10s)),
      Batch({Event("ns2/a", now - 9s), Event("ns1/b", now - 8s), settled}),
  };
  amqp::Publication junk = pubs[1];
  junk.message.body = "{\"version\":1,\"step\":\"forged\"}";
  pubs.push_back(junk);
  // A batch with a forged event in it: the others are read.
  amqp::Publication mixed = Batch({Event("ns3/x", now - 6s)});
  mixed.message.body.insert(mixed.message.body.size() - 2, R"(,{"step":"forged"})");
  pubs.push_back(mixed);
  // The settled event published again, in another batch (its confirm was lost): read once.
  pubs.push_back(Batch({settled, Event("ns3/y", now - 5s)}));
  for (const auto& s : b.session.PublishAll(pubs, 10s)) REQUIRE_MESSAGE(s.ok(), s.ToString());

  TraceQuery all;
  all.since = now - 1h;
  all.until = now + 1h;
  all.quiet = 1s;
  auto read = ReadTrace(b.session, all);
  REQUIRE_MESSAGE(read.ok(), read.status().ToString());
  // Not the one from two hours ago, not the forged ones, the settled one once.
  CHECK(read->events.size() == 6);
  CHECK(read->undecodable == 2);
  CHECK(read->scanned == 10);

  TraceQuery one = all;
  one.cluster = "ns1/a";
  read = ReadTrace(b.session, one);
  REQUIRE(read.ok());
  REQUIRE(read->events.size() == 2);
  CHECK(read->events[0].step == TraceStep::kDelivered);
  CHECK(read->events[1].step == TraceStep::kSettled);

  one.cluster = "a";  // a bare name: every namespace
  read = ReadTrace(b.session, one);
  REQUIRE(read.ok());
  CHECK(read->events.size() == 3);

  // Nothing was consumed: a stream keeps what it was sent.
  read = ReadTrace(b.session, all);
  REQUIRE(read.ok());
  CHECK(read->events.size() == 6);

  TraceQuery future = all;
  future.since = now + 30min;
  auto started = std::chrono::steady_clock::now();
  read = ReadTrace(b.session, future);
  REQUIRE(read.ok());
  CHECK(read->events.empty());
  CHECK(std::chrono::steady_clock::now() - started < 5s);  // ends on quiet
}

TEST_CASE("a read stops at the first event recorded after its end") {
  TraceBroker b;
  const WallTime now = RealClock().WallNow();
  std::vector<amqp::Publication> pubs;
  for (int i = 0; i < 3; ++i)
    pubs.push_back(Single(Event("ns1/a", now - 5s + std::chrono::seconds(i))));
  pubs.push_back(Batch({Event("ns1/a", now + 1h), Event("ns1/a", now - 4s)}));
  for (const auto& s : b.session.PublishAll(pubs, 10s)) REQUIRE(s.ok());
  TraceQuery q;
  q.since = now - 1min;
  q.until = now;
  q.quiet = 5s;
  auto started = std::chrono::steady_clock::now();
  auto read = ReadTrace(b.session, q);
  REQUIRE(read.ok());
  CHECK(read->events.size() == 3);
  CHECK(std::chrono::steady_clock::now() - started < 4s);  // did not wait for quiet
}

TEST_CASE("a recorder's flush and a dlq replay both land on the trace stream") {
  TraceBroker b;
  prometheus::Registry registry;
  TraceRecorder recorder("syncbus-consumer/c-1", registry);
  const WallTime now = RealClock().WallNow();
  recorder.Record(Event("ns1/a", now));
  auto flushed = recorder.Flush(b.session, 10s);
  REQUIRE_MESSAGE(flushed.ok(), flushed.status().ToString());
  CHECK(*flushed == 1);

  amqp::Delivery d;
  d.routing_key = "change";
  SyncRequest r;
  r.cluster_namespace = "ns1";
  r.cluster_name = "a";
  r.reason = "syncset-changed";
  r.enqueued_at = "2026-01-01T00:00:00.000Z";
  d.message = ToAmqpMessage(r, "syncbus-publisher", "ns1/a/rev/9", now);
  REQUIRE(b.session.Publish(ParkedCopy(d, "delivery_limit", "crashed", now), 10s).ok());
  DlqScanOptions replay;
  replay.action = DlqAction::kReplay;
  replay.trace_replays = true;
  auto done = ScanDeadLetters(b.session, replay, RealClock());
  REQUIRE(done.ok());
  CHECK(done->progress.done == 1);

  TraceQuery q;
  q.since = now - 1min;
  q.until = RealClock().WallNow() + 1min;
  q.cluster = "ns1/a";
  auto read = ReadTrace(b.session, q);
  REQUIRE(read.ok());
  REQUIRE(read->events.size() == 2);
  CHECK(read->events[0].actor == "syncbus-consumer/c-1");
  CHECK(read->events[1].step == TraceStep::kReplayed);
  CHECK(read->events[1].request == "ns1/a/rev/9");
  CHECK(read->events[1].reason == "delivery_limit");
}

TEST_CASE("events of one instant are ordered as a request goes: sent, delivered, settled") {
  TraceBroker b;
  const WallTime at = RealClock().WallNow() - 5s;
  // Appended in the order a loopback replay can produce: the consumer's delivery and settlement
  // land on the stream before syncbusctl's record of the replay, all in one millisecond.
  std::vector<amqp::Publication> pubs = {
      Single(Event("ns/a", at, TraceStep::kSettled)),
      Batch({Event("ns/a", at, TraceStep::kDelivered)}),
      Single(Event("ns/a", at, TraceStep::kReplayed)),
  };
  for (const auto& s : b.session.PublishAll(pubs, 10s)) REQUIRE_MESSAGE(s.ok(), s.ToString());
  TraceQuery q;
  q.since = at - 1s;
  q.until = at + 1s;
  q.quiet = 1s;
  q.cluster = "ns/a";
  auto read = ReadTrace(b.session, q);
  REQUIRE_MESSAGE(read.ok(), read.status().ToString());
  REQUIRE(read->events.size() == 3);
  CHECK(read->events[0].step == TraceStep::kReplayed);
  CHECK(read->events[1].step == TraceStep::kDelivered);
  CHECK(read->events[2].step == TraceStep::kSettled);
}

TEST_CASE("a quiet trace flusher keeps its connection: the next event is published on it") {
  TraceBroker b;
  prometheus::Registry registry;
  TraceRecorder recorder("syncbus-consumer/c-1", registry);
  amqp::ConnectionOptions options = b.vhost.Options("trace-flusher");
  options.heartbeat_seconds = 1;  // the broker gives up on a silent client after about 2 s
  auto session = std::make_unique<amqp::RabbitmqSession>(options);
  amqp::Session& connection = *session;
  TraceFlusher flusher(recorder, std::move(session), RealClock(), RealRandom(), 50ms);
  const WallTime now = RealClock().WallNow();
  recorder.Record(Event("ns1/quiet", now));
  REQUIRE(flusher.Turn().ok());
  REQUIRE(connection.connected());

  // Four heartbeat intervals with nothing to publish, the flusher turning as in a daemon.
  flusher.Start();
  std::this_thread::sleep_for(4s);
  CHECK(connection.connected());
  recorder.Record(Event("ns1/quiet", now + 1s, TraceStep::kSettled));
  flusher.Stop();  // its last turn publishes the event, on the same connection
  CHECK(recorder.buffered() == 0);

  TraceQuery q;
  q.since = now - 1min;
  q.until = now + 1min;
  q.cluster = "ns1/quiet";
  auto read = ReadTrace(b.session, q);
  REQUIRE(read.ok());
  CHECK(read->events.size() == 2);
}
