#include "ctl/fleet_progress.h"

#include <algorithm>
#include <map>

#include "common/hive/desired_state.h"
#include "common/hive/types.h"

namespace syncbus::ctl {

Json FleetProgress::ToJson() const {
  return {{"clusters", clusters},
          {"synced", synced},
          {"failing", failing},
          {"pending", pending},
          {"skipped", skipped},
          {"failingClusters", failing_clusters},
          {"pendingClusters", pending_clusters}};
}

namespace {

struct Inputs {
  std::map<std::string, std::vector<hive::SyncSet>> ss_by_ns;
  std::vector<hive::SelectorSyncSet> sss;
  std::vector<const hive::SelectorSyncSet*> sss_ptrs;
};

Inputs Parse(const std::vector<Json>& syncsets, const std::vector<Json>& selector_syncsets) {
  Inputs in;
  for (const auto& j : syncsets) {
    if (auto ss = hive::SyncSet::FromJson(j); ss.ok())
      in.ss_by_ns[ss->meta.ns].push_back(std::move(*ss));
  }
  for (const auto& j : selector_syncsets) {
    if (auto s = hive::SelectorSyncSet::FromJson(j); s.ok()) in.sss.push_back(std::move(*s));
  }
  for (const auto& s : in.sss) in.sss_ptrs.push_back(&s);
  return in;
}

// The cluster's applicable sets against its status (nullptr: no ClusterSync yet).
std::vector<SetState> Sets(const hive::ClusterDeployment& cd, Inputs& in,
                           const hive::ClusterSync* st, std::string* skip_reason) {
  std::vector<const hive::SyncSet*> ns_sets;
  for (const auto& s : in.ss_by_ns[cd.meta.ns]) ns_sets.push_back(&s);
  hive::DesiredState desired = hive::ComputeDesired(cd, ns_sets, in.sss_ptrs);
  if (skip_reason != nullptr) *skip_reason = desired.skip_reason;
  std::vector<SetState> out;
  for (const auto& set : desired.sets) {
    SetState row;
    row.kind = set.kind == hive::SetKind::kSyncSet ? "SyncSet" : "SelectorSyncSet";
    row.name = set.name;
    row.generation = set.generation;
    if (st != nullptr) {
      const auto& list = set.kind == hive::SetKind::kSyncSet ? st->status.sync_sets
                                                             : st->status.selector_sync_sets;
      for (const auto& e : list) {
        if (e.name != set.name) continue;
        row.observed = e.observed_generation;
        row.result = e.result == hive::SyncResult::kSuccess ? "Success" : "Failure";
        row.last_transition = e.last_transition_time;
        row.first_success = e.first_success_time;
        row.failure = e.failure_message;
      }
    }
    out.push_back(std::move(row));
  }
  return out;
}

ClusterHubState Classify(const std::string& key, const std::string& skip_reason,
                         const std::vector<SetState>& sets) {
  ClusterHubState c;
  c.key = key;
  if (!skip_reason.empty()) {
    c.kind = ClusterHubState::Kind::kSkipped;
    c.skip_reason = skip_reason;
    return c;
  }
  bool all_current = true, any_failed = false;
  for (const auto& s : sets) {
    if (!s.observed || *s.observed != s.generation) {
      if (all_current)
        c.detail = s.kind + " " + s.name + " not yet at generation " + std::to_string(s.generation);
      all_current = false;
    } else if (s.result != "Success") {
      if (!any_failed || (!s.last_transition.empty() && s.last_transition < c.since)) {
        c.since = s.last_transition;
        c.detail = s.kind + " " + s.name + ": " + s.failure;
      }
      any_failed = true;
    }
  }
  if (any_failed) {
    c.kind = ClusterHubState::Kind::kFailing;
  } else if (!all_current) {
    c.kind = ClusterHubState::Kind::kPending;
  } else {
    c.kind = ClusterHubState::Kind::kSynced;
    for (const auto& s : sets) c.since = std::max(c.since, s.last_transition);
  }
  return c;
}

}  // namespace

std::vector<SetState> DescribeSets(const Json& cluster_deployment,
                                   const std::vector<Json>& syncsets,
                                   const std::vector<Json>& selector_syncsets,
                                   const Json* cluster_sync, std::string* skip_reason) {
  auto cd = hive::ClusterDeployment::FromJson(cluster_deployment);
  if (!cd.ok()) return {};
  Inputs in = Parse(syncsets, selector_syncsets);
  std::optional<hive::ClusterSync> cs;
  if (cluster_sync != nullptr) {
    if (auto parsed = hive::ClusterSync::FromJson(*cluster_sync); parsed.ok())
      cs = std::move(*parsed);
  }
  return Sets(*cd, in, cs ? &*cs : nullptr, skip_reason);
}

FleetProgress ComputeProgress(const std::vector<Json>& cluster_deployments,
                              const std::vector<Json>& syncsets,
                              const std::vector<Json>& selector_syncsets,
                              const std::vector<Json>& cluster_syncs) {
  Inputs in = Parse(syncsets, selector_syncsets);
  std::map<std::string, hive::ClusterSync> statuses;
  for (const auto& j : cluster_syncs) {
    if (auto cs = hive::ClusterSync::FromJson(j); cs.ok())
      statuses[cs->meta.Key()] = std::move(*cs);
  }
  FleetProgress p;
  for (const auto& j : cluster_deployments) {
    auto cd = hive::ClusterDeployment::FromJson(j);
    if (!cd.ok()) continue;
    auto st = statuses.find(cd->meta.Key());
    std::string skip;
    std::vector<SetState> sets = Sets(*cd, in, st == statuses.end() ? nullptr : &st->second, &skip);
    ClusterHubState c = Classify(cd->meta.Key(), skip, sets);
    switch (c.kind) {
      case ClusterHubState::Kind::kSkipped: ++p.skipped; break;
      case ClusterHubState::Kind::kFailing:
        ++p.clusters;
        ++p.failing;
        p.failing_clusters.push_back(c.key);
        break;
      case ClusterHubState::Kind::kPending:
        ++p.clusters;
        ++p.pending;
        p.pending_clusters.push_back(c.key);
        break;
      case ClusterHubState::Kind::kSynced:
        ++p.clusters;
        ++p.synced;
        break;
    }
    p.states.push_back(std::move(c));
  }
  std::sort(p.failing_clusters.begin(), p.failing_clusters.end());
  std::sort(p.pending_clusters.begin(), p.pending_clusters.end());
  std::sort(p.states.begin(), p.states.end(),
            [](const auto& a, const auto& b) { return a.key < b.key; });
  return p;
}

Result<FleetProgress> ReadProgress(kube::Client& hub, const std::string& ns) {
  namespace res = kube::resources;
  auto cds = hub.List(kube::Collection(res::kClusterDeployments, ns), {});
  if (!cds.ok()) return cds.status().Annotate("listing ClusterDeployments");
  auto ss = hub.List(kube::Collection(res::kSyncSets, ns), {});
  if (!ss.ok()) return ss.status().Annotate("listing SyncSets");
  auto sss = hub.List(kube::Collection(res::kSelectorSyncSets), {});
  if (!sss.ok()) return sss.status().Annotate("listing SelectorSyncSets");
  auto cs = hub.List(kube::Collection(res::kClusterSyncs, ns), {});
  if (!cs.ok()) return cs.status().Annotate("listing ClusterSyncs");
  return ComputeProgress(cds->items, ss->items, sss->items, cs->items);
}

}  // namespace syncbus::ctl
