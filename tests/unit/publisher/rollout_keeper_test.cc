// The rollout keeper against a simulated hub (the simulator's REST engine in process): what the
// leader writes on a set (the state, with the set's resourceVersion as a precondition), the Events
// it records, the gauges it keeps, and a write that crossed another (a conflict) decided again
// from the newer set without an Event, and an Event the hub did not take tried again.
#include "publisher/rollout_keeper.h"

#include <doctest/doctest.h>
#include <prometheus/registry.h>

#include "tests/fakes/common/fake_clock.h"
#include "tests/fakes/common/kube/forwarding_client.h"
#include "tests/fakes/common/kube/simulated_hub.h"
#include "tests/support/rollout_objects.h"

using namespace syncbus;
using namespace syncbus::publisher;
using namespace std::chrono_literals;
namespace res = kube::resources;

namespace {

constexpr char kKeeperWaves[] =
    R"({"waves": [{"selector": {"matchLabels": {"ring": "canary"}}}], "healthyFor": "1m"})";

// A simulated hub of 4 fleet clusters, cluster-0000 the canary of SelectorSyncSet "s", and the
// publisher's cache of it, refreshed on demand.
struct KeeperHub {
  KeeperHub() {
    auto set = hub->Create(kube::Collection(res::kSelectorSyncSets),
                           testing::RolledOutSelectorSyncSet("s", kKeeperWaves));
    REQUIRE_MESSAGE(set.ok(), set.status().ToString());
    set_uid = (*set)["metadata"]["uid"].get<std::string>();
    testing::LabelFleetCluster(*hub, "cluster-0000", "ring", "canary");
    Refresh();
  }
  // The cache as a relist of the hub would leave it.
  void Refresh() {
    const std::pair<kube::Resource, HubKind> kinds[] = {
        {res::kClusterDeployments, HubKind::kClusterDeployment},
        {res::kSelectorSyncSets, HubKind::kSelectorSyncSet},
        {res::kClusterSyncs, HubKind::kClusterSync}};
    for (const auto& [resource, kind] : kinds) {
      auto listed = hub->List(kube::Collection(resource), {});
      REQUIRE_MESSAGE(listed.ok(), listed.status().ToString());
      cache.Replace(kind, listed->items);
    }
  }
  // The reasons of the Events on "s", in the order written (each names the set by its uid too).
  std::vector<std::string> Events() {
    auto listed = hub->List(kube::Collection(res::kEvents, "default"), {});
    REQUIRE(listed.ok());
    std::vector<std::string> reasons;
    for (const Json& e : listed->items) {
      if (e["involvedObject"]["name"] != "s") continue;
      CHECK(e["involvedObject"].value("uid", "") == set_uid);
      reasons.push_back(e["reason"].get<std::string>());
    }
    return reasons;
  }
  double Gauge(const std::string& name) {
    for (const auto& family : registry.Collect()) {
      if (family.name != name) continue;
      for (const auto& m : family.metric) {
        if (m.label.size() == 1 && m.label[0].value == "selectorsyncset/s") return m.gauge.value;
      }
    }
    return -1;  // no series
  }

  fakes::SimulatedHub simulated{{.clusters = 4}};
  kube::ClientImpl* hub = simulated.hub.get();
  std::string set_uid;
  HubCache cache{1000};
  FakeClock clock;
  prometheus::Registry registry;
};

// The hub, but an Event's creation fails with a timeout while `refusals` lasts; with `taken`,
// the hub has created it all the same (the answer was lost).
class EventsTimingOutHub final : public fakes::ForwardingClient {
 public:
  EventsTimingOutHub(kube::Client& hub, int refusals, bool taken)
      : ForwardingClient(hub), refusals_(refusals), taken_(taken) {}
  int event_creates = 0;

  Result<Json> Create(const kube::ObjectRef& c, const Json& j,
                      const kube::WriteOptions& o) override {
    if (c.resource.resource != "events") return to_.Create(c, j, o);
    ++event_creates;
    if (refusals_ == 0) return to_.Create(c, j, o);
    --refusals_;
    if (taken_) REQUIRE(to_.Create(c, j, o).ok());
    return Status(Code::kTimeout, "the hub did not answer in time");
  }

 private:
  int refusals_;
  bool taken_;
};

}  // namespace

TEST_CASE("an Event the hub did not take is tried again on the next looks, once, within bounds") {
  KeeperHub h;
  SUBCASE("refused twice, then recorded") {
    EventsTimingOutHub hub(*h.hub, 2, false);
    RolloutKeeper keeper(h.cache, hub, h.clock, h.registry, "publisher-0");
    CHECK(keeper.Tick().code() == Code::kTimeout);  // the state written, its Event refused
    CHECK(testing::ReadRolloutState(*h.hub, "s").wave == 1);
    CHECK(h.Events().empty());
    h.Refresh();
    CHECK(keeper.Tick().code() == Code::kTimeout);
    CHECK(h.Events().empty());
    REQUIRE(keeper.Tick().ok());
    CHECK(h.Events() == std::vector<std::string>{"RolloutStarted"});
    REQUIRE(keeper.Tick().ok());
    CHECK(hub.event_creates == 3);
    CHECK(h.Events() == std::vector<std::string>{"RolloutStarted"});
  }
  SUBCASE("taken by the hub, its answer lost: not doubled") {
    EventsTimingOutHub hub(*h.hub, 1, true);
    RolloutKeeper keeper(h.cache, hub, h.clock, h.registry, "publisher-0");
    CHECK(keeper.Tick().code() == Code::kTimeout);
    h.Refresh();
    REQUIRE(keeper.Tick().ok());  // AlreadyExists: recorded
    REQUIRE(keeper.Tick().ok());
    CHECK(hub.event_creates == 2);
    CHECK(h.Events() == std::vector<std::string>{"RolloutStarted"});
  }
  SUBCASE("given up after every try") {
    EventsTimingOutHub hub(*h.hub, 1000, false);
    RolloutKeeper keeper(h.cache, hub, h.clock, h.registry, "publisher-0");
    (void)keeper.Tick();
    h.Refresh();
    for (int i = 0; i < 2 * RolloutKeeper::kEventTries; ++i) (void)keeper.Tick();
    CHECK(hub.event_creates == RolloutKeeper::kEventTries);
    CHECK(h.Events().empty());
  }
  SUBCASE("forgotten by a leader that steps down") {
    EventsTimingOutHub hub(*h.hub, 1, false);
    RolloutKeeper keeper(h.cache, hub, h.clock, h.registry, "publisher-0");
    (void)keeper.Tick();
    h.Refresh();
    keeper.Reset();
    REQUIRE(keeper.Tick().ok());
    CHECK(hub.event_creates == 1);
  }
}

TEST_CASE(
    "the rollout keeper writes each step on the set with an Event, and decides a conflict again") {
  KeeperHub h;
  RolloutKeeper keeper(h.cache, *h.hub, h.clock, h.registry, "publisher-0");

  // Started: wave 1 of 2 (the canary, then the rest), an Event, the gauges.
  REQUIRE(keeper.Tick().ok());
  rollout::RolloutState state = testing::ReadRolloutState(*h.hub, "s");
  CHECK(state.generation == 1);
  CHECK(state.wave == 1);
  CHECK(state.waves == 2);
  CHECK(h.Events() == std::vector<std::string>{"RolloutStarted"});
  CHECK(h.Gauge("syncbus_publisher_rollout_wave") == 1);
  CHECK(h.Gauge("syncbus_publisher_rollout_halted") == 0);

  // The cache has not seen that write yet: the keeper decides again from the set it has, and its
  // write, conditional on that set's resourceVersion, is refused. No second Event.
  Status crossed = keeper.Tick();
  CHECK(crossed.code() == Code::kConflict);
  CHECK(h.Events() == std::vector<std::string>{"RolloutStarted"});
  CHECK(testing::ReadRolloutState(*h.hub, "s").wave_started_at == state.wave_started_at);

  // From the newer set: the canary fails, and the wave tolerates no failure.
  testing::WriteSelectorSetEntry(*h.hub, "cluster-0000", "s", 1, "webhook says no");
  h.Refresh();
  h.clock.Advance(1s);  // an Event's name carries the time
  Status halted = keeper.Tick();
  REQUIRE_MESSAGE(halted.ok(), halted.ToString());
  state = testing::ReadRolloutState(*h.hub, "s");
  CHECK(state.phase == rollout::Phase::kHalted);
  REQUIRE(state.failing.size() == 1);
  CHECK(state.failing[0].message == "webhook says no");
  CHECK(h.Events() == std::vector<std::string>{"RolloutStarted", "RolloutHalted"});
  h.Refresh();
  REQUIRE(keeper.Tick().ok());  // halted: nothing more to write
  CHECK(h.Gauge("syncbus_publisher_rollout_halted") == 1);

  // A leader that steps down forgets its gauges.
  keeper.Reset();
  CHECK(h.Gauge("syncbus_publisher_rollout_halted") == -1);
}
