#include "ctl/fleet_progress.h"

#include <algorithm>
#include <map>

#include "common/hive/desired_state.h"
#include "common/hive/types.h"

namespace syncbus::ctl {

Json FleetProgress::ToJson() const {
  return {{"clusters", clusters}, {"synced", synced}, {"failing", failing}, {"pending", pending},
          {"skipped", skipped}, {"failingClusters", failing_clusters}, {"pendingClusters", pending_clusters}};
}

FleetProgress ComputeProgress(const std::vector<Json>& cluster_deployments, const std::vector<Json>& syncsets,
                              const std::vector<Json>& selector_syncsets, const std::vector<Json>& cluster_syncs) {
  std::map<std::string, std::vector<hive::SyncSet>> ss_by_ns;
  for (const auto& j : syncsets) {
    if (auto ss = hive::SyncSet::FromJson(j); ss.ok()) ss_by_ns[ss->meta.ns].push_back(std::move(*ss));
  }
  std::vector<hive::SelectorSyncSet> sss;
  for (const auto& j : selector_syncsets) {
    if (auto s = hive::SelectorSyncSet::FromJson(j); s.ok()) sss.push_back(std::move(*s));
  }
  std::vector<const hive::SelectorSyncSet*> sss_ptrs;
  for (const auto& s : sss) sss_ptrs.push_back(&s);
  std::map<std::string, hive::ClusterSync> statuses;
  for (const auto& j : cluster_syncs) {
    if (auto cs = hive::ClusterSync::FromJson(j); cs.ok()) statuses[cs->meta.Key()] = std::move(*cs);
  }
  FleetProgress p;
  for (const auto& j : cluster_deployments) {
    auto cd = hive::ClusterDeployment::FromJson(j);
    if (!cd.ok()) continue;
    std::vector<const hive::SyncSet*> ns_sets;
    for (const auto& s : ss_by_ns[cd->meta.ns]) ns_sets.push_back(&s);
    hive::DesiredState desired = hive::ComputeDesired(*cd, ns_sets, sss_ptrs);
    if (!desired.skip_reason.empty()) {
      ++p.skipped;
      continue;
    }
    ++p.clusters;
    auto st = statuses.find(cd->meta.Key());
    bool all_current = true, any_failed = false;
    for (const auto& set : desired.sets) {
      const hive::SyncStatus* entry = nullptr;
      if (st != statuses.end()) {
        const auto& list = set.kind == hive::SetKind::kSyncSet ? st->second.status.sync_sets
                                                               : st->second.status.selector_sync_sets;
        for (const auto& e : list) {
          if (e.name == set.name) entry = &e;
        }
      }
      if (!entry || entry->observed_generation != set.generation) {
        all_current = false;
      } else if (entry->result != hive::SyncResult::kSuccess) {
        any_failed = true;
      }
    }
    if (any_failed) {
      ++p.failing;
      p.failing_clusters.push_back(cd->meta.Key());
    } else if (!all_current) {
      ++p.pending;
      p.pending_clusters.push_back(cd->meta.Key());
    } else {
      ++p.synced;
    }
  }
  std::sort(p.failing_clusters.begin(), p.failing_clusters.end());
  std::sort(p.pending_clusters.begin(), p.pending_clusters.end());
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
