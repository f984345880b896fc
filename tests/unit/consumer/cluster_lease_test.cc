#include <doctest/doctest.h>

#include "common/fake_clock.h"
#include "consumer/cluster_lease.h"
#include "tests/unit/consumer/fake_object_store.h"

using namespace syncbus;
using namespace syncbus::consumer;
using namespace std::chrono_literals;

namespace {

struct Pool {
  FakeClock clock;
  testing::FakeObjectStore hub;
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
  Json Lease() { return *hub.Get(kube::Object(kube::resources::kLeases, "ns1", "c1")); }
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
  p.a.Release(*held);   // must not clear consumer-b's record
  CHECK(p.Lease()["spec"]["holderIdentity"] == "consumer-b");
  CHECK((*taken)->Check(p.clock).ok());
}

TEST_CASE("a renewal that loses a race marks the lease lost at once") {
  Pool p;
  auto held = p.a.Acquire("ns1", "c1");
  REQUIRE(held.ok());
  Json stolen = p.Lease();
  stolen["spec"]["holderIdentity"] = "intruder";
  p.hub.Overwrite(kube::Object(kube::resources::kLeases, "ns1", "c1"), stolen);
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
  CHECK((*held)->Check(p.clock).ok());   // still inside duration - margin
  p.clock.Advance(11s);
  p.a.RenewHeld();
  CHECK_FALSE((*held)->Check(p.clock).ok());
  // Acquiring during the outage is a hub error, not "busy".
  auto failed = p.b.Acquire("ns1", "c2");
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().code() == Code::kUnavailable);
}
