#include "consumer/cluster_lease.h"

#include <doctest/doctest.h>

#include "consumer/hub_mirror.h"
#include "tests/fakes/common/fake_clock.h"
#include "tests/unit/consumer/fake_object_store.h"

using namespace syncbus;
using namespace syncbus::consumer;
using namespace std::chrono_literals;

namespace {

namespace res = kube::resources;

// The cluster's ClusterSyncLease, where its claim lives.
kube::ObjectRef LeaseOf(const std::string& ns, const std::string& name) {
  return kube::Object(res::kClusterSyncLeases, ns, name);
}

// A ClusterSync of cluster ns/name at `version` (its uid "uid-<name>"), which owns a new lease.
Json ClusterSyncAt(const std::string& ns, const std::string& name, const std::string& version) {
  return {
      {"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
      {"kind", "ClusterSync"},
      {"metadata",
       {{"namespace", ns}, {"name", name}, {"uid", "uid-" + name}, {"resourceVersion", version}}}};
}

std::string HolderOf(const Json& lease) {
  return ClaimOf(lease).holder;
}

struct Pool {
  FakeClock clock;
  syncbus::testing::FakeObjectStore hub;
  prometheus::Registry registry;
  ClusterLeases a{Options("consumer-a"), hub, clock, registry};
  ClusterLeases b{Options("consumer-b"), hub, clock, registry};

  Pool() {
    for (const char* name : {"c1", "c2"})
      hub.Overwrite(kube::Object(res::kClusterSyncs, "ns1", name), ClusterSyncAt("ns1", name, ""));
  }
  static LeaseOptions Options(const std::string& identity) {
    LeaseOptions o;
    o.identity = identity;
    o.duration = 30s;
    o.renew_interval = 10s;
    o.safety_margin = 10s;
    return o;
  }
  Json Lease() { return *hub.Get(LeaseOf("ns1", "c1")); }
};

}  // namespace

TEST_CASE("a cluster claim excludes other consumers until it is released") {
  Pool p;
  auto held = p.a.Acquire("ns1", "c1");
  REQUIRE_MESSAGE(held.ok(), held.status().ToString());
  CHECK((*held)->Check(p.clock).ok());
  CHECK(HolderOf(p.Lease()) == "consumer-a");
  CHECK(ClaimOf(p.Lease()).duration_seconds == 30);

  auto busy = p.b.Acquire("ns1", "c1");
  REQUIRE_FALSE(busy.ok());
  CHECK(busy.status().code() == Code::kConflict);
  CHECK(busy.status().message().find("consumer-a") != std::string::npos);

  p.a.Release(*held);
  CHECK(HolderOf(p.Lease()) == "");
  CHECK(p.a.held() == 0);
  auto taken = p.b.Acquire("ns1", "c1");
  REQUIRE(taken.ok());
  CHECK(HolderOf(p.Lease()) == "consumer-b");
  // Other clusters are independent.
  CHECK(p.a.Acquire("ns1", "c2").ok());
}

TEST_CASE(
    "the claim is on the cluster's ClusterSyncLease: a new one is owned by its ClusterSync, and "
    "only a full reapply's claim moves renewTime") {
  Pool p;
  auto first = p.a.Acquire("ns1", "c1");  // no lease yet: made, with renewTime now
  REQUIRE_MESSAGE(first.ok(), first.status().ToString());
  Json made = p.Lease();
  CHECK(made["kind"] == "ClusterSyncLease");
  CHECK(made["metadata"]["ownerReferences"][0]["kind"] == "ClusterSync");
  CHECK(made["metadata"]["ownerReferences"][0]["uid"] == "uid-c1");
  CHECK(made["spec"]["renewTime"] == "2026-01-01T00:00:00.000000Z");
  p.a.Release(*first);

  p.clock.Advance(60s);
  auto edit = p.a.Acquire("ns1", "c1", /*full_reapply=*/false);
  REQUIRE(edit.ok());
  CHECK(p.Lease()["spec"]["renewTime"] == "2026-01-01T00:00:00.000000Z");  // untouched
  CHECK(ClaimOf(p.Lease()).renew_time == "2026-01-01T00:01:00.000000Z");
  p.a.Release(*edit);

  p.clock.Advance(60s);
  auto reapply = p.a.Acquire("ns1", "c1", /*full_reapply=*/true);
  REQUIRE(reapply.ok());
  CHECK(p.Lease()["spec"]["renewTime"] == "2026-01-01T00:02:00.000000Z");
  // The annotations are syncbus's; the rest is what Hive reads and writes.
  CHECK(p.Lease()["spec"].size() == 1);
}

TEST_CASE("a cluster without a ClusterSync cannot be claimed") {
  Pool p;
  auto none = p.a.Acquire("ns1", "c3");
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == Code::kNotFound);
  CHECK(p.hub.Get(LeaseOf("ns1", "c3")).status().code() == Code::kNotFound);
}

TEST_CASE("renewal keeps a claim while work goes on [concurrent]") {
  Pool p;
  auto held = p.a.Acquire("ns1", "c1");
  REQUIRE(held.ok());
  for (int i = 0; i < 6; ++i) {
    p.clock.Advance(10s);
    p.a.RenewHeld();
    CHECK((*held)->Check(p.clock).ok());
    CHECK(p.b.Acquire("ns1", "c1").status().code() == Code::kConflict);
  }
}

TEST_CASE("a claim is renewed only once its last write is renew_interval old") {
  Pool p;
  auto held = p.a.Acquire("ns1", "c1");
  REQUIRE(held.ok());
  const std::string taken_at = p.Lease()["metadata"]["resourceVersion"];
  p.clock.Advance(9s);
  p.a.RenewHeld();  // a sync shorter than renew_interval writes its claim once
  CHECK(p.Lease()["metadata"]["resourceVersion"] == taken_at);
  p.clock.Advance(1s);
  p.a.RenewHeld();
  const std::string renewed_at = p.Lease()["metadata"]["resourceVersion"];
  CHECK(renewed_at != taken_at);
  p.clock.Advance(5s);
  p.a.RenewHeld();
  CHECK(p.Lease()["metadata"]["resourceVersion"] == renewed_at);
  CHECK((*held)->Check(p.clock).ok());
}

TEST_CASE("an expired claim is taken over and the old holder is fenced") {
  Pool p;
  auto held = p.a.Acquire("ns1", "c1");
  REQUIRE(held.ok());
  // consumer-a stalls: no renewals. Its own fence closes before the claim lapses for others.
  p.clock.Advance(21s);
  CHECK_FALSE((*held)->Check(p.clock).ok());
  CHECK(p.b.Acquire("ns1", "c1").status().code() == Code::kConflict);
  p.clock.Advance(10s);
  auto taken = p.b.Acquire("ns1", "c1");
  REQUIRE_MESSAGE(taken.ok(), taken.status().ToString());
  // consumer-a wakes up: its renewal finds the lease moved on and gives up.
  p.a.RenewHeld();
  CHECK((*held)->lost());
  p.a.Release(*held);  // must not clear consumer-b's record
  CHECK(HolderOf(p.Lease()) == "consumer-b");
  CHECK((*taken)->Check(p.clock).ok());
}

TEST_CASE("a renewal that loses a race marks the claim lost at once") {
  Pool p;
  auto held = p.a.Acquire("ns1", "c1");
  REQUIRE(held.ok());
  Json stolen = p.Lease();
  stolen["metadata"]["annotations"][kClaimHolderAnnotation] = "intruder";
  p.hub.Overwrite(LeaseOf("ns1", "c1"), stolen);
  p.clock.Advance(10s);  // the renewal is due
  p.a.RenewHeld();
  CHECK((*held)->lost());
  CHECK((*held)->Check(p.clock).code() == Code::kConflict);
}

TEST_CASE("a hub outage fences the holder once the claim could have lapsed") {
  Pool p;
  auto held = p.a.Acquire("ns1", "c1");
  REQUIRE(held.ok());
  p.hub.SetOutage(Status(Code::kUnavailable, "connection refused"));
  p.clock.Advance(10s);
  p.a.RenewHeld();
  CHECK((*held)->Check(p.clock).ok());  // still inside duration - margin
  p.clock.Advance(11s);
  p.a.RenewHeld();
  CHECK_FALSE((*held)->Check(p.clock).ok());
  // Claiming during the outage is a hub error, not "busy".
  auto failed = p.b.Acquire("ns1", "c2");
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().code() == Code::kUnavailable);
}

namespace {

// Two consumers, each with its own mirror that the test feeds as their watches would.
struct MirroredPool {
  FakeClock clock;
  syncbus::testing::FakeObjectStore hub;
  prometheus::Registry registry;
  HubMirror mirror_a, mirror_b;
  ClusterLeases a{Pool::Options("consumer-a"), hub, clock, registry, &mirror_a};
  ClusterLeases b{Pool::Options("consumer-b"), hub, clock, registry, &mirror_b};

  MirroredPool() { StatusStored("1"); }
  Json Lease() { return hub.Peek(LeaseOf("ns1", "c1")); }
  // The hub's lease, as a watch event to `mirror`.
  void Deliver(HubMirror& mirror) {
    mirror.handler(HubCollection::kClusterSyncLeases).OnUpsert(Lease());
  }
  // The cluster's ClusterSync stored at `version`, on the hub and delivered to both mirrors.
  void StatusStored(const std::string& version) {
    Json cs = ClusterSyncAt("ns1", "c1", version);
    hub.Overwrite(kube::Object(res::kClusterSyncs, "ns1", "c1"), cs);
    cs["metadata"]["resourceVersion"] = version;  // as written, whatever the store's counter says
    for (HubMirror* m : {&mirror_a, &mirror_b})
      m->handler(HubCollection::kClusterSyncs).OnUpsert(cs);
  }
};

}  // namespace

TEST_CASE("with a mirror, a claim is one write and no read, and the status write gives it back") {
  MirroredPool p;
  const int writes = p.hub.writes();
  auto held = p.a.Acquire("ns1", "c1");
  REQUIRE_MESSAGE(held.ok(), held.status().ToString());
  CHECK(p.hub.writes() == writes + 1);
  CHECK(p.hub.gets() == 0);
  p.Deliver(p.mirror_b);

  // consumer-a stored the status after its claim: giving the claim back writes nothing.
  std::string lease_version = p.Lease()["metadata"]["resourceVersion"];
  std::string status_version = std::to_string(std::stoi(lease_version) + 1);
  p.StatusStored(status_version);
  const int after_status = p.hub.writes();
  p.a.Release(*held, status_version);
  CHECK(p.hub.writes() == after_status);
  CHECK(HolderOf(p.Lease()) == "consumer-a");
  CHECK(p.a.held() == 0);

  // consumer-b sees the ClusterSync newer than the lease: the holder finished; one write.
  auto taken = p.b.Acquire("ns1", "c1");
  REQUIRE_MESSAGE(taken.ok(), taken.status().ToString());
  CHECK(p.hub.writes() == after_status + 1);
  CHECK(p.hub.gets() == 0);
  CHECK(HolderOf(p.Lease()) == "consumer-b");
}

TEST_CASE("a claim newer than the cluster's status is still held") {
  MirroredPool p;
  auto held = p.a.Acquire("ns1", "c1");
  REQUIRE(held.ok());
  p.Deliver(p.mirror_b);
  auto busy = p.b.Acquire("ns1", "c1");
  REQUIRE_FALSE(busy.ok());
  CHECK(busy.status().code() == Code::kConflict);

  // No status written (nothing changed): the holder gives it back with a write.
  p.a.Release(*held, "");
  CHECK(HolderOf(p.Lease()) == "");
  p.Deliver(p.mirror_b);
  CHECK(p.b.Acquire("ns1", "c1").ok());
}

TEST_CASE("a renewal after the status write keeps the claim until it is given back with a write") {
  MirroredPool p;
  auto held = p.a.Acquire("ns1", "c1");
  REQUIRE(held.ok());
  std::string status_version =
      std::to_string(std::stoi(std::string(p.Lease()["metadata"]["resourceVersion"])) + 1);
  p.hub.Overwrite(kube::Object(res::kConfigMaps, "ns1", "bump"), Json::object());  // status write
  p.clock.Advance(10s);
  p.a.RenewHeld();  // a renewal lands after it
  p.a.Release(*held, status_version);
  CHECK(HolderOf(p.Lease()) == "");  // released by a write, not by the status
}

TEST_CASE("a stale lease in the mirror costs one conflict and one read of the hub") {
  MirroredPool p;
  auto held = p.a.Acquire("ns1", "c1");
  REQUIRE(held.ok());
  p.a.Release(*held, "");  // holder cleared on the hub
  // consumer-b's mirror has not seen the lease at all: its create conflicts, it reads, it takes.
  auto taken = p.b.Acquire("ns1", "c1");
  REQUIRE_MESSAGE(taken.ok(), taken.status().ToString());
  CHECK(p.hub.gets() == 1);
  CHECK(HolderOf(p.Lease()) == "consumer-b");
}

TEST_CASE("without releaseByStatus every claim is given back with a write") {
  MirroredPool p;
  LeaseOptions o = Pool::Options("consumer-c");
  o.release_by_status = false;
  ClusterLeases c(o, p.hub, p.clock, p.registry, &p.mirror_a);
  auto held = c.Acquire("ns1", "c1");
  REQUIRE(held.ok());
  c.Release(*held, "999");
  CHECK(HolderOf(p.Lease()) == "");
}
