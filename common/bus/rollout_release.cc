#include "common/bus/rollout_release.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace syncbus::rollout {

SetRollout RolloutOf(const hive::ObjectMeta& set) {
  SetRollout r;
  auto spec = set.annotations.find(kSpecAnnotation);
  if (spec == set.annotations.end()) return r;
  r.gated = true;
  auto parsed = ParseSpec(spec->second);
  if (parsed.ok()) {
    r.spec = std::move(*parsed);
  } else {
    r.spec_error = parsed.status().message();
  }
  if (auto state = set.annotations.find(kStateAnnotation); state != set.annotations.end()) {
    auto s = ParseState(state->second);
    if (s.ok()) r.state = std::move(*s);
  }
  return r;
}

int WaveOf(const RolloutSpec& spec, const RolloutState& state, const hive::ClusterDeployment& cd) {
  if (spec.by_selector) {
    for (size_t i = 0; i < spec.waves.size(); ++i) {
      if (spec.waves[i].selector->Matches(cd.meta.labels)) return static_cast<int>(i) + 1;
    }
    return static_cast<int>(spec.waves.size()) + 1;
  }
  const uint64_t rank = RankOf(cd.meta.Key());
  for (size_t i = 0; i < state.bounds.size(); ++i) {
    if (rank <= state.bounds[i]) return static_cast<int>(i) + 1;
  }
  return std::max(state.waves, 1);
}

Release ReleaseOf(const SetRollout& rollout, int64_t set_generation,
                  const hive::ClusterDeployment& cd) {
  if (!rollout.gated) return Release::kUngated;
  if (!rollout.spec || !rollout.state || rollout.state->generation != set_generation) {
    return Release::kHeld;
  }
  const RolloutState& state = *rollout.state;
  if (state.phase == Phase::kComplete) return Release::kReleased;
  return WaveOf(*rollout.spec, state, cd) <= state.wave ? Release::kReleased : Release::kHeld;
}

Release ReleaseOf(const hive::ObjectMeta& set, const hive::ClusterDeployment& cd) {
  if (!set.annotations.contains(kSpecAnnotation)) return Release::kUngated;
  return ReleaseOf(RolloutOf(set), set.generation, cd);
}

std::vector<hive::DesiredSet> TakeHeld(
    const hive::ClusterDeployment& cd, std::vector<const hive::SyncSet*>& sync_sets,
    std::vector<const hive::SelectorSyncSet*>& selector_sync_sets) {
  std::vector<hive::DesiredSet> held;
  auto take = [&](auto& sets, hive::SetKind kind) {
    std::erase_if(sets, [&](const auto* set) {
      if (ReleaseOf(set->meta, cd) != Release::kHeld) return false;
      held.push_back({kind, set->meta.name, set->meta.generation});
      return true;
    });
  };
  take(sync_sets, hive::SetKind::kSyncSet);
  take(selector_sync_sets, hive::SetKind::kSelectorSyncSet);
  return held;
}

std::vector<uint64_t> BoundsFor(const RolloutSpec& spec, const std::vector<std::string>& clusters) {
  if (spec.by_selector) return {};
  std::vector<uint64_t> ranks;
  ranks.reserve(clusters.size());
  for (const auto& c : clusters) ranks.push_back(RankOf(c));
  std::sort(ranks.begin(), ranks.end());
  const size_t total = ranks.size();
  std::vector<uint64_t> bounds;
  size_t taken = 0;
  for (const WaveSpec& w : spec.waves) {
    size_t size =
        w.clusters
            ? static_cast<size_t>(*w.clusters)
            : static_cast<size_t>(std::ceil(static_cast<double>(total) * *w.percent / 100.0));
    size = std::max<size_t>(size, 1);
    taken = std::min(total, taken + size);
    if (taken == total) break;  // this wave takes the rest: the last bound is the largest rank
    bounds.push_back(ranks[taken - 1]);
  }
  bounds.push_back(std::numeric_limits<uint64_t>::max());
  return bounds;
}

}  // namespace syncbus::rollout
