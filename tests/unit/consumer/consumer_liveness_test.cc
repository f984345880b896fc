#include "consumer/consumer_liveness.h"

#include <doctest/doctest.h>

#include "common/bus/cluster_claim.h"
#include "common/time_format.h"
#include "tests/fakes/common/fake_clock.h"
#include "tests/unit/consumer/fake_object_store.h"

using namespace syncbus;
using namespace syncbus::consumer;
using namespace std::chrono_literals;

namespace {

constexpr char kNs[] = "syncbus-liveness";

kube::ObjectRef LivenessLeaseRef(const std::string& identity) {
  return kube::Object(kube::resources::kLeases, kNs, LivenessLeaseName(identity));
}

std::string EpochAnnotationOf(const Json& lease) {
  return lease["metadata"]["annotations"].value(kEpochAnnotation, "");
}

LivenessOptions LivenessOptionsFor(const std::string& identity) {
  LivenessOptions o;
  o.identity = identity;
  o.ns = kNs;
  o.duration = 15s;
  o.renew_interval = 5s;
  o.safety_margin = 5s;
  return o;
}

struct Own {
  FakeClock clock;
  syncbus::testing::FakeObjectStore hub;
  prometheus::Registry registry;
  ConsumerLiveness live{LivenessOptionsFor("consumer-a"), hub, clock, registry};

  Json Lease() { return hub.Peek(LivenessLeaseRef("consumer-a")); }
  double Events(const std::string& event) {
    for (const auto& family : registry.Collect()) {
      if (family.name != "syncbus_consumer_liveness_total") continue;
      for (const auto& m : family.metric) {
        for (const auto& l : m.label)
          if (l.name == "event" && l.value == event) return m.counter.value;
      }
    }
    return 0;
  }
};

// A liveness Lease of `identity` in epoch 1, renewed at `renewed` for 15 s.
Json LivenessLeaseAt(const std::string& identity, WallTime renewed) {
  return {{"apiVersion", "coordination.k8s.io/v1"},
          {"kind", "Lease"},
          {"metadata",
           {{"name", LivenessLeaseName(identity)},
            {"namespace", kNs},
            {"labels", {{kLivenessLabel, "true"}}},
            {"annotations", {{kEpochAnnotation, "1"}}}}},
          {"spec",
           {{"holderIdentity", identity},
            {"leaseDurationSeconds", 15},
            {"renewTime", FormatRfc3339Micro(renewed)}}}};
}

}  // namespace

TEST_CASE("a liveness Lease name is a stable DNS-1123 label, unique per identity") {
  CHECK(LivenessLeaseName("syncbus-consumer-7f9c-host-12") == "syncbus-consumer-7f9c-host-12");
  const std::string upper = LivenessLeaseName("Consumer_A.host");
  CHECK(upper.rfind("consumer-a-host-", 0) == 0);
  CHECK(upper != LivenessLeaseName("consumer-a-host"));
  CHECK(upper == LivenessLeaseName("Consumer_A.host"));
  const std::string long_a(80, 'a');
  const std::string a = LivenessLeaseName(long_a + "-1");
  const std::string b = LivenessLeaseName(long_a + "-2");
  CHECK(a.size() <= 63);
  CHECK(a != b);
  for (const std::string& name : {upper, a, LivenessLeaseName("-_-"), LivenessLeaseName("")}) {
    CAPTURE(name);
    REQUIRE_FALSE(name.empty());
    CHECK(name.size() <= 63);
    CHECK(name.front() != '-');
    CHECK(name.back() != '-');
    CHECK(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos);
  }
}

TEST_CASE("a liveness Lease is created in epoch 1 and renewals keep the epoch") {
  Own o;
  CHECK_FALSE(o.live.Check().alive);
  CHECK(o.live.Check().epoch == 0);
  REQUIRE(o.live.Start().ok());
  Json lease = o.Lease();
  CHECK(lease["metadata"]["labels"].value(kLivenessLabel, "") == "true");
  CHECK(EpochAnnotationOf(lease) == "1");
  CHECK(lease["spec"].value("holderIdentity", "") == "consumer-a");
  CHECK(lease["spec"].value("leaseDurationSeconds", 0) == 15);
  CHECK(o.live.Check().alive);
  CHECK(o.live.Check().epoch == 1);

  for (int i = 0; i < 3; ++i) {
    o.clock.Advance(5s);
    REQUIRE(o.live.Renew().ok());
  }
  lease = o.Lease();
  CHECK(EpochAnnotationOf(lease) == "1");
  CHECK(lease["spec"].value("renewTime", "") == FormatRfc3339Micro(o.clock.WallNow()));
  CHECK(o.live.Check().alive);
  CHECK(o.live.Check().epoch == 1);
  CHECK(o.Events("renewed") == 4);
  CHECK(o.Events("epoch-moved") == 0);
}

TEST_CASE("the fence ends duration - safety margin after the last renewal began") {
  Own o;
  REQUIRE(o.live.Start().ok());
  o.clock.Advance(5s);
  REQUIRE(o.live.Renew().ok());
  o.clock.Advance(10s - 1ms);
  CHECK(o.live.Check().alive);
  o.clock.Advance(1ms);
  CHECK_FALSE(o.live.Check().alive);
  CHECK(o.live.Check().epoch == 1);
}

TEST_CASE("a renewal after the fence ended moves the epoch") {
  Own o;
  REQUIRE(o.live.Start().ok());
  o.clock.Advance(11s);
  REQUIRE(o.live.Renew().ok());
  CHECK(o.live.Check().alive);
  CHECK(o.live.Check().epoch == 2);
  CHECK(EpochAnnotationOf(o.Lease()) == "2");
  CHECK(o.Events("epoch-moved") == 1);
}

TEST_CASE("a renewal that comes back after the fence ended ends the epoch") {
  Own o;
  REQUIRE(o.live.Start().ok());
  o.clock.Advance(5s);
  // The renewal begins while the fence holds, and the hub answers after it ended: the Lease may
  // have been expired for the others meanwhile, and its claims taken.
  o.hub.on_update = [&] { o.clock.Advance(6s); };
  CHECK_FALSE(o.live.Renew().ok());
  o.hub.on_update = nullptr;
  CHECK_FALSE(o.live.Check().alive);
  REQUIRE(o.live.Renew().ok());  // the next one starts a new epoch
  CHECK(o.live.Check().alive);
  CHECK(o.live.Check().epoch == 2);
  CHECK(EpochAnnotationOf(o.Lease()) == "2");
}

TEST_CASE("a failed renewal keeps the epoch and the fence ends on time") {
  Own o;
  REQUIRE(o.live.Start().ok());
  o.hub.SetOutage({Code::kUnavailable, "hub down"});
  o.clock.Advance(5s);
  CHECK(o.live.Renew().code() == Code::kUnavailable);
  CHECK(o.live.Check().alive);
  o.clock.Advance(5s);
  CHECK_FALSE(o.live.Check().alive);
  CHECK(o.live.Check().epoch == 1);
  CHECK(o.Events("failed") == 1);
}

TEST_CASE("a liveness Lease deleted or written by someone else is written in a new epoch") {
  Own o;
  REQUIRE(o.live.Start().ok());
  o.clock.Advance(5s);
  REQUIRE(o.hub.Delete(LivenessLeaseRef("consumer-a"), {}).ok());
  REQUIRE(o.live.Renew().ok());
  CHECK(EpochAnnotationOf(o.Lease()) == "2");
  CHECK(o.live.Check().epoch == 2);
  CHECK(o.live.Check().alive);

  Json foreign = o.Lease();
  foreign["spec"]["holderIdentity"] = "intruder";
  foreign["metadata"]["annotations"][kEpochAnnotation] = "7";
  o.hub.Overwrite(LivenessLeaseRef("consumer-a"), foreign);
  o.clock.Advance(5s);
  REQUIRE(o.live.Renew().ok());
  CHECK(EpochAnnotationOf(o.Lease()) == "8");
  CHECK(o.Lease()["spec"].value("holderIdentity", "") == "consumer-a");
  CHECK(o.live.Check().epoch == 8);
  CHECK(o.Events("epoch-moved") == 2);
}

TEST_CASE("a restart with the same identity takes its Lease over in the next epoch") {
  Own o;
  REQUIRE(o.live.Start().ok());
  ConsumerLiveness restarted(LivenessOptionsFor("consumer-a"), o.hub, o.clock, o.registry);
  REQUIRE(restarted.Start().ok());
  CHECK(restarted.Check().epoch == 2);
  CHECK(EpochAnnotationOf(o.Lease()) == "2");
  // The earlier process's renewal finds the Lease written since: it cannot keep epoch 1.
  REQUIRE(o.live.Renew().ok());
  CHECK(o.live.Check().epoch == 3);
}

TEST_CASE("Stop deletes the liveness Lease unless someone else wrote it since") {
  Own o;
  REQUIRE(o.live.Start().ok());
  REQUIRE(o.live.Stop().ok());
  CHECK(o.Lease().is_null());
  CHECK_FALSE(o.live.Check().alive);
  CHECK(o.live.Renew().code() == Code::kCancelled);

  Own other;
  REQUIRE(other.live.Start().ok());
  Json foreign = other.Lease();
  foreign["spec"]["holderIdentity"] = "intruder";
  other.hub.Overwrite(LivenessLeaseRef("consumer-a"), foreign);
  REQUIRE(other.live.Stop().ok());
  CHECK(other.Lease()["spec"].value("holderIdentity", "") == "intruder");
}

TEST_CASE("the janitor deletes only liveness Leases expired for longer than the grace") {
  FakeClock clock;
  syncbus::testing::FakeObjectStore hub;
  const WallTime now = clock.WallNow();
  hub.Overwrite(LivenessLeaseRef("fresh"), LivenessLeaseAt("fresh", now - 5s));
  hub.Overwrite(LivenessLeaseRef("recent"), LivenessLeaseAt("recent", now - 15s - 29s));
  hub.Overwrite(LivenessLeaseRef("old"), LivenessLeaseAt("old", now - 15s - 31s));
  Json unlabelled = LivenessLeaseAt("other", now - 1h);
  unlabelled["metadata"].erase("labels");
  hub.Overwrite(LivenessLeaseRef("other"), unlabelled);

  auto deleted = SweepExpiredLiveness(hub, kNs, now, 30s);
  REQUIRE(deleted.ok());
  CHECK(*deleted == 1);
  CHECK(hub.Peek(LivenessLeaseRef("old")).is_null());
  for (const char* kept : {"fresh", "recent", "other"}) {
    CAPTURE(kept);
    CHECK_FALSE(hub.Peek(LivenessLeaseRef(kept)).is_null());
  }
}
