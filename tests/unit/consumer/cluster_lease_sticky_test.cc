// Sticky cluster claims (ClusterLeases with a LivenessView): held over many syncs while the holder
// lives, taken over only on a fresh read of the holder's liveness, voided by a lapse.
#include <doctest/doctest.h>

#include "consumer/cluster_lease.h"
#include "consumer/hub_mirror.h"
#include "tests/fakes/common/fake_clock.h"
#include "tests/fakes/consumer/fake_liveness_view.h"
#include "tests/unit/consumer/fake_object_store.h"

using namespace syncbus;
using namespace syncbus::consumer;
using namespace std::chrono_literals;

namespace sticky_claims_test {

namespace res = kube::resources;

// Two consumers with sticky claims over one hub, seen through one mirror (as if their watches
// were instant), both alive in epoch 1.
struct StickyPool {
  FakeClock clock;
  syncbus::testing::FakeObjectStore hub;
  syncbus::testing::FakeLiveness world;
  syncbus::testing::FakeLivenessView view_a{world, "consumer-a"}, view_b{world, "consumer-b"};
  prometheus::Registry registry;
  HubMirror mirror;
  size_t fleet = 2;
  ClusterLeases a{Options("consumer-a", view_a), hub, clock, registry, &mirror};
  ClusterLeases b{Options("consumer-b", view_b), hub, clock, registry, &mirror};

  StickyPool() {
    world.Live("consumer-a", 1);
    world.Live("consumer-b", 1);
    for (const char* name : {"c1", "c2"}) {
      Json cs = {
          {"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
          {"kind", "ClusterSync"},
          {"metadata", {{"namespace", "ns1"}, {"name", name}, {"uid", std::string("u-") + name}}}};
      hub.Overwrite(kube::Object(res::kClusterSyncs, "ns1", name), cs);
      mirror.handler(HubCollection::kClusterSyncs)
          .OnUpsert(hub.Peek(kube::Object(res::kClusterSyncs, "ns1", name)));
    }
  }
  LeaseOptions Options(const std::string& identity, LivenessView& view) {
    LeaseOptions o;
    o.identity = identity;
    o.duration = 20s;
    o.renew_interval = 5s;
    o.safety_margin = 5s;
    o.liveness = &view;
    o.fleet_size = [this] { return fleet; };
    return o;
  }
  Json Lease(const char* name = "c1") {
    return hub.Peek(kube::Object(res::kClusterSyncLeases, "ns1", name));
  }
  // The cluster's ClusterSync stored now (after everything so far), as the mirror sees it.
  void StatusStored(const char* name = "c1") {
    kube::ObjectRef ref = kube::Object(res::kClusterSyncs, "ns1", name);
    hub.Overwrite(ref, hub.Peek(ref));
    mirror.handler(HubCollection::kClusterSyncs).OnUpsert(hub.Peek(ref));
  }
};

}  // namespace sticky_claims_test

using sticky_claims_test::StickyPool;

TEST_CASE("a sticky claim is written once: the next sync writes no claim, a reapply renewTime") {
  StickyPool p;
  auto first = p.a.Acquire("ns1", "c1", /*full_reapply=*/false);
  REQUIRE_MESSAGE(first.ok(), first.status().ToString());
  const ClaimRecord claim = ClaimOf(p.Lease());
  CHECK(claim.holder == "consumer-a");
  CHECK(claim.sticky);
  CHECK(claim.epoch == 1);
  CHECK((*first)->Check(p.clock).ok());
  p.StatusStored();
  p.a.Release(*first, p.Lease()["metadata"]["resourceVersion"]);
  CHECK(ClaimOf(p.Lease()).holder == "consumer-a");  // kept
  CHECK(p.a.held() == 1);

  const int writes = p.hub.writes();
  p.clock.Advance(10min);  // no renewal of its own: the claim lives with the holder's liveness
  auto edit = p.a.Acquire("ns1", "c1", false);
  REQUIRE_MESSAGE(edit.ok(), edit.status().ToString());
  CHECK(p.hub.writes() == writes);
  CHECK(p.hub.gets() == 0);
  CHECK((*edit)->Check(p.clock).ok());
  p.a.Release(*edit);

  const Json before = p.Lease();
  auto reapply = p.a.Acquire("ns1", "c1", /*full_reapply=*/true);
  REQUIRE(reapply.ok());
  CHECK(p.hub.writes() == writes + 1);
  CHECK(p.Lease()["spec"]["renewTime"] != before["spec"]["renewTime"]);
  CHECK(ClaimOf(p.Lease()).epoch == 1);
}

TEST_CASE("another consumer's sticky claim holds while its holder lives, status writes or not") {
  StickyPool p;
  auto held = p.a.Acquire("ns1", "c1");
  REQUIRE(held.ok());
  p.StatusStored();  // newer than the lease: a per-sync claim would be free now
  p.a.Release(*held, p.Lease()["metadata"]["resourceVersion"]);
  const int writes = p.hub.writes();
  auto busy = p.b.Acquire("ns1", "c1");
  REQUIRE_FALSE(busy.ok());
  CHECK(busy.status().code() == Code::kConflict);
  CHECK(busy.status().message().find("consumer-a") != std::string::npos);
  CHECK(p.b.StickyHolderElsewhere("ns1", "c1") == "consumer-a");
  CHECK(p.a.StickyHolderElsewhere("ns1", "c1") == "");  // its own
  CHECK(p.hub.writes() == writes);
  CHECK(p.world.fresh_reads() == 0);
  // A holder that stopped renewing is not forwarded to, nor taken over while it lives.
  p.world.Stalled("consumer-a");
  CHECK(p.b.StickyHolderElsewhere("ns1", "c1") == "");
  CHECK(p.b.Acquire("ns1", "c1").status().code() == Code::kConflict);
}

TEST_CASE("a sticky claim is taken over only when a fresh read shows its holder dead") {
  StickyPool p;
  REQUIRE(p.a.Acquire("ns1", "c1").ok());
  const int writes = p.hub.writes();

  p.world.WatchLost("consumer-a");  // b's watch says gone, the hub says alive
  CHECK(p.b.StickyHolderElsewhere("ns1", "c1") == "");
  auto refused = p.b.Acquire("ns1", "c1");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == Code::kConflict);
  CHECK(p.world.fresh_reads() == 1);
  CHECK(p.hub.writes() == writes);

  p.world.Dead("consumer-a");
  p.world.FailFreshReads(Status(Code::kUnavailable, "hub down"));
  auto unknown = p.b.Acquire("ns1", "c1");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().code() == Code::kUnavailable);
  CHECK(p.hub.writes() == writes);

  p.world.FailFreshReads(Status::Ok());
  auto taken = p.b.Acquire("ns1", "c1");
  REQUIRE_MESSAGE(taken.ok(), taken.status().ToString());
  CHECK(p.hub.writes() == writes + 1);
  CHECK(ClaimOf(p.Lease()).holder == "consumer-b");
}

TEST_CASE("a lapse of the holder's liveness voids its claims, and it claims again with a write") {
  StickyPool p;
  auto held = p.a.Acquire("ns1", "c1");
  REQUIRE(held.ok());
  p.world.Live("consumer-a", 2);  // it lapsed and came back in a new epoch
  CHECK_FALSE((*held)->Check(p.clock).ok());
  p.a.Release(*held);
  CHECK(p.a.held() == 0);

  const int writes = p.hub.writes();
  auto again = p.a.Acquire("ns1", "c1");
  REQUIRE_MESSAGE(again.ok(), again.status().ToString());
  CHECK(p.hub.writes() == writes + 1);
  CHECK(ClaimOf(p.Lease()).epoch == 2);

  p.world.Dead("consumer-a");  // not alive: it takes nothing
  CHECK_FALSE((*again)->Check(p.clock).ok());
  auto none = p.a.Acquire("ns1", "c2");
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == Code::kConflict);
  CHECK(p.Lease("c2").is_null());
}

TEST_CASE("a consumer over its fair share of the fleet gives sticky claims back") {
  StickyPool p;
  p.fleet = 1;  // two consumers live: a share of 1 * 1.25 / 2 + 1 = 1.6 clusters
  auto c1 = p.a.Acquire("ns1", "c1");
  auto c2 = p.a.Acquire("ns1", "c2");
  REQUIRE(c1.ok());
  REQUIRE(c2.ok());
  p.a.Release(*c1);
  CHECK(ClaimOf(p.Lease("c1")).holder == "");  // 2 held > 1.6: given back with a write
  CHECK_FALSE(ClaimOf(p.Lease("c1")).sticky);
  p.a.Release(*c2);
  CHECK(ClaimOf(p.Lease("c2")).holder == "consumer-a");  // 1 held: kept
  CHECK(p.a.held() == 1);
  auto taken = p.b.Acquire("ns1", "c1");
  REQUIRE_MESSAGE(taken.ok(), taken.status().ToString());
  CHECK(p.world.fresh_reads() == 0);  // free: no liveness to read
}
