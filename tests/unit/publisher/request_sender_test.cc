#include "publisher/request_sender.h"

#include <algorithm>

#include <doctest/doctest.h>
#include <prometheus/registry.h>

#include "common/bus/topology.h"
#include "common/bus/trace_event.h"
#include "tests/fakes/common/amqp/fake_session.h"
#include "tests/fakes/common/fake_clock.h"

using namespace syncbus;
using namespace syncbus::publisher;
using namespace std::chrono_literals;

// Its own namespace: the unit tests of an area compile as one unity batch.
namespace request_sender_test {

SyncRequest Request(const std::string& cluster, amqp::Lane lane = amqp::Lane::kChange) {
  SyncRequest r;
  r.cluster_namespace = r.cluster_name = cluster;
  r.revision = "0123456789abcdef";
  r.lane = lane;
  r.reason = "generation-changed";
  r.enqueued_at = "2026-01-01T00:00:00.000Z";
  return r;
}

double CounterValue(prometheus::Registry& registry, const std::string& name,
                    const std::string& label = "") {
  double sum = 0;
  for (const auto& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const auto& m : family.metric) {
      bool match = label.empty();
      for (const auto& l : m.label) match |= l.value == label;
      if (match) sum += m.counter.value;
    }
  }
  return sum;
}

struct Fixture {
  FakeClock clock;
  amqp::FakeBroker broker{clock};
  amqp::FakeSession session{broker, "publisher"};
  prometheus::Registry registry;
  std::vector<SyncRequest> requests;

  explicit Fixture(amqp::TopologyOptions topology = {}) {
    REQUIRE(session.Connect().ok());
    REQUIRE(session.Declare(amqp::SyncbusTopology(topology)).ok());
    broker.SetPolicies(amqp::SyncbusTopology(topology).policies);
  }
  std::vector<const SyncRequest*> Batch(int n, amqp::Lane lane = amqp::Lane::kChange) {
    requests.clear();
    for (int i = 0; i < n; ++i) requests.push_back(Request("c" + std::to_string(i), lane));
    std::vector<const SyncRequest*> batch;
    for (const auto& r : requests) batch.push_back(&r);
    return batch;
  }
};

TEST_CASE("request sender: a confirmed batch is on its lane, counted and traced") {
  Fixture f;
  TraceRecorder trace("publisher-1", f.registry, 100, &f.clock);
  SenderOptions options;
  options.trace = &trace;
  RequestSender sender(f.session, f.clock, options, f.registry);
  auto out = sender.Send(f.Batch(2, amqp::Lane::kResync));
  REQUIRE(out.error.ok());
  CHECK(out.results == std::vector<SendResult>{SendResult::kConfirmed, SendResult::kConfirmed});
  CHECK(out.refused == 0);
  CHECK(out.sent_wall == f.clock.WallNow());
  auto queued = f.broker.ReadyMessages(amqp::WorkQueueName(amqp::Lane::kResync));
  REQUIRE(queued.size() == 2);
  CHECK(queued[0].message_id == "c0/c0/0123456789ab/1");
  CHECK(queued[1].message_id == "c1/c1/0123456789ab/2");
  auto decoded = DecodeSyncRequest(queued[0].body);
  REQUIRE(decoded.ok());
  CHECK(*decoded == f.requests[0]);
  CHECK(CounterValue(f.registry, "syncbus_publisher_enqueued_total", "generation-changed") == 2);
  // Recorded, not published: the batch waits for no trace confirms (a TraceFlusher publishes).
  CHECK(f.broker.ReadyMessages(amqp::kTraceQueue).empty());
  CHECK(trace.buffered() == 2);
  REQUIRE(trace.Flush(f.session).ok());
  auto traced = f.broker.ReadyMessages(amqp::kTraceQueue);
  REQUIRE(traced.size() == 1);  // one batch
  auto batch = DecodeTraceMessage(traced[0].body);
  REQUIRE(batch.ok());
  REQUIRE(batch->events.size() == 2);
  const TraceEvent* e = &batch->events[1];
  CHECK(e->step == TraceStep::kPublished);
  CHECK(e->request == "c1/c1/0123456789ab/2");
  CHECK(e->reason == "generation-changed");
  CHECK(e->lane == "resync");
}

TEST_CASE("request sender: a replica that may not publish sends nothing") {
  Fixture f;
  SenderOptions options;
  options.may_publish = [] { return false; };
  RequestSender sender(f.session, f.clock, options, f.registry);
  auto out = sender.Send(f.Batch(2));
  CHECK(out.error.code() == Code::kCancelled);
  CHECK(out.results == std::vector<SendResult>{SendResult::kNotSent, SendResult::kNotSent});
  CHECK(f.broker.ReadyMessages(amqp::WorkQueueName(amqp::Lane::kChange)).empty());
}

TEST_CASE("request sender: a broker outage fails the batch with an error") {
  Fixture f;
  RequestSender sender(f.session, f.clock, {}, f.registry);
  f.broker.SetAvailable(false);
  auto out = sender.Send(f.Batch(2));
  CHECK_FALSE(out.error.ok());
  CHECK(out.error.code() != Code::kCancelled);
  for (auto r : out.results) CHECK(r == SendResult::kFailed);
  CHECK(out.refused == 0);
  CHECK(CounterValue(f.registry, "syncbus_publisher_enqueued_total") == 0);
}

TEST_CASE("request sender: refusals on a live channel are no error until they go on for 3 s") {
  amqp::TopologyOptions topology;
  topology.max_length = 1;
  Fixture f(topology);
  RequestSender sender(f.session, f.clock, {}, f.registry);
  auto out = sender.Send(f.Batch(4));
  REQUIRE(out.error.ok());  // the connection is fine
  CHECK(out.results.front() == SendResult::kConfirmed);
  CHECK(out.results.back() == SendResult::kRefused);  // the queue is full
  CHECK(out.refused == static_cast<size_t>(std::count(out.results.begin(), out.results.end(),
                                                      SendResult::kRefused)));
  CHECK(CounterValue(f.registry, "syncbus_publisher_rejected_total") ==
        static_cast<double>(out.refused));
  f.clock.Advance(2s);
  out = sender.Send(f.Batch(1));
  CHECK(out.error.ok());
  CHECK_FALSE(out.renew_connection);
  f.clock.Advance(1s);
  out = sender.Send(f.Batch(1));
  CHECK(out.renew_connection);
  CHECK(out.error.message().find("opening a new connection") != std::string::npos);
  // The next streak waits twice as long (6 s) before asking again.
  f.clock.Advance(1s);
  CHECK(sender.Send(f.Batch(1)).error.ok());  // the streak starts
  f.clock.Advance(5s);
  CHECK(sender.Send(f.Batch(1)).error.ok());
  f.clock.Advance(1s);
  CHECK(sender.Send(f.Batch(1)).renew_connection);
}

}  // namespace request_sender_test
