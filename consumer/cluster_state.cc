#include "consumer/cluster_state.h"

#include <algorithm>

#include "common/hive/desired_state.h"

namespace syncbus::consumer {
namespace {

template <typename Set>
std::vector<std::shared_ptr<const Set>> Applicable(
    const hive::ClusterDeployment& cd, const std::vector<std::shared_ptr<const Set>>& candidates) {
  std::vector<std::shared_ptr<const Set>> kept;
  for (const auto& set : candidates) {
    if (hive::AppliesTo(*set, cd))
      kept.push_back(set);  // a set being deleted still applies, as in Hive
  }
  std::sort(kept.begin(), kept.end(),
            [](const auto& a, const auto& b) { return a->meta.name < b->meta.name; });
  return kept;
}

}  // namespace

std::vector<std::shared_ptr<const hive::SyncSet>> ApplicableSyncSets(
    const hive::ClusterDeployment& cd,
    const std::vector<std::shared_ptr<const hive::SyncSet>>& candidates) {
  return Applicable(cd, candidates);
}

std::vector<std::shared_ptr<const hive::SelectorSyncSet>> ApplicableSelectorSyncSets(
    const hive::ClusterDeployment& cd,
    const std::vector<std::shared_ptr<const hive::SelectorSyncSet>>& candidates) {
  return Applicable(cd, candidates);
}

}  // namespace syncbus::consumer
