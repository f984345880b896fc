#include "common/bus/rollout.h"

#include <doctest/doctest.h>

#include "common/bus/rollout_release.h"

using namespace syncbus;
using namespace syncbus::rollout;

namespace {

hive::ClusterDeployment RolloutCluster(const std::string& name, hive::Labels labels = {}) {
  hive::ClusterDeployment cd;
  cd.meta.name = name;
  cd.meta.ns = name;
  cd.meta.labels = std::move(labels);
  return cd;
}

hive::ObjectMeta GatedMeta(const std::string& spec, const std::optional<RolloutState>& state,
                           int64_t generation) {
  hive::ObjectMeta meta;
  meta.name = "set";
  meta.generation = generation;
  meta.annotations[kSpecAnnotation] = spec;
  if (state) meta.annotations[kStateAnnotation] = EncodeState(*state);
  return meta;
}

std::vector<std::string> Clusters(int n) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back("c" + std::to_string(i) + "/c" + std::to_string(i));
  return keys;
}

}  // namespace

TEST_CASE("rollout: a spec by count, percentage or selector, with its budgets and times") {
  auto spec = ParseSpec(
      R"({"waves": [{"clusters": 1}, {"clusters": "25%", "maxFailures": "10%"}],
          "maxFailures": 2, "healthyFor": "10m", "progressDeadline": "1h"})");
  REQUIRE_MESSAGE(spec.ok(), spec.status().ToString());
  CHECK_FALSE(spec->by_selector);
  REQUIRE(spec->waves.size() == 2);
  CHECK(*spec->waves[0].clusters == 1);
  CHECK(*spec->waves[1].percent == 25);
  CHECK(spec->BudgetOf(1).For(100) == 2);   // the set's
  CHECK(spec->BudgetOf(2).For(100) == 10);  // the wave's own: 10% of 100
  CHECK(spec->BudgetOf(2).For(9) == 0);     // rounded down
  CHECK(spec->BudgetOf(3).For(100) == 2);   // the rest has the set's
  CHECK(spec->healthy_for == std::chrono::minutes(10));
  CHECK(spec->progress_deadline == std::chrono::hours(1));

  auto defaults = ParseSpec(R"({"waves": [{"selector": {"matchLabels": {"ring": "canary"}}}]})");
  REQUIRE(defaults.ok());
  CHECK(defaults->by_selector);
  CHECK(defaults->BudgetOf(1).For(50) == 0);
  CHECK(defaults->healthy_for == std::chrono::minutes(5));
  CHECK(defaults->progress_deadline == std::chrono::minutes(30));
}

TEST_CASE("rollout: a spec that cannot be read says why, in the operator's terms") {
  const std::pair<const char*, const char*> cases[] = {
      {"not json", "not a JSON object"},
      {"{}", "waves is missing"},
      {R"({"waves": []})", "at least one wave"},
      {R"({"waves": [{"clusters": 0}]})", "waves[0].clusters must be a count"},
      {R"({"waves": [{"clusters": "150%"}]})", "waves[0].clusters must be a count"},
      {R"({"waves": [{"clusters": 1, "selector": {}}]})", "exactly one of clusters and selector"},
      {R"({"waves": [{}]})", "exactly one of clusters and selector"},
      {R"({"waves": [{"clusters": 1}, {"selector": {}}]})", "waves mix clusters and selector"},
      {R"({"waves": [{"clusters": 1}], "healthyfor": "1m"})", "unknown field \"healthyfor\""},
      {R"({"waves": [{"clusters": 1, "max": 1}]})", "waves[0] has an unknown field \"max\""},
      {R"({"waves": [{"clusters": 1}], "maxFailures": -1})", "maxFailures must be a count"},
      {R"({"waves": [{"clusters": 1}], "healthyFor": "soon"})", "healthyFor must be a duration"},
      {R"({"waves": [{"clusters": 1}], "progressDeadline": "0s"})", "progressDeadline must be"},
      {R"({"waves": [{"selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}]})",
       "waves[0].selector"},
  };
  for (const auto& [text, why] : cases) {
    INFO(text);
    auto spec = ParseSpec(text);
    REQUIRE_FALSE(spec.ok());
    CHECK(spec.status().message().find(why) != std::string::npos);
    CHECK(spec.status().message().find(kSpecAnnotation) != std::string::npos);
  }
}

TEST_CASE("rollout: the state survives its annotation, and a damaged one is refused") {
  RolloutState s;
  s.generation = 7;
  s.wave = 2;
  s.waves = 3;
  s.phase = Phase::kHalted;
  s.bounds = {0x10, 0xabcdef0123456789ULL, ~0ULL};
  s.wave_started_at = "2026-11-29T10:00:00Z";
  s.healthy_since = "2026-11-29T10:05:00Z";
  s.message = "wave 2 of 3: 2 of 5 clusters failed";
  s.failing = {{"a/a", "namespaces \"x\" not found"}};
  auto back = ParseState(EncodeState(s));
  REQUIRE_MESSAGE(back.ok(), back.status().ToString());
  CHECK(back->generation == 7);
  CHECK(back->wave == 2);
  CHECK(back->waves == 3);
  CHECK(back->phase == Phase::kHalted);
  CHECK(back->bounds == s.bounds);
  CHECK(back->wave_started_at == s.wave_started_at);
  CHECK(back->healthy_since == s.healthy_since);
  CHECK(back->message == s.message);
  REQUIRE(back->failing.size() == 1);
  CHECK(back->failing[0].cluster == "a/a");
  CHECK(back->failing[0].message == s.failing[0].message);

  CHECK_FALSE(ParseState("[]").ok());
  CHECK_FALSE(ParseState(R"({"generation": 1, "wave": 1, "waves": 2, "phase": "Paused"})").ok());
  CHECK_FALSE(ParseState(R"({"generation": 1, "wave": 3, "waves": 2, "phase": "Halted"})").ok());
  CHECK_FALSE(ParseState(R"({"generation": 1, "wave": 1, "waves": 2, "phase": "Halted",
                              "bounds": ["ff"]})")
                  .ok());
  CHECK_FALSE(ParseState(R"({"wave": 1, "waves": 2, "phase": "Halted"})").ok());
}

TEST_CASE("rollout: waves by count and percentage take that many clusters, by stable rank") {
  auto spec = ParseSpec(R"({"waves": [{"clusters": 1}, {"clusters": "30%"}]})");
  REQUIRE(spec.ok());
  const std::vector<std::string> keys = Clusters(10);
  RolloutState state;
  state.bounds = BoundsFor(*spec, keys);
  state.waves = static_cast<int>(state.bounds.size());
  REQUIRE(state.waves == 3);  // 1, then 3 (30% of 10), then the rest
  CHECK(state.bounds.back() == ~0ULL);
  int per_wave[4] = {};
  for (const auto& key : keys) {
    int wave = WaveOf(*spec, state, RolloutCluster(key.substr(0, key.find('/'))));
    REQUIRE(wave >= 1);
    REQUIRE(wave <= 3);
    ++per_wave[wave];
  }
  CHECK(per_wave[1] == 1);
  CHECK(per_wave[2] == 3);
  CHECK(per_wave[3] == 6);
  // The same clusters go first for every set, and whatever order they were listed in.
  std::vector<std::string> reversed(keys.rbegin(), keys.rend());
  CHECK(BoundsFor(*spec, reversed) == state.bounds);

  // Waves that take every cluster leave no "rest"; an empty fleet has one wave.
  auto all = ParseSpec(R"({"waves": [{"clusters": 2}, {"clusters": "100%"}]})");
  REQUIRE(all.ok());
  CHECK(BoundsFor(*all, keys).size() == 2);
  CHECK(BoundsFor(*all, {}).size() == 1);
  // A cluster that appears later falls into a wave by its rank.
  RolloutState later = state;
  CHECK(WaveOf(*spec, later, RolloutCluster("new-cluster")) >= 1);
}

// The chaos run computes waves in Python (scripts/lib/syncbus_tools/chaos_checks.py) and its
// self-test (tests/chaos/chaos_checks_test.py) pins the same figures: keep the two in step.
TEST_CASE("rollout: ranks and waves on known clusters, as the chaos run computes them") {
  CHECK(RankOf("c0/c0") == 0xde1b193ca899e231ULL);
  CHECK(RankOf("c1/c1") == 0x3c972e102601add0ULL);
  CHECK(RankOf("cluster-0007/cluster-0007") == 0x02e0dfaccb17a2a6ULL);
  auto spec = ParseSpec(R"({"waves": [{"clusters": 1}, {"clusters": "30%"}]})");
  REQUIRE(spec.ok());
  RolloutState state;
  state.bounds = BoundsFor(*spec, Clusters(10));
  state.waves = static_cast<int>(state.bounds.size());
  CHECK(EncodeState(state).find(
            R"("bounds":["143ad8baac815aa8","5e31f16fddcc86f1","ffffffffffffffff"])") !=
        std::string::npos);
  const int waves[10] = {3, 2, 3, 3, 2, 2, 3, 1, 3, 3};
  for (int i = 0; i < 10; ++i) {
    CAPTURE(i);
    CHECK(WaveOf(*spec, state, RolloutCluster("c" + std::to_string(i))) == waves[i]);
  }
}

TEST_CASE("rollout: waves by selector: the first that matches, then the rest") {
  auto spec = ParseSpec(R"({"waves": [{"selector": {"matchLabels": {"ring": "canary"}}},
                                       {"selector": {"matchLabels": {"region": "eu"}}}]})");
  REQUIRE(spec.ok());
  RolloutState state;
  state.waves = 3;
  CHECK(WaveOf(*spec, state, RolloutCluster("a", {{"ring", "canary"}, {"region", "eu"}})) == 1);
  CHECK(WaveOf(*spec, state, RolloutCluster("b", {{"region", "eu"}})) == 2);
  CHECK(WaveOf(*spec, state, RolloutCluster("c", {{"region", "us"}})) == 3);
  CHECK(BoundsFor(*spec, Clusters(5)).empty());
}

TEST_CASE("rollout: a set is released to a cluster only by a state for its current generation") {
  const hive::ClusterDeployment canary = RolloutCluster("a", {{"ring", "canary"}});
  const hive::ClusterDeployment other = RolloutCluster("b");
  const std::string spec = R"({"waves": [{"selector": {"matchLabels": {"ring": "canary"}}}]})";
  RolloutState wave1;
  wave1.generation = 3;
  wave1.wave = 1;
  wave1.waves = 2;

  hive::ObjectMeta plain;
  plain.generation = 3;
  CHECK(ReleaseOf(plain, canary) == Release::kUngated);
  // No state yet, or one of an older generation: held from every cluster.
  CHECK(ReleaseOf(GatedMeta(spec, std::nullopt, 3), canary) == Release::kHeld);
  CHECK(ReleaseOf(GatedMeta(spec, wave1, 4), canary) == Release::kHeld);
  // Wave 1 released: the canary has it, the rest waits.
  CHECK(ReleaseOf(GatedMeta(spec, wave1, 3), canary) == Release::kReleased);
  CHECK(ReleaseOf(GatedMeta(spec, wave1, 3), other) == Release::kHeld);
  // Halted or aborted keeps what was released; complete releases to all.
  RolloutState halted = wave1;
  halted.phase = Phase::kHalted;
  CHECK(ReleaseOf(GatedMeta(spec, halted, 3), canary) == Release::kReleased);
  CHECK(ReleaseOf(GatedMeta(spec, halted, 3), other) == Release::kHeld);
  RolloutState complete = wave1;
  complete.wave = 2;
  complete.phase = Phase::kComplete;
  CHECK(ReleaseOf(GatedMeta(spec, complete, 3), other) == Release::kReleased);
  // An unreadable spec or state holds it from all.
  CHECK(ReleaseOf(GatedMeta("{", complete, 3), other) == Release::kHeld);
  hive::ObjectMeta damaged = GatedMeta(spec, std::nullopt, 3);
  damaged.annotations[kStateAnnotation] = "{";
  CHECK(ReleaseOf(damaged, canary) == Release::kHeld);
}

TEST_CASE("rollout: TakeHeld leaves out the held sets and names them") {
  const hive::ClusterDeployment cd = RolloutCluster("a");
  hive::SyncSet gated, plain;
  gated.meta = GatedMeta(R"({"waves": [{"clusters": 1}]})", std::nullopt, 2);
  gated.meta.name = "gated";
  plain.meta.name = "plain";
  hive::SelectorSyncSet sss;
  sss.meta = GatedMeta(R"({"waves": [{"clusters": 1}]})", std::nullopt, 5);
  sss.meta.name = "fleet";
  std::vector<const hive::SyncSet*> sync_sets = {&gated, &plain};
  std::vector<const hive::SelectorSyncSet*> selector_sync_sets = {&sss};
  auto held = TakeHeld(cd, sync_sets, selector_sync_sets);
  REQUIRE(held.size() == 2);
  CHECK(held[0] == hive::DesiredSet{hive::SetKind::kSyncSet, "gated", 2});
  CHECK(held[1] == hive::DesiredSet{hive::SetKind::kSelectorSyncSet, "fleet", 5});
  REQUIRE(sync_sets.size() == 1);
  CHECK(sync_sets[0] == &plain);
  CHECK(selector_sync_sets.empty());
}
