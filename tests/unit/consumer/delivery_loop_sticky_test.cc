// Two consumers with sticky claims over one broker and one hub: a request for a cluster that the
// other consumer holds goes to that consumer's own queue of its lane, and runs there with no claim
// write.
#include <doctest/doctest.h>

#include "common/bus/sync_message.h"
#include "common/bus/topology.h"
#include "consumer/delivery_loop.h"
#include "consumer/hub_mirror.h"
#include "tests/fakes/common/amqp/fake_session.h"
#include "tests/fakes/common/fake_clock.h"
#include "tests/fakes/consumer/fake_liveness_view.h"
#include "tests/unit/consumer/fake_object_store.h"

using namespace syncbus;
using namespace syncbus::consumer;
using namespace std::chrono_literals;

namespace sticky_loop_test {

namespace res = kube::resources;

SyncRequest ForCluster(const std::string& name, amqp::Lane lane = amqp::Lane::kChange) {
  SyncRequest r;
  r.cluster_namespace = "ns1";
  r.cluster_name = name;
  r.revision = "rev-1";
  r.lane = lane;
  r.reason = lane == amqp::Lane::kChange ? "syncset-changed" : "resync";
  r.enqueued_at = "2026-01-01T00:00:00.000Z";
  return r;
}

// One consumer: its session, sticky claims and delivery loop, consuming its own queue too.
struct Member {
  std::string identity;
  amqp::FakeSession session;
  syncbus::testing::FakeLivenessView view;
  std::unique_ptr<ClusterLeases> leases;
  std::unique_ptr<DeliveryLoop> loop;
  std::mutex mu;
  std::vector<std::string> ran;

  Member(const std::string& id, amqp::FakeBroker& broker, syncbus::testing::FakeLiveness& world)
      : identity(id), session(broker, id), view(world, id) {}

  void Start(kube::Client& hub, HubMirror& mirror, Clock& clock, prometheus::Registry& registry,
             const amqp::TopologyOptions& topology) {
    REQUIRE(session.Connect().ok());
    REQUIRE(session.Declare(amqp::ConsumerTopology(identity, topology)).ok());
    LeaseOptions lease_options;
    lease_options.identity = identity;
    lease_options.liveness = &view;
    leases = std::make_unique<ClusterLeases>(lease_options, hub, clock, registry, &mirror);
    DeliveryOptions options;
    options.prefetch = 10;
    options.workers = 2;
    options.retry = {topology.retry_tiers, 4};
    options.own_queues = {amqp::ConsumerQueueName(identity, amqp::Lane::kChange),
                          amqp::ConsumerQueueName(identity, amqp::Lane::kResync)};
    SyncFunction sync = [this, &hub](const SyncRequest& r,
                                     const SyncFence& fence) -> Result<SyncOutcome> {
      // As the real syncer: the ClusterSync first, then the claim at the first fence call.
      (void)hub.Create(kube::Collection(res::kClusterSyncs, r.cluster_namespace),
                       {{"metadata",
                         {{"name", r.cluster_name},
                          {"namespace", r.cluster_namespace},
                          {"uid", "uid-" + r.cluster_name}}}});
      SYNCBUS_RETURN_IF_ERROR(fence());
      std::lock_guard lock(mu);
      ran.push_back(r.cluster_name);
      return SyncOutcome{};
    };
    loop = std::make_unique<DeliveryLoop>(options, session, sync, leases.get(), clock, registry);
    REQUIRE(loop->Subscribe().ok());
  }
  size_t runs() {
    std::lock_guard lock(mu);
    return ran.size();
  }
  // Steps this consumer alone until it has nothing in flight (its workers are real threads).
  void StepUntilIdle() {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    do {
      REQUIRE(loop->Step(0ms).ok());
    } while (loop->in_flight() > 0 && std::chrono::steady_clock::now() < deadline);
    REQUIRE(loop->in_flight() == 0);
  }
};

struct Pool {
  FakeClock clock;
  amqp::FakeBroker broker{clock};
  amqp::FakeSession publisher{broker, "publisher"};
  syncbus::testing::FakeObjectStore hub;
  HubMirror mirror;  // both consumers' watches, as if instant
  syncbus::testing::FakeLiveness world;
  prometheus::Registry registry;
  amqp::TopologyOptions topology;
  Member one{"consumer-1", broker, world}, two{"consumer-2", broker, world};

  Pool() {
    topology.retry_tiers = {1s, 2s};
    world.Live("consumer-1", 1);
    world.Live("consumer-2", 1);
    REQUIRE(publisher.Connect().ok());
    REQUIRE(publisher.Declare(amqp::SyncbusTopology(topology)).ok());
    one.Start(hub, mirror, clock, registry, topology);
    two.Start(hub, mirror, clock, registry, topology);
  }
  void Send(const SyncRequest& r) {
    amqp::Publication p{amqp::kWorkExchange, amqp::LaneName(r.lane),
                        ToAmqpMessage(r, "syncbus-publisher", "m", clock.WallNow())};
    REQUIRE(publisher.Publish(p, 1s).ok());
  }
};

}  // namespace sticky_loop_test

using sticky_loop_test::ForCluster;
const std::string kTwoChange = amqp::ConsumerQueueName("consumer-2", amqp::Lane::kChange);
const std::string kTwoResync = amqp::ConsumerQueueName("consumer-2", amqp::Lane::kResync);

TEST_CASE("a request for a cluster another consumer holds runs there, with no claim write") {
  sticky_loop_test::Pool p;
  p.Send(ForCluster("c1"));
  p.two.StepUntilIdle();  // consumer-2 takes the request, and the cluster's sticky claim
  REQUIRE(p.two.runs() == 1);
  CHECK(
      ClaimOf(p.hub.Peek(kube::Object(kube::resources::kClusterSyncLeases, "ns1", "c1"))).holder ==
      "consumer-2");
  const int writes = p.hub.writes();

  p.Send(ForCluster("c1"));
  p.one.StepUntilIdle();  // consumer-1 gets it: forwarded, not run
  CHECK(p.one.runs() == 0);
  auto forwarded = p.broker.ReadyMessages(kTwoChange);
  REQUIRE(forwarded.size() == 1);
  CHECK(HopsOf(forwarded[0]) == 1);

  p.two.StepUntilIdle();
  CHECK(p.two.runs() == 2);
  CHECK(p.hub.writes() == writes);  // a held cluster's next sync writes no claim
  CHECK(p.broker.ReadyMessages(kTwoChange).empty());
}

TEST_CASE("forwards keep their lane: a change never waits behind the holder's resync forwards") {
  sticky_loop_test::Pool p;
  for (const char* name : {"c1", "c2", "c3"}) {
    p.Send(ForCluster(name));
    p.two.StepUntilIdle();  // consumer-2 holds all three
  }
  REQUIRE(p.two.runs() == 3);

  // A full resync reaches consumer-1 first, then an edit of c3: all forwarded to consumer-2.
  for (const char* name : {"c1", "c2", "c3"}) {
    p.Send(ForCluster(name, amqp::Lane::kResync));
    p.one.StepUntilIdle();
  }
  p.Send(ForCluster("c3"));
  p.one.StepUntilIdle();
  CHECK(p.one.runs() == 0);
  auto resyncs = p.broker.ReadyMessages(kTwoResync);
  auto changes = p.broker.ReadyMessages(kTwoChange);
  REQUIRE(resyncs.size() == 3);
  REQUIRE(changes.size() == 1);
  CHECK(changes[0].headers[kClusterHeader] == "ns1/c3");
  CHECK(changes[0].headers[kLaneHeader] == "change");
  for (const auto& m : resyncs) CHECK(m.headers[kLaneHeader] == "resync");

  for (int i = 0; i < 4; ++i) p.two.StepUntilIdle();
  CHECK(p.two.runs() == 7);
  CHECK(p.broker.ReadyMessages(kTwoResync).empty());
}

TEST_CASE("a forward to a holder without a queue waits in the shortest tier instead") {
  sticky_loop_test::Pool p;
  p.Send(ForCluster("c1"));
  p.two.StepUntilIdle();
  p.broker.DeleteQueue(kTwoChange);
  p.Send(ForCluster("c1"));
  p.one.StepUntilIdle();
  CHECK(p.one.runs() == 0);
  auto deferred = p.broker.ReadyMessages("syncbus.retry.1s");
  REQUIRE(deferred.size() == 1);
  CHECK(AttemptOf(deferred[0]) == 0);
}

TEST_CASE("once the holder is gone, its cluster's next request runs anywhere") {
  sticky_loop_test::Pool p;
  p.Send(ForCluster("c1"));
  p.two.StepUntilIdle();
  p.world.Dead("consumer-2");
  p.Send(ForCluster("c1"));
  p.one.StepUntilIdle();
  CHECK(p.one.runs() == 1);  // taken over after a fresh read of consumer-2's liveness
  CHECK(p.world.fresh_reads() == 1);
}
