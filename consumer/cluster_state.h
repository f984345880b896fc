// ClusterState: what one sync reads of the hub — the cluster's ClusterDeployment, the SyncSets and
// SelectorSyncSets that apply to it, and its ClusterSync — whether from the consumer's mirror or
// read directly. The objects are immutable and shared, so a state stays valid while the mirror
// moves on. Value type; thread-compatible.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/hive/desired_state.h"
#include "common/hive/types.h"

namespace syncbus::consumer {

struct ClusterState {
  std::shared_ptr<const hive::ClusterDeployment> cd;  // null: not on the hub
  // Valid and applying to cd (a set being deleted still applies, as in Hive), and those a
  // rollout holds back from cd that the status has an entry for (see `held`); sorted by name.
  std::vector<std::shared_ptr<const hive::SyncSet>> sync_sets;
  std::vector<std::shared_ptr<const hive::SelectorSyncSet>> selector_sync_sets;
  std::shared_ptr<const hive::ClusterSync> status;  // null: no ClusterSync yet
  // The sets a rollout holds back from cd (common/bus/rollout_release.h), whether they apply or
  // not: neither applied nor removed, their entries kept as they are.
  std::vector<hive::DesiredSet> held;

  bool Held(hive::SetKind kind, const std::string& name) const;
};

// Fills state.sync_sets, state.selector_sync_sets and state.held from the candidates (the
// SyncSets of cd's namespace, every SelectorSyncSet): state.cd and state.status must be set.
void ChooseSets(
    ClusterState& state, const std::vector<std::shared_ptr<const hive::SyncSet>>& sync_sets,
    const std::vector<std::shared_ptr<const hive::SelectorSyncSet>>& selector_sync_sets);

}  // namespace syncbus::consumer
