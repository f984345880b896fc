// SyncPlan: what one sync must do, decided from the cluster's state alone: which applicable sets
// need applying (new, at a new generation, failed last time, or all of them on a full reapply),
// and which ClusterSync entries belong to sets that no longer apply (their Sync-mode objects are
// deleted), each kind in the order Hive handles them. Pure functions over value types; a plan
// points into the ClusterState it was made from, which must outlive it.
#pragma once

#include <string>
#include <vector>

#include "common/hive/types.h"
#include "consumer/cluster_state.h"
#include "consumer/status_builder.h"

namespace syncbus::consumer {

struct SetWork {
  SetKind kind;
  std::string name;
  std::string ns;  // SyncSet: its namespace
  int64_t generation;
  const hive::SyncSetCommonSpec* spec;
  bool needs_apply;
  const hive::ObjectMeta* meta;  // the set's metadata (creation time, annotations)
};

struct RemovedSet {
  SetKind kind{};
  hive::SyncStatus entry;  // its entry in the ClusterSync status
};

struct SyncPlan {
  std::vector<SetWork> work;  // every applicable set: SyncSets, then SelectorSyncSets
  // Entries of sets that no longer apply, SyncSets' first, each kind in the order Hive visits
  // them (what its swap-removal of the matched entries leaves).
  std::vector<RemovedSet> removed;

  bool any_apply() const;
  bool any_delete() const;  // a removed set tracks objects to delete
  // Nothing to apply and nothing removed: the request needs no target traffic.
  bool up_to_date() const { return !any_apply() && removed.empty(); }
};

SyncPlan PlanSync(const ClusterState& state, bool full_reapply);

// Whether a sync of `state` (its ClusterDeployment present) with `plan` has nothing to write, not
// even the status: no set to apply or remove, not a full reapply, and a ClusterSync whose
// condition and firstSuccessTime already say what its entries call for.
bool NothingToWrite(const ClusterState& state, const SyncPlan& plan, bool full_reapply);

// Why a sync of `state` would end without any write ("cluster-gone", "skipped:<reason>",
// "up-to-date"), or "" when it would write. ClusterSyncer decides the same way, so a request
// for which this is not "" is settled by running it too.
std::string NoWriteReason(const ClusterState& state, bool full_reapply);

// The status entry of set `name` of `kind`, or null.
const hive::SyncStatus* FindEntry(const hive::ClusterSyncStatus& status, SetKind kind,
                                  const std::string& name);

}  // namespace syncbus::consumer
