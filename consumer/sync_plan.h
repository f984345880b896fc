// The plan of one cluster's sync, in one room, for every caller that must know what a sync would
// do (the sync itself, and anything that previews it). Two steps, pure functions over value
// types:
//   1. PlanSync, from the cluster's state alone: which applicable sets need applying (new, at a
//      new generation, failed last time, or all of them on a full reapply), and which ClusterSync
//      entries belong to sets that no longer apply (their Sync-mode objects are deleted), each
//      kind in the order Hive handles them; whether the sync writes anything at all; and what
//      the steps need read first (PlanReads: source Secrets, group-versions to discover);
//   2. PlanSteps, from that and what was read: one outcome per set in Hive's order, the runs of
//      steps (set_plan.h) that fill them in, and which run must wait for which.
// Mapping a kind may block on the cluster's discovery (RestMapper), which PlanReads lets the
// caller fetch first. A plan points into the ClusterState it was made from, which must outlive
// it.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/hive/types.h"
#include "consumer/cluster_state.h"
#include "consumer/rest_mapper.h"
#include "consumer/set_plan.h"
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
  // Held back from the cluster by a rollout (ClusterState::held): never applied, its entry (and
  // `generation`, the entry's) kept as it is.
  bool held;
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

// What the steps of `plan` need read before PlanSteps: the source Secrets of the secretMappings
// of the sets to apply ("ns", "name"; a mapping Hive refuses before reading names none), and
// every group-version to discover (the sets to apply and the removed sets' objects).
struct PlanReads {
  std::vector<std::pair<std::string, std::string>> secrets;
  std::set<std::string> api_versions;
};
PlanReads ReadsOf(const ClusterState& state, const SyncPlan& plan);

// The steps of a sync: one outcome per set in Hive's order (per kind, the removed sets, then the
// sets by name) for the record to fill in, and the runs that fill them in — one for each removed
// set with objects to delete and each set to apply — with which earlier runs each must wait for
// (set_plan.h's MustFollow; Hive applies the sets one after the other).
struct ClusterSteps {
  std::vector<SetOutcome> outcomes;
  std::vector<const hive::ObjectMeta*> metas;  // by outcome: its set (null for a removed one)
  std::vector<SetPlan> runs;
  std::vector<size_t> outcome_of;              // by run: its index in `outcomes`
  std::vector<std::vector<size_t>> waits_for;  // by run: the earlier runs it must follow
};
// `secrets`: what ReadsOf named, as read; `mapper`: the cluster's (null for a fake cluster).
ClusterSteps PlanSteps(const ClusterState& state, const SyncPlan& plan,
                       const SecretSources& secrets, RestMapper* mapper);

// The status entry of set `name` of `kind`, or null.
const hive::SyncStatus* FindEntry(const hive::ClusterSyncStatus& status, SetKind kind,
                                  const std::string& name);

}  // namespace syncbus::consumer
