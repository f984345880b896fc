// FleetProgress: how far the fleet is from its desired state, read from the hub — the barrier
// behind `syncbusctl wait`: a cluster counts as synced when its ClusterSync reports every
// applicable SyncSet/SelectorSyncSet at the set's current generation with result Success.
// Skipped clusters (paused, deleting, not installed, unreachable) are counted apart.
// Pure computation plus one blocking read; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/kube/client.h"
#include "common/status.h"

namespace syncbus::ctl {

struct FleetProgress {
  size_t clusters = 0;       // eligible clusters (total minus skipped)
  size_t synced = 0;
  size_t failing = 0;        // some applicable set reports Failure at its current generation
  size_t pending = 0;
  size_t skipped = 0;
  std::vector<std::string> failing_clusters;   // "ns/name", sorted
  std::vector<std::string> pending_clusters;

  bool done() const { return synced == clusters; }
  Json ToJson() const;
};

// Computes progress from listed objects (any order).
FleetProgress ComputeProgress(const std::vector<Json>& cluster_deployments, const std::vector<Json>& syncsets,
                              const std::vector<Json>& selector_syncsets, const std::vector<Json>& cluster_syncs);

// Lists the four collections (optionally one namespace) from the hub and computes progress.
Result<FleetProgress> ReadProgress(kube::Client& hub, const std::string& ns);

}  // namespace syncbus::ctl
