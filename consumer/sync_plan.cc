#include "consumer/sync_plan.h"

#include <algorithm>

#include "common/hive/status_rules.h"

namespace syncbus::consumer {

const hive::SyncStatus* FindEntry(const hive::ClusterSyncStatus& status, SetKind kind,
                                  const std::string& name) {
  const auto& entries = kind == SetKind::kSyncSet ? status.sync_sets : status.selector_sync_sets;
  for (const auto& e : entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

bool SyncPlan::any_apply() const {
  return std::any_of(work.begin(), work.end(), [](const SetWork& w) { return w.needs_apply; });
}

bool SyncPlan::any_delete() const {
  return std::any_of(removed.begin(), removed.end(),
                     [](const RemovedSet& r) { return !r.entry.resources_to_delete.empty(); });
}

SyncPlan PlanSync(const ClusterState& state, bool full_reapply) {
  static const hive::ClusterSyncStatus kNoStatus;
  const hive::ClusterSyncStatus& current = state.status ? state.status->status : kNoStatus;
  SyncPlan plan;
  auto add = [&](SetKind kind, const hive::ObjectMeta& meta, const hive::SyncSetCommonSpec& spec,
                 std::string ns) {
    const hive::SyncStatus* e = FindEntry(current, kind, meta.name);
    bool needs_apply = full_reapply || !e || e->observed_generation != meta.generation ||
                       e->result != hive::SyncResult::kSuccess;
    plan.work.push_back(
        {kind, meta.name, std::move(ns), meta.generation, &spec, needs_apply, &meta});
  };
  for (const auto& ss : state.sync_sets) add(SetKind::kSyncSet, ss->meta, ss->spec, ss->meta.ns);
  for (const auto& sss : state.selector_sync_sets)
    add(SetKind::kSelectorSyncSet, sss->meta, sss->spec, "");
  for (SetKind kind : {SetKind::kSyncSet, SetKind::kSelectorSyncSet}) {
    // Hive copies the entries, and for each applicable set in name order swaps its entry with
    // the last one and drops it: the order of what is left is the order of its deletions.
    std::vector<hive::SyncStatus> left =
        kind == SetKind::kSyncSet ? current.sync_sets : current.selector_sync_sets;
    for (const SetWork& w : plan.work) {
      if (w.kind != kind) continue;
      auto it = std::find_if(left.begin(), left.end(),
                             [&](const hive::SyncStatus& e) { return e.name == w.name; });
      if (it == left.end()) continue;
      std::iter_swap(it, left.end() - 1);
      left.pop_back();
    }
    for (auto& e : left) plan.removed.push_back({kind, std::move(e)});
  }
  return plan;
}

bool NothingToWrite(const ClusterState& state, const SyncPlan& plan, bool full_reapply) {
  return plan.up_to_date() && !full_reapply && state.status &&
         hive::FailedConditionCurrent(state.status->status) &&
         !hive::FirstSuccessDue(state.status->status, !state.cd->installed_timestamp.empty());
}

std::string NoWriteReason(const ClusterState& state, bool full_reapply) {
  if (!state.cd) return "cluster-gone";
  if (std::string skip = state.cd->SkipReason(); !skip.empty()) return "skipped:" + skip;
  return NothingToWrite(state, PlanSync(state, full_reapply), full_reapply) ? "up-to-date" : "";
}

}  // namespace syncbus::consumer
