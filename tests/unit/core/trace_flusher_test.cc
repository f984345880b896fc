#include "common/bus/trace_flusher.h"

#include <doctest/doctest.h>
#include <prometheus/registry.h>

#include "common/bus/topology.h"
#include "tests/fakes/common/amqp/fake_session.h"
#include "tests/fakes/common/fake_clock.h"
#include "tests/fakes/common/fake_random.h"

using namespace syncbus;
using namespace std::chrono_literals;

namespace {

TraceEvent FlushedEvent(int attempt) {
  TraceEvent e;
  e.step = TraceStep::kPublished;
  e.cluster = "fleet/c-1";
  e.request = "fleet/c-1/0123456789ab/" + std::to_string(attempt);
  e.actor = "syncbus-publisher/p-1";
  e.attempt = attempt;
  return e;
}

// A broker with the syncbus topology declared (by the daemon's own connection, as in a daemon)
// and a flusher on a connection of its own.
struct FlusherFixture {
  FakeClock clock;
  FakeRandom random;
  amqp::FakeBroker broker{clock, {.heartbeat = 10s}};
  amqp::FakeSession daemon{broker, "syncbus-publisher/p-1"};
  prometheus::Registry registry;
  TraceRecorder recorder{"syncbus-publisher/p-1", registry, 100, &clock};
  std::unique_ptr<TraceFlusher> flusher;

  FlusherFixture() {
    REQUIRE(daemon.Connect().ok());
    REQUIRE(daemon.Declare(amqp::SyncbusTopology()).ok());
    flusher = std::make_unique<TraceFlusher>(
        recorder, std::make_unique<amqp::FakeSession>(broker, "syncbus-publisher/p-1/trace"), clock,
        random);
  }
};

// Every event on the trace stream, in order.
std::vector<TraceEvent> Traced(FlusherFixture& f) {
  std::vector<TraceEvent> out;
  for (const auto& m : f.broker.ReadyMessages(amqp::kTraceQueue)) {
    auto decoded = DecodeTraceMessage(m.body);
    REQUIRE_MESSAGE(decoded.ok(), decoded.status().message());
    for (auto& e : decoded->events) out.push_back(std::move(e));
  }
  return out;
}

// After a first event published: a second one goes out with the next turn.
void CheckNextEventPublished(FlusherFixture& f) {
  f.recorder.Record(FlushedEvent(2));
  auto sent = f.flusher->Turn();
  REQUIRE_MESSAGE(sent.ok(), sent.status().ToString());
  CHECK(*sent == 1);
  CHECK(Traced(f).size() == 2);
}

}  // namespace

TEST_CASE("the trace flusher publishes on a connection of its own, opened once there are events") {
  FlusherFixture f;
  auto idle = f.flusher->Turn();
  REQUIRE(idle.ok());
  CHECK(*idle == 0);
  CHECK(f.broker.LiveConnections() == 1);  // nothing to publish: no connection
  f.recorder.Record(FlushedEvent(1));
  f.recorder.Record(FlushedEvent(2));
  auto sent = f.flusher->Turn();
  REQUIRE(sent.ok());
  CHECK(*sent == 2);
  CHECK(f.broker.LiveConnections() == 2);
  auto traced = Traced(f);
  REQUIRE(traced.size() == 2);
  CHECK(traced[1].attempt == 2);
  CHECK(f.recorder.buffered() == 0);
}

TEST_CASE("a trace flusher that cannot connect keeps the events and tries again after a back-off") {
  FlusherFixture f;
  f.broker.SetAvailable(false);
  REQUIRE(f.daemon.Connect().ok() == false);
  f.recorder.Record(FlushedEvent(1));
  auto refused = f.flusher->Turn();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("connecting to publish trace events (next attempt in "
                                        "800 ms)") != std::string::npos);
  CHECK(f.recorder.buffered() == 1);
  f.broker.SetAvailable(true);
  auto early = f.flusher->Turn();  // within the back-off: no attempt, nothing lost
  REQUIRE(early.ok());
  CHECK(*early == 0);
  CHECK(f.broker.LiveConnections() == 0);
  CHECK(f.recorder.buffered() == 1);
  f.clock.Advance(800ms);
  auto sent = f.flusher->Turn();
  REQUIRE(sent.ok());
  CHECK(*sent == 1);
  CHECK(Traced(f).size() == 1);
}

TEST_CASE(
    "a quiet trace flusher answers heartbeats, so its next event goes out on its connection") {
  FlusherFixture f;
  f.recorder.Record(FlushedEvent(1));
  REQUIRE(f.flusher->Turn().ok());
  // A minute with nothing recorded (a consumer with no work), turning every period as its
  // thread does: the broker would close a connection silent for two heartbeat intervals.
  for (int i = 0; i < 240; ++i) {
    f.clock.Advance(TraceFlusher::kPeriod);
    REQUIRE(f.flusher->Turn().ok());
  }
  CheckNextEventPublished(f);
}

TEST_CASE("a trace flusher whose connection the broker closed while quiet opens another") {
  FlusherFixture f;
  f.recorder.Record(FlushedEvent(1));
  REQUIRE(f.flusher->Turn().ok());
  f.broker.DropConnections();
  REQUIRE(f.flusher->Turn().ok());  // quiet: the loss is noticed, nothing is lost
  CheckNextEventPublished(f);
}

TEST_CASE("stopping the trace flusher publishes what was recorded and closes its connection") {
  FlusherFixture f;
  f.recorder.Record(FlushedEvent(1));
  f.flusher->Stop();
  CHECK(Traced(f).size() == 1);
  CHECK(f.broker.LiveConnections() == 1);  // the daemon's own
  f.flusher->Stop();                       // idempotent
}

TEST_CASE("the trace flusher's thread publishes events recorded while it runs [concurrent]") {
  FlusherFixture f;
  f.flusher = std::make_unique<TraceFlusher>(
      f.recorder, std::make_unique<amqp::FakeSession>(f.broker, "trace"), f.clock, f.random, 1ms);
  f.flusher->Start();
  for (int i = 0; i < 50; ++i) f.recorder.Record(FlushedEvent(i));
  f.flusher->Stop();
  CHECK(Traced(f).size() == 50);
  CHECK(f.recorder.buffered() == 0);
}
