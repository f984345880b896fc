#include "consumer/cluster_preview.h"

#include <algorithm>
#include <memory>

#include "common/hive/desired_state.h"
#include "consumer/sync_plan.h"

namespace syncbus::consumer {
namespace {

// Puts `set` in place of the set of the same name in `sets` (sorted by name), or beside them.
template <typename Set>
void PutInPlace(std::vector<std::shared_ptr<const Set>>& sets, std::shared_ptr<const Set> set) {
  auto same = std::find_if(sets.begin(), sets.end(),
                           [&](const auto& s) { return s->meta.name == set->meta.name; });
  if (same != sets.end()) {
    *same = std::move(set);
    return;
  }
  auto after = std::find_if(sets.begin(), sets.end(),
                            [&](const auto& s) { return s->meta.name > set->meta.name; });
  sets.insert(after, std::move(set));
}

template <typename Set>
void TakeOut(std::vector<std::shared_ptr<const Set>>& sets, const std::string& name) {
  sets.erase(
      std::remove_if(sets.begin(), sets.end(), [&](const auto& s) { return s->meta.name == name; }),
      sets.end());
}

// The changed set in the cluster's state: `kind` and `name` say which; whether it applies.
struct Changed {
  SetKind kind = SetKind::kSyncSet;
  std::string name;
  bool applies = false;
};

// Parses `set` and puts it into `state`; an error when it does not parse or is not for this
// cluster's namespace.
Result<Changed> PutChangedSet(const Json& set, ClusterState& state) {
  const hive::ClusterDeployment& cd = *state.cd;
  const std::string kind = set.is_object() ? set.value("kind", "") : "";
  Changed changed;
  if (kind == "SyncSet") {
    auto parsed = hive::SyncSet::FromJson(set);
    if (!parsed.ok()) return parsed.status().Annotate("the SyncSet");
    if (parsed->meta.ns != cd.meta.ns)
      return InvalidArgument("the SyncSet is in namespace " + parsed->meta.ns +
                             ", the cluster in " + cd.meta.ns);
    changed = {SetKind::kSyncSet, parsed->meta.name, hive::AppliesTo(*parsed, cd)};
    if (changed.applies)
      PutInPlace(state.sync_sets, std::make_shared<const hive::SyncSet>(std::move(*parsed)));
    else
      TakeOut(state.sync_sets, changed.name);
  } else if (kind == "SelectorSyncSet") {
    auto parsed = hive::SelectorSyncSet::FromJson(set);
    if (!parsed.ok()) return parsed.status().Annotate("the SelectorSyncSet");
    changed = {SetKind::kSelectorSyncSet, parsed->meta.name, hive::AppliesTo(*parsed, cd)};
    if (changed.applies)
      PutInPlace(state.selector_sync_sets,
                 std::make_shared<const hive::SelectorSyncSet>(std::move(*parsed)));
    else
      TakeOut(state.selector_sync_sets, changed.name);
  } else {
    return InvalidArgument("not a SyncSet or SelectorSyncSet: kind \"" + kind + "\"");
  }
  // A preview shows the change on every cluster it names, whatever waves a rollout of the set
  // would release it in.
  std::erase_if(state.held, [&](const hive::DesiredSet& s) {
    return s.kind == changed.kind && s.name == changed.name;
  });
  return changed;
}

// The sync's plan cut down to the changed set: its applies when it applies (the other sets stay
// in the plan, as what they list is never deleted, but apply nothing), or the deletion of what
// its entry tracks when it no longer does. Empty work when the set neither applies nor was
// applied before.
SyncPlan PlanOfChange(const ClusterState& state, const Changed& changed) {
  SyncPlan plan = PlanSync(state, /*full_reapply=*/true);
  for (SetWork& w : plan.work) w.needs_apply = w.kind == changed.kind && w.name == changed.name;
  plan.removed.erase(std::remove_if(plan.removed.begin(), plan.removed.end(),
                                    [&](const RemovedSet& r) {
                                      return r.kind != changed.kind || r.entry.name != changed.name;
                                    }),
                     plan.removed.end());
  return plan;
}

}  // namespace

PreviewReply ClusterPreviewer::Preview(const std::string& preview_id, const Json& set,
                                       const PreviewCluster& cluster) {
  PreviewReply reply;
  reply.preview_id = preview_id;
  reply.cluster = cluster;
  auto fail = [&reply](std::string why) {
    reply.error = std::move(why);
    return reply;
  };
  Result<ClusterState> state = reader_.ReadCurrent(cluster.ns, cluster.name);
  if (!state.ok()) return fail("reading the cluster's state: " + state.status().message());
  if (!state->cd) return fail("no ClusterDeployment " + cluster.Key());
  const hive::ClusterDeployment& cd = *state->cd;
  if (std::string skip = cd.SkipReason(); !skip.empty())
    return fail("skipped, as Hive skips it: " + skip);
  if (cd.fake())
    return fail("a fake cluster (hive.openshift.io/fake-cluster): a sync sends it nothing");
  Result<Changed> changed = PutChangedSet(set, *state);
  if (!changed.ok()) return fail(changed.status().message());
  const SyncPlan plan = PlanOfChange(*state, *changed);
  if (!plan.any_apply() && !plan.any_delete()) {
    if (!changed->applies) return fail("the set does not apply to this cluster");
    return reply;  // a Sync-mode removal with nothing tracked, or an empty set: nothing to do
  }
  Result<Target> target = inputs_.OpenTarget(cd, "", /*reread=*/false);
  if (!target.ok()) return fail(target.status().message());
  SecretSources secrets;
  const PlanReads reads = ReadsOf(*state, plan);
  if (Status read = inputs_.Read(reads, *target, secrets); !read.ok()) return fail(read.message());
  const ClusterSteps steps = PlanSteps(*state, plan, secrets, target->mapper.get());
  for (const SetPlan& run : steps.runs) {
    std::vector<ObjectPreview> objects =
        PreviewSetPlan(run, *target->client, *target->mapper, options_.preview);
    reply.objects.insert(reply.objects.end(), std::make_move_iterator(objects.begin()),
                         std::make_move_iterator(objects.end()));
  }
  return reply;
}

}  // namespace syncbus::consumer
