#include "consumer/consumers_liveness.h"

#include <doctest/doctest.h>

#include "tests/fakes/common/fake_clock.h"
#include "tests/unit/consumer/fake_object_store.h"

using namespace syncbus;
using namespace syncbus::consumer;
using namespace std::chrono_literals;

namespace {

constexpr char kViewNs[] = "syncbus-liveness";

LivenessOptions ViewOptionsFor(const std::string& identity) {
  LivenessOptions o;
  o.identity = identity;
  o.ns = kViewNs;
  return o;  // 15 s, renewed every 5 s, 5 s margin
}

// Consumers a (this one) and b on one hub; the view of a, fed what the hub holds.
struct LivenessPool {
  FakeClock clock;
  syncbus::testing::FakeObjectStore hub;
  prometheus::Registry registry;
  ConsumerLiveness a{ViewOptionsFor("consumer-a"), hub, clock, registry};
  ConsumerLiveness b{ViewOptionsFor("consumer-b"), hub, clock, registry};
  ConsumersLiveness view{a, hub, kViewNs, clock};

  LivenessPool() {
    REQUIRE(a.Start().ok());
    REQUIRE(b.Start().ok());
    Feed();
  }
  Json LeaseOf(const ConsumerLiveness& c) {
    return hub.Peek(kube::Object(kube::resources::kLeases, kViewNs, c.lease_name()));
  }
  void Feed() { view.OnReplace({LeaseOf(a), LeaseOf(b)}); }
};

}  // namespace

TEST_CASE("the liveness view: alive in its epoch until the Lease expires") {
  LivenessPool p;
  CHECK(p.view.Own().alive);
  CHECK(p.view.Own().epoch == 1);
  CHECK(p.view.Alive("consumer-b", 1));
  CHECK_FALSE(p.view.Alive("consumer-b", 2));
  CHECK_FALSE(p.view.Alive("consumer-c", 1));
  CHECK(p.view.LiveCount() == 2);

  // renewTime + 15 s.
  p.clock.Advance(15s - 1ms);
  CHECK(p.view.Alive("consumer-b", 1));
  p.clock.Advance(1ms);
  CHECK_FALSE(p.view.Alive("consumer-b", 1));
  CHECK(p.view.LiveCount() == 1);
  CHECK_FALSE(p.view.Own().alive);

  // b renews after its lapse: alive again, in its next epoch only.
  REQUIRE(p.b.Renew().ok());
  p.view.OnUpsert(p.LeaseOf(p.b));
  CHECK(p.view.Alive("consumer-b", 2));
  CHECK_FALSE(p.view.Alive("consumer-b", 1));
}

TEST_CASE("the liveness view: a deleted Lease is not alive") {
  LivenessPool p;
  Json lease = p.LeaseOf(p.b);
  REQUIRE(p.b.Stop().ok());
  p.view.OnDelete(lease);
  CHECK_FALSE(p.view.Alive("consumer-b", 1));
  CHECK(p.view.LiveCount() == 1);
}

TEST_CASE("the liveness view: AliveFresh reads the hub, not the watched copy") {
  LivenessPool p;
  p.view.OnReplace({});
  CHECK_FALSE(p.view.Alive("consumer-b", 1));
  CHECK(p.view.LiveCount() == 1);
  const int gets = p.hub.gets();
  auto fresh = p.view.AliveFresh("consumer-b", 1);
  REQUIRE(fresh.ok());
  CHECK(*fresh);
  CHECK(p.hub.gets() == gets + 1);
  CHECK_FALSE(*p.view.AliveFresh("consumer-b", 2));

  p.Feed();
  REQUIRE(p.b.Stop().ok());
  CHECK(p.view.Alive("consumer-b", 1));  // the copy has not seen the delete yet
  fresh = p.view.AliveFresh("consumer-b", 1);
  REQUIRE(fresh.ok());
  CHECK_FALSE(*fresh);

  p.hub.SetOutage({Code::kUnavailable, "hub down"});
  CHECK(p.view.AliveFresh("consumer-a", 1).status().code() == Code::kUnavailable);
}

TEST_CASE("the liveness view: a consumer renews until half its duration has passed unrenewed") {
  LivenessPool p;
  CHECK(p.view.Renewing("consumer-b", 1));
  CHECK_FALSE(p.view.Renewing("consumer-b", 2));
  p.clock.Advance(7500ms - 1ms);  // half of 15 s
  CHECK(p.view.Renewing("consumer-b", 1));
  p.clock.Advance(1ms);
  CHECK_FALSE(p.view.Renewing("consumer-b", 1));
  CHECK(p.view.Alive("consumer-b", 1));  // stalled, its claims still hold
  REQUIRE(p.b.Renew().ok());
  p.view.OnUpsert(p.LeaseOf(p.b));
  CHECK(p.view.Renewing("consumer-b", 1));
}
