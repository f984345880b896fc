#include "consumer/cluster_lease.h"

#include <doctest/doctest.h>

#include "consumer/hub_mirror.h"
#include "tests/fakes/common/fake_clock.h"
#include "tests/unit/consumer/fake_object_store.h"

using namespace syncbus;
using namespace syncbus::consumer;
using namespace std::chrono_literals;

namespace {

// Where the consumers keep cluster ns/name's Lease (LeaseOptions::ns defaults to syncbus).
kube::ObjectRef LeaseOf(const std::string& ns, const std::string& name) {
  return kube::Object(kube::resources::kLeases, "syncbus", ClusterLeaseName(ns, name));
}

struct Pool {
  FakeClock clock;
  syncbus::testing::FakeObjectStore hub;
  prometheus::Registry registry;
  ClusterLeases a{Options("consumer-a"), hub, clock, registry};
  ClusterLeases b{Options("consumer-b"), hub, clock, registry};

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

TEST_CASE("a cluster lease excludes other consumers until it is released") {
  Pool p;
  auto held = p.a.Acquire("ns1", "c1");
  REQUIRE_MESSAGE(held.ok(), held.status().ToString());
  CHECK((*held)->Check(p.clock).ok());
  CHECK(p.Lease()["spec"]["holderIdentity"] == "consumer-a");
  CHECK(p.Lease()["spec"]["leaseDurationSeconds"] == 30);

  auto busy = p.b.Acquire("ns1", "c1");
  REQUIRE_FALSE(busy.ok());
  CHECK(busy.status().code() == Code::kConflict);
  CHECK(busy.status().message().find("consumer-a") != std::string::npos);

  p.a.Release(*held);
  CHECK(p.Lease()["spec"]["holderIdentity"] == "");
  CHECK(p.a.held() == 0);
  auto taken = p.b.Acquire("ns1", "c1");
  REQUIRE(taken.ok());
  CHECK(p.Lease()["spec"]["holderIdentity"] == "consumer-b");
  // Other clusters are independent.
  CHECK(p.a.Acquire("ns1", "c2").ok());
}

TEST_CASE("renewal keeps a lease while work goes on [concurrent]") {
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

TEST_CASE("a lease is renewed only once its last write is renew_interval old") {
  Pool p;
  auto held = p.a.Acquire("ns1", "c1");
  REQUIRE(held.ok());
  const std::string taken_at = p.Lease()["metadata"]["resourceVersion"];
  p.clock.Advance(9s);
  p.a.RenewHeld();  // a sync shorter than renew_interval writes its lease once
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

TEST_CASE("an expired lease is taken over and the old holder is fenced") {
  Pool p;
  auto held = p.a.Acquire("ns1", "c1");
  REQUIRE(held.ok());
  // consumer-a stalls: no renewals. Its own fence closes before the lease lapses for others.
  p.clock.Advance(21s);
  CHECK_FALSE((*held)->Check(p.clock).ok());
  CHECK(p.b.Acquire("ns1", "c1").status().code() == Code::kConflict);
  p.clock.Advance(10s);
  auto taken = p.b.Acquire("ns1", "c1");
  REQUIRE_MESSAGE(taken.ok(), taken.status().ToString());
  CHECK(p.Lease()["spec"]["leaseTransitions"] == 1);
  // consumer-a wakes up: its renewal finds the lease moved on and gives up.
  p.a.RenewHeld();
  CHECK((*held)->lost());
  p.a.Release(*held);  // must not clear consumer-b's record
  CHECK(p.Lease()["spec"]["holderIdentity"] == "consumer-b");
  CHECK((*taken)->Check(p.clock).ok());
}

TEST_CASE("a renewal that loses a race marks the lease lost at once") {
  Pool p;
  auto held = p.a.Acquire("ns1", "c1");
  REQUIRE(held.ok());
  Json stolen = p.Lease();
  stolen["spec"]["holderIdentity"] = "intruder";
  p.hub.Overwrite(LeaseOf("ns1", "c1"), stolen);
  p.clock.Advance(10s);  // the renewal is due
  p.a.RenewHeld();
  CHECK((*held)->lost());
  CHECK((*held)->Check(p.clock).code() == Code::kConflict);
}

TEST_CASE("a hub outage fences the holder once the lease could have lapsed") {
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
  // Acquiring during the outage is a hub error, not "busy".
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

  Json Lease() { return hub.Peek(LeaseOf("ns1", "c1")); }
  // The hub's lease, as a watch event to `mirror`.
  void Deliver(HubMirror& mirror) { mirror.handler(HubCollection::kLeases).OnUpsert(Lease()); }
  // A ClusterSync stored at `version`, delivered to both mirrors.
  void StatusStored(const std::string& version) {
    Json cs = {{"metadata", {{"namespace", "ns1"}, {"name", "c1"}, {"resourceVersion", version}}}};
    for (HubMirror* m : {&mirror_a, &mirror_b})
      m->handler(HubCollection::kClusterSyncs).OnUpsert(cs);
  }
};

}  // namespace

TEST_CASE(
    "with a mirror, taking a lease is one write and no read, and the status write gives it back") {
  MirroredPool p;
  auto held = p.a.Acquire("ns1", "c1");
  REQUIRE_MESSAGE(held.ok(), held.status().ToString());
  CHECK(p.hub.writes() == 1);
  CHECK(p.hub.gets() == 0);
  p.Deliver(p.mirror_b);

  // consumer-a stored the status after its lease write: giving the lease back writes nothing.
  std::string lease_version = p.Lease()["metadata"]["resourceVersion"];
  std::string status_version = std::to_string(std::stoi(lease_version) + 1);
  p.StatusStored(status_version);
  p.a.Release(*held, status_version);
  CHECK(p.hub.writes() == 1);
  CHECK(p.Lease()["spec"]["holderIdentity"] == "consumer-a");
  CHECK(p.a.held() == 0);

  // consumer-b sees the ClusterSync newer than the lease: the holder finished; one write.
  auto taken = p.b.Acquire("ns1", "c1");
  REQUIRE_MESSAGE(taken.ok(), taken.status().ToString());
  CHECK(p.hub.writes() == 2);
  CHECK(p.hub.gets() == 0);
  CHECK(p.Lease()["spec"]["holderIdentity"] == "consumer-b");
}

TEST_CASE("a lease newer than the cluster's status is still held") {
  MirroredPool p;
  p.StatusStored("1");  // an older status (the store's versions start after it)
  auto held = p.a.Acquire("ns1", "c1");
  REQUIRE(held.ok());
  p.Deliver(p.mirror_b);
  auto busy = p.b.Acquire("ns1", "c1");
  REQUIRE_FALSE(busy.ok());
  CHECK(busy.status().code() == Code::kConflict);

  // No status written (nothing changed): the holder gives it back with a write.
  p.a.Release(*held, "");
  CHECK(p.Lease()["spec"]["holderIdentity"] == "");
  p.Deliver(p.mirror_b);
  CHECK(p.b.Acquire("ns1", "c1").ok());
}

TEST_CASE("a renewal after the status write keeps the lease until it is given back with a write") {
  MirroredPool p;
  auto held = p.a.Acquire("ns1", "c1");
  REQUIRE(held.ok());
  std::string status_version =
      std::to_string(std::stoi(std::string(p.Lease()["metadata"]["resourceVersion"])) + 1);
  p.hub.Overwrite(kube::Object(kube::resources::kConfigMaps, "ns1", "bump"),
                  Json::object());  // status write
  p.clock.Advance(10s);
  p.a.RenewHeld();  // a renewal lands after it
  p.a.Release(*held, status_version);
  CHECK(p.Lease()["spec"]["holderIdentity"] == "");  // released by a write, not by the status
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
  CHECK(p.Lease()["spec"]["holderIdentity"] == "consumer-b");
}

TEST_CASE("without releaseByStatus every lease is given back with a write") {
  MirroredPool p;
  LeaseOptions o = Pool::Options("consumer-c");
  o.release_by_status = false;
  ClusterLeases c(o, p.hub, p.clock, p.registry, &p.mirror_a);
  auto held = c.Acquire("ns1", "c2");
  REQUIRE(held.ok());
  c.Release(*held, "999");
  CHECK(p.hub.Peek(LeaseOf("ns1", "c2"))["spec"]["holderIdentity"] == "");
}

TEST_CASE("a cluster's Lease lives in syncbus's namespace under a name no other cluster has") {
  CHECK(ClusterLeaseName("ns1", "c1") == "ns1.c1");
  // A namespace name has no dot (a DNS label), so the first dot of "<namespace>.<name>" ends the
  // namespace: no two clusters share a name.
  CHECK(ClusterLeaseName("a", "b.c") == "a.b.c");
  CHECK(ClusterLeaseName("a-b", "c") == "a-b.c");
  // Past the 253 characters an object name may have: the hex SHA-256 of "ns/name", 64
  // characters without a dot, which no "<namespace>.<name>" can be.
  std::string long_name(250, 'x');
  std::string hashed = ClusterLeaseName("ns1", long_name);
  CHECK(hashed.size() == 64);
  CHECK(hashed.find('.') == std::string::npos);
  CHECK(hashed != ClusterLeaseName("ns1", long_name + "y"));
  CHECK(ClusterLeaseName("ns1", std::string(249, 'x')).size() == 253);

  Pool p;
  auto held = p.a.Acquire("ns1", "c1");
  REQUIRE(held.ok());
  Json lease = p.Lease();
  CHECK(lease["metadata"]["namespace"] == "syncbus");
  CHECK(lease["metadata"]["name"] == "ns1.c1");
  CHECK(lease["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "syncbus");
  CHECK(lease["metadata"]["annotations"][kClusterLeaseAnnotation] == "ns1/c1");
  // Nothing lands in the cluster's own namespace.
  CHECK(p.hub.Get(kube::Object(kube::resources::kLeases, "ns1", "c1")).status().code() ==
        Code::kNotFound);

  // Another namespace when configured so.
  LeaseOptions elsewhere = Pool::Options("consumer-c");
  elsewhere.ns = "syncbus-prod";
  ClusterLeases c{elsewhere, p.hub, p.clock, p.registry};
  REQUIRE(c.Acquire("ns1", "c2").ok());
  CHECK(p.hub.Get(kube::Object(kube::resources::kLeases, "syncbus-prod", "ns1.c2")).ok());
}
