#include "consumer/sync_plan.h"

#include <algorithm>

#include "common/hive/status_rules.h"

namespace syncbus::consumer {
namespace {

const hive::ClusterSyncStatus& CurrentStatus(const ClusterState& state) {
  static const hive::ClusterSyncStatus kNoStatus;
  return state.status ? state.status->status : kNoStatus;
}

// The inputs of the plans of one cluster's sets: the set, its namespace, the cluster's labels,
// the source Secrets and the objects the set's status entry tracks.
class PlanInputs {
 public:
  PlanInputs(const hive::ClusterDeployment& cd, const hive::ClusterSyncStatus& current,
             const SecretSources& secrets)
      : cd_(cd), current_(current), secrets_(secrets) {}

  PlanInput For(const SetWork& w) const {
    PlanInput in;
    in.spec = w.spec;
    in.set_namespace = w.ns;
    in.cd_labels = &cd_.meta.labels;
    in.secrets = &secrets_;
    if (const hive::SyncStatus* e = Entry(w)) in.previously_tracked = e->resources_to_delete;
    return in;
  }
  const hive::SyncStatus* Entry(const SetWork& w) const {
    return FindEntry(current_, w.kind, w.name);
  }

 private:
  const hive::ClusterDeployment& cd_;
  const hive::ClusterSyncStatus& current_;
  const SecretSources& secrets_;
};

// The objects every applicable set lists now, which are never deleted (moved between sets).
// Listed only when the sync may delete something: a set removed, or one to apply that tracked
// objects before.
std::set<std::string> ObjectsListedNow(const SyncPlan& plan, const PlanInputs& inputs,
                                       RestMapper* mapper) {
  const bool may_delete =
      plan.any_delete() || std::any_of(plan.work.begin(), plan.work.end(), [&](const SetWork& w) {
        const hive::SyncStatus* e = inputs.Entry(w);
        return w.needs_apply && e != nullptr && !e->resources_to_delete.empty();
      });
  std::set<std::string> listed;
  if (may_delete) {
    for (const SetWork& w : plan.work) {
      if (w.held) {  // what it tracked stays on the cluster as it is
        if (const hive::SyncStatus* e = inputs.Entry(w)) {
          for (const auto& ref : e->resources_to_delete) listed.insert(ObjectIdentity(ref));
        }
        continue;
      }
      listed.merge(ListedObjects(inputs.For(w), mapper));
    }
  }
  return listed;
}

// One outcome per set of the sync, in Hive's order: per kind, the removed sets, then the sets by
// name; `metas` gets each one's set (null for a removed one).
void OutcomesInHiveOrder(const SyncPlan& plan, ClusterSteps& steps) {
  for (SetKind kind : {SetKind::kSyncSet, SetKind::kSelectorSyncSet}) {
    for (const RemovedSet& r : plan.removed) {
      if (r.kind != kind) continue;
      SetOutcome gone;
      gone.kind = r.kind;
      gone.name = r.entry.name;
      gone.removed = true;
      gone.sync_mode = true;
      steps.outcomes.push_back(std::move(gone));
      steps.metas.push_back(nullptr);
    }
    for (const SetWork& w : plan.work) {
      if (w.kind != kind) continue;
      SetOutcome set;
      set.kind = w.kind;
      set.name = w.name;
      set.generation = w.generation;
      set.sync_mode = w.spec->resource_apply_mode == hive::ResourceApplyMode::kSync;
      steps.outcomes.push_back(std::move(set));
      steps.metas.push_back(w.meta);
    }
  }
}

// The runs, in the outcomes' order: one for each removed set with objects to delete and each set
// to apply.
void PlanRuns(const SyncPlan& plan, const PlanInputs& inputs, const std::set<std::string>& listed,
              RestMapper* mapper, ClusterSteps& steps) {
  for (size_t i = 0; i < steps.outcomes.size(); ++i) {
    const SetOutcome& o = steps.outcomes[i];
    if (o.removed) {
      auto r = std::find_if(plan.removed.begin(), plan.removed.end(), [&](const RemovedSet& x) {
        return x.kind == o.kind && x.entry.name == o.name;
      });
      if (r == plan.removed.end() || r->entry.resources_to_delete.empty()) continue;
      steps.runs.push_back(PlanRemoval(r->entry.resources_to_delete, listed, mapper));
    } else {
      auto w = std::find_if(plan.work.begin(), plan.work.end(),
                            [&](const SetWork& x) { return x.kind == o.kind && x.name == o.name; });
      if (w == plan.work.end() || !w->needs_apply) continue;
      PlanInput in = inputs.For(*w);
      in.listed_elsewhere = &listed;
      steps.runs.push_back(PlanSet(in, mapper));
    }
    steps.outcome_of.push_back(i);
  }
}

// Which earlier runs each run must wait for: two run side by side only when the end state cannot
// tell (set_plan.h: MustFollow).
std::vector<std::vector<size_t>> RunOrder(const std::vector<SetPlan>& runs) {
  std::vector<SetFootprint> footprints;
  footprints.reserve(runs.size());
  for (const SetPlan& p : runs) footprints.push_back(FootprintOf(p));
  std::vector<std::vector<size_t>> waits_for(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (MustFollow(footprints[j], footprints[i])) waits_for[i].push_back(j);
    }
  }
  return waits_for;
}

}  // namespace

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
  const hive::ClusterSyncStatus& current = CurrentStatus(state);
  SyncPlan plan;
  auto add = [&](SetKind kind, const hive::ObjectMeta& meta, const hive::SyncSetCommonSpec& spec,
                 std::string ns) {
    const hive::SyncStatus* e = FindEntry(current, kind, meta.name);
    if (state.Held(kind, meta.name)) {  // held back by a rollout: its entry stays as it is
      plan.work.push_back(
          {kind, meta.name, std::move(ns), e->observed_generation, &spec, false, &meta, true});
      return;
    }
    bool needs_apply = full_reapply || !e || e->observed_generation != meta.generation ||
                       e->result != hive::SyncResult::kSuccess;
    plan.work.push_back(
        {kind, meta.name, std::move(ns), meta.generation, &spec, needs_apply, &meta, false});
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

PlanReads ReadsOf(const ClusterState& state, const SyncPlan& plan) {
  PlanReads reads;
  const SecretSources none;
  const PlanInputs inputs(*state.cd, CurrentStatus(state), none);
  std::set<std::string> seen;
  for (const SetWork& w : plan.work) {
    if (!w.needs_apply) continue;
    reads.api_versions.merge(ApiVersionsOf(inputs.For(w)));
    for (const auto& m : w.spec->secret_mappings) {
      std::string source_key = SecretSourceKey(m, w.ns);  // "": refused before any read
      if (source_key.empty() || !seen.insert(source_key).second) continue;
      reads.secrets.emplace_back(source_key.substr(0, source_key.find('/')), m.source.name);
    }
  }
  for (const RemovedSet& r : plan.removed) {
    for (const auto& ref : r.entry.resources_to_delete) reads.api_versions.insert(ref.api_version);
  }
  return reads;
}

ClusterSteps PlanSteps(const ClusterState& state, const SyncPlan& plan,
                       const SecretSources& secrets, RestMapper* mapper) {
  ClusterSteps steps;
  OutcomesInHiveOrder(plan, steps);
  const PlanInputs inputs(*state.cd, CurrentStatus(state), secrets);
  const std::set<std::string> listed = ObjectsListedNow(plan, inputs, mapper);
  PlanRuns(plan, inputs, listed, mapper, steps);
  steps.waits_for = RunOrder(steps.runs);
  return steps;
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
