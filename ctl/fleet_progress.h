// FleetProgress: how far the fleet is from its desired state, read from the hub — the barrier
// behind `syncbusctl wait`: a cluster counts as synced when its ClusterSync reports every
// applicable SyncSet/SelectorSyncSet at the set's current generation with result Success.
// Skipped clusters (paused, deleting, not installed, unreachable) are counted apart.
// Pure computation plus one blocking read; thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/kube/client.h"
#include "common/status.h"

namespace syncbus::ctl {

// One cluster as the hub sees it.
struct ClusterHubState {
  enum class Kind { kSynced, kFailing, kPending, kSkipped };
  std::string key;  // "ns/name"
  Kind kind = Kind::kPending;
  std::string skip_reason;  // kSkipped: paused, deleting, not-installed, unreachable
  std::string
      since;  // RFC 3339 or "": synced: its newest set transition; failing: its oldest failure
  std::string detail;  // failing: the first failing set and message; pending: the first set behind
};

// One applicable set of a cluster, desired generation against what its ClusterSync reports.
struct SetState {
  std::string kind;  // SyncSet, SelectorSyncSet
  std::string name;
  int64_t generation = 0;
  std::optional<int64_t> observed;  // none: no status entry yet
  std::string result;               // Success, Failure, "" (no entry)
  std::string last_transition;
  std::string first_success;
  std::string failure;
};

struct FleetProgress {
  size_t clusters = 0;  // eligible clusters (total minus skipped)
  size_t synced = 0;
  size_t failing = 0;  // some applicable set reports Failure at its current generation
  size_t pending = 0;
  size_t skipped = 0;
  std::vector<std::string> failing_clusters;  // "ns/name", sorted
  std::vector<std::string> pending_clusters;
  std::vector<ClusterHubState> states;  // every cluster (not in ToJson), sorted by key

  bool done() const { return synced == clusters; }
  Json ToJson() const;
};

// Computes progress from listed objects (any order).
FleetProgress ComputeProgress(const std::vector<Json>& cluster_deployments,
                              const std::vector<Json>& syncsets,
                              const std::vector<Json>& selector_syncsets,
                              const std::vector<Json>& cluster_syncs);

// The applicable sets of one cluster (`cluster_deployment`) with their status entries.
// `skip_reason` gets the reason the cluster is skipped, if it is.
std::vector<SetState> DescribeSets(const Json& cluster_deployment,
                                   const std::vector<Json>& syncsets,
                                   const std::vector<Json>& selector_syncsets,
                                   const Json* cluster_sync, std::string* skip_reason);

// Lists the four collections (optionally one namespace) from the hub and computes progress.
Result<FleetProgress> ReadProgress(kube::Client& hub, const std::string& ns);

}  // namespace syncbus::ctl
