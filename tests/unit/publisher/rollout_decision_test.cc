#include "publisher/rollout_decision.h"

#include <doctest/doctest.h>

#include "common/time_format.h"
#include "tests/fakes/common/fake_clock.h"

using namespace syncbus;
using namespace syncbus::publisher;
using namespace std::chrono_literals;
using rollout::Phase;
using rollout::RolloutState;

namespace {

constexpr char kThreeWaves[] =
    R"({"waves": [{"selector": {"matchLabels": {"wave": "1"}}},
                  {"selector": {"matchLabels": {"wave": "2"}}}],
        "maxFailures": 1, "healthyFor": "10m", "progressDeadline": "30m"})";

// A fleet of three waves by label: wave 1 has 2 clusters, wave 2 has 3, the rest 2.
struct Fleet {
  std::vector<hive::ClusterDeployment> cds;
  std::vector<std::optional<ReportedSet>> entries;

  Fleet() {
    const int waves[] = {1, 1, 2, 2, 2, 3, 3};
    for (size_t i = 0; i < std::size(waves); ++i) {
      hive::ClusterDeployment cd;
      cd.meta.name = cd.meta.ns = "c" + std::to_string(i);
      if (waves[i] < 3) cd.meta.labels["wave"] = std::to_string(waves[i]);
      cd.installed = true;
      cd.installed_timestamp = "2026-01-01T00:00:00Z";
      cd.conditions.push_back({"Unreachable", "False", "", "", "", ""});
      cds.push_back(std::move(cd));
      entries.emplace_back();
    }
  }
  void Report(size_t i, int64_t generation, bool ok = true) {
    ReportedSet& entry = entries[i].emplace();
    entry.kind = hive::SetKind::kSelectorSyncSet;
    entry.name = "fleet-set";
    entry.observed_generation = generation;
    entry.result = ok ? hive::SyncResult::kSuccess : hive::SyncResult::kFailure;
    if (!ok) entry.failure_message = "namespaces \"x\" not found";
  }
  std::vector<RolloutCluster> Clusters() const {
    std::vector<RolloutCluster> out;
    for (size_t i = 0; i < cds.size(); ++i)
      out.push_back({&cds[i], entries[i] ? &*entries[i] : nullptr});
    return out;
  }
};

GatedSet SetAt(int64_t generation, const std::optional<RolloutState>& state,
               const std::string& spec = kThreeWaves) {
  hive::ObjectMeta meta;
  meta.name = "fleet-set";
  meta.generation = generation;
  meta.annotations[rollout::kSpecAnnotation] = spec;
  if (state) meta.annotations[rollout::kStateAnnotation] = rollout::EncodeState(*state);
  return {hive::SetKind::kSelectorSyncSet, "", "fleet-set", generation, rollout::RolloutOf(meta)};
}

// Decides and returns the state written (REQUIREs a write).
RolloutState Written(const GatedSet& set, const Fleet& fleet, WallTime now,
                     const char* reason = nullptr) {
  RolloutStep step = DecideRollout(set, fleet.Clusters(), now);
  REQUIRE(step.write);
  if (reason) {
    REQUIRE(step.event);
    CHECK(step.event->reason == reason);
  }
  return *step.write;
}

}  // namespace

TEST_CASE("rollout decision: a new generation starts at wave 1, and waves advance once healthy") {
  FakeClock clock;
  Fleet fleet;
  for (size_t i = 0; i < fleet.cds.size(); ++i) fleet.Report(i, 1);  // all at generation 1

  RolloutState s = Written(SetAt(2, std::nullopt), fleet, clock.WallNow(), "RolloutStarted");
  CHECK(s.generation == 2);
  CHECK(s.wave == 1);
  CHECK(s.waves == 3);
  CHECK(s.phase == Phase::kProgressing);
  CHECK(s.wave_started_at == FormatRfc3339(clock.WallNow()));

  // Wave 1 not synced yet: nothing to do.
  CHECK_FALSE(DecideRollout(SetAt(2, s), fleet.Clusters(), clock.WallNow()).write);
  fleet.Report(0, 2);
  fleet.Report(1, 2);
  // Done: healthy from now; not yet long enough.
  clock.Advance(1min);
  s = Written(SetAt(2, s), fleet, clock.WallNow());
  CHECK(s.healthy_since == FormatRfc3339(clock.WallNow()));
  CHECK(s.wave == 1);
  clock.Advance(9min);
  CHECK_FALSE(DecideRollout(SetAt(2, s), fleet.Clusters(), clock.WallNow()).write);
  clock.Advance(1min);
  s = Written(SetAt(2, s), fleet, clock.WallNow(), "RolloutWaveReleased");
  CHECK(s.wave == 2);
  CHECK(s.healthy_since.empty());

  // Wave 2: one failure is within its budget (maxFailures 1).
  fleet.Report(2, 2);
  fleet.Report(3, 2, false);
  fleet.Report(4, 2);
  s = Written(SetAt(2, s), fleet, clock.WallNow());
  clock.Advance(10min);
  s = Written(SetAt(2, s), fleet, clock.WallNow(), "RolloutWaveReleased");
  CHECK(s.wave == 3);
  fleet.Report(5, 2);
  fleet.Report(6, 2);
  s = Written(SetAt(2, s), fleet, clock.WallNow());
  clock.Advance(10min);
  s = Written(SetAt(2, s), fleet, clock.WallNow(), "RolloutComplete");
  CHECK(s.phase == Phase::kComplete);
  CHECK(s.wave == 3);
  // Complete: nothing more until a new generation, which starts over at wave 1.
  CHECK_FALSE(DecideRollout(SetAt(2, s), fleet.Clusters(), clock.WallNow()).write);
  RolloutState again = Written(SetAt(3, s), fleet, clock.WallNow(), "RolloutStarted");
  CHECK(again.generation == 3);
  CHECK(again.wave == 1);
}

TEST_CASE("rollout decision: too many failures in a wave halt it, naming the clusters") {
  FakeClock clock;
  Fleet fleet;
  RolloutState s = Written(SetAt(2, std::nullopt), fleet, clock.WallNow());
  s.wave = 2;
  fleet.Report(2, 2, false);
  fleet.Report(3, 2, false);  // two failures: more than the wave's budget of 1
  // Halts at once, without waiting for the wave's last cluster.
  RolloutStep step = DecideRollout(SetAt(2, s), fleet.Clusters(), clock.WallNow());
  REQUIRE(step.write);
  CHECK(step.write->phase == Phase::kHalted);
  CHECK(step.write->wave == 2);
  CHECK(step.write->message == "wave 2 of 3: 2 of 3 clusters failed; the wave tolerates 1");
  REQUIRE(step.write->failing.size() == 2);
  CHECK(step.write->failing[0].cluster == "c2/c2");
  CHECK(step.write->failing[0].message == "namespaces \"x\" not found");
  REQUIRE(step.event);
  CHECK(step.event->warning);
  CHECK(step.event->reason == "RolloutHalted");
  CHECK(step.event->message.find("c2/c2: namespaces") != std::string::npos);
  // Halted stays halted, even once the clusters recover: resuming is the operator's.
  fleet.Report(2, 2);
  fleet.Report(3, 2);
  CHECK_FALSE(DecideRollout(SetAt(2, *step.write), fleet.Clusters(), clock.WallNow()).write);
  // Resumed (syncbusctl: Progressing again), the wave is judged afresh.
  RolloutState resumed = *step.write;
  resumed.phase = Phase::kProgressing;
  resumed.failing.clear();
  resumed.message.clear();
  fleet.Report(4, 2);
  RolloutState healthy = Written(SetAt(2, resumed), fleet, clock.WallNow());
  CHECK(healthy.phase == Phase::kProgressing);
  CHECK_FALSE(healthy.healthy_since.empty());
}

TEST_CASE(
    "rollout decision: a wave that misses its deadline halts, and skipped clusters are not "
    "awaited") {
  FakeClock clock;
  Fleet fleet;
  RolloutState s = Written(SetAt(2, std::nullopt), fleet, clock.WallNow());
  fleet.Report(0, 2);
  clock.Advance(31min);
  RolloutState halted = Written(SetAt(2, s), fleet, clock.WallNow(), "RolloutHalted");
  CHECK(halted.phase == Phase::kHalted);
  CHECK(halted.message ==
        "wave 1 of 3: 1 of 2 clusters not synced within the progress deadline 30m");
  REQUIRE(halted.failing.size() == 1);
  CHECK(halted.failing[0].cluster == "c1/c1");
  // The same wave with its late cluster hibernating (unreachable): done without it.
  fleet.cds[1].conditions[0].status = "True";
  RolloutState done = Written(SetAt(2, s), fleet, clock.WallNow());
  CHECK(done.phase == Phase::kProgressing);
  CHECK_FALSE(done.healthy_since.empty());
}

TEST_CASE("rollout decision: an unreadable spec halts once, and once mended the rollout starts") {
  FakeClock clock;
  Fleet fleet;
  RolloutState halted =
      Written(SetAt(4, std::nullopt, R"({"waves": 3})"), fleet, clock.WallNow(), "RolloutHalted");
  CHECK(halted.generation == 4);
  CHECK(halted.wave == 0);
  CHECK(halted.message.find("cannot roll out: rollout annotation") == 0);
  CHECK_FALSE(
      DecideRollout(SetAt(4, halted, R"({"waves": 3})"), fleet.Clusters(), clock.WallNow()).write);
  RolloutState started = Written(SetAt(4, halted), fleet, clock.WallNow(), "RolloutStarted");
  CHECK(started.wave == 1);
  CHECK(started.phase == Phase::kProgressing);
}

TEST_CASE("rollout decision: an empty wave passes at once, and an aborted rollout stays as it is") {
  FakeClock clock;
  Fleet fleet;
  const std::string spec =
      R"({"waves": [{"selector": {"matchLabels": {"wave": "none"}}}], "healthyFor": "1h"})";
  RolloutState s = Written(SetAt(2, std::nullopt, spec), fleet, clock.WallNow());
  RolloutState next = Written(SetAt(2, s, spec), fleet, clock.WallNow(), "RolloutWaveReleased");
  CHECK(next.wave == 2);
  RolloutState aborted = next;
  aborted.phase = Phase::kAborted;
  clock.Advance(24h);
  CHECK_FALSE(DecideRollout(SetAt(2, aborted, spec), fleet.Clusters(), clock.WallNow()).write);
}
