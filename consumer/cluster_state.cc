#include "consumer/cluster_state.h"

#include <algorithm>

#include "common/bus/rollout_release.h"

namespace syncbus::consumer {
namespace {

bool HasEntry(const ClusterState& state, hive::SetKind kind, const std::string& name) {
  if (!state.status) return false;
  const auto& entries = kind == hive::SetKind::kSyncSet ? state.status->status.sync_sets
                                                        : state.status->status.selector_sync_sets;
  return std::any_of(entries.begin(), entries.end(),
                     [&](const hive::SyncStatus& e) { return e.name == name; });
}

// Those of `candidates` that apply to state.cd and are released to it, and those held back from
// it that have an entry (named in state.held), sorted by name.
template <typename Set>
std::vector<std::shared_ptr<const Set>> Choose(
    ClusterState& state, hive::SetKind kind,
    const std::vector<std::shared_ptr<const Set>>& candidates) {
  const hive::ClusterDeployment& cd = *state.cd;
  std::vector<std::shared_ptr<const Set>> kept;
  for (const auto& set : candidates) {
    if (rollout::ReleaseOf(set->meta, cd) == rollout::Release::kHeld) {
      state.held.push_back({kind, set->meta.name, set->meta.generation});
      if (HasEntry(state, kind, set->meta.name)) kept.push_back(set);
    } else if (hive::AppliesTo(*set, cd)) {
      kept.push_back(set);  // a set being deleted still applies, as in Hive
    }
  }
  std::sort(kept.begin(), kept.end(),
            [](const auto& a, const auto& b) { return a->meta.name < b->meta.name; });
  return kept;
}

}  // namespace

bool ClusterState::Held(hive::SetKind kind, const std::string& name) const {
  return std::any_of(held.begin(), held.end(),
                     [&](const hive::DesiredSet& s) { return s.kind == kind && s.name == name; });
}

void ChooseSets(
    ClusterState& state, const std::vector<std::shared_ptr<const hive::SyncSet>>& sync_sets,
    const std::vector<std::shared_ptr<const hive::SelectorSyncSet>>& selector_sync_sets) {
  state.held.clear();
  state.sync_sets = Choose(state, hive::SetKind::kSyncSet, sync_sets);
  state.selector_sync_sets = Choose(state, hive::SetKind::kSelectorSyncSet, selector_sync_sets);
}

}  // namespace syncbus::consumer
