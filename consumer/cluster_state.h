// ClusterState: what one sync reads of the hub — the cluster's ClusterDeployment, the SyncSets and
// SelectorSyncSets that apply to it, and its ClusterSync — whether from the consumer's mirror or
// read directly. The objects are immutable and shared, so a state stays valid while the mirror
// moves on. Value type; thread-compatible.
#pragma once

#include <memory>
#include <vector>

#include "common/hive/types.h"

namespace syncbus::consumer {

struct ClusterState {
  std::shared_ptr<const hive::ClusterDeployment> cd;  // null: not on the hub
  // Valid and applying to cd (a set being deleted still applies, as in Hive); sorted by name.
  std::vector<std::shared_ptr<const hive::SyncSet>> sync_sets;
  std::vector<std::shared_ptr<const hive::SelectorSyncSet>> selector_sync_sets;
  std::shared_ptr<const hive::ClusterSync> status;  // null: no ClusterSync yet
};

// Keeps those of `candidates` that apply to `cd`, sorted by name.
std::vector<std::shared_ptr<const hive::SyncSet>> ApplicableSyncSets(
    const hive::ClusterDeployment& cd,
    const std::vector<std::shared_ptr<const hive::SyncSet>>& candidates);
std::vector<std::shared_ptr<const hive::SelectorSyncSet>> ApplicableSelectorSyncSets(
    const hive::ClusterDeployment& cd,
    const std::vector<std::shared_ptr<const hive::SelectorSyncSet>>& candidates);

}  // namespace syncbus::consumer
