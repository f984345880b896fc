// FleetProgress: how far the fleet is from its desired state, read from the hub — the barrier
// behind `syncbusctl wait`: a cluster counts as synced when its ClusterSync reports every
// applicable SyncSet/SelectorSyncSet at the set's current generation with result Success.
// Skipped clusters (paused, deleting, not installed, unreachable) are counted apart. A set rolled
// out in waves (syncbus.io/rollout, common/bus/rollout_release.h) that holds its generation back
// from a cluster leaves the cluster pending ("held by rollout of ..."); a rollout that halted or
// was aborted is reported, since the fleet cannot get there until an operator acts.
// Pure computation plus one blocking read; thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/bus/rollout.h"
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
  bool held =
      false;  // pending because a set's rollout holds its generation back (detail says which)
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
  // Not empty when the set's rollout holds this generation back from the cluster: "held by rollout
  // of SelectorSyncSet fleet-cm, wave 3 (2 of 3 released)".
  std::string held;
};

// A set rolled out in waves, as `wait` and `status` show it.
struct RolloutSummary {
  std::string kind;  // SyncSet, SelectorSyncSet
  std::string ns;    // SyncSet only
  std::string name;
  int64_t generation = 0;  // the set's current generation
  // Progressing, Halted, Aborted, Complete; Starting: no state for this generation yet (the
  // publisher starts it at wave 1). An unreadable syncbus.io/rollout is Halted with its error.
  std::string phase;
  int wave = 0, waves = 0;  // waves 1..wave released, of `waves`
  std::string message;
  std::vector<rollout::FailingCluster> failing;
  size_t clusters = 0;  // eligible clusters it applies to
  size_t held = 0;      // of those, the ones it holds back

  std::string Describe() const;  // "SelectorSyncSet fleet-cm", "SyncSet ns/name"
  std::string Ref() const;       // "selectorsyncset/fleet-cm": as `syncbusctl rollout` takes it
  // Halted or Aborted: the fleet does not get there until an operator resumes it, fixes its
  // annotation, or edits the set.
  bool Stopped() const { return phase == "Halted" || phase == "Aborted"; }
  // "rollout of SelectorSyncSet fleet-cm is Halted at wave 2 of 3: MESSAGE" and a line per failing
  // cluster ("  failing CLUSTER: MESSAGE"), each line ending in a newline.
  std::string StopReport() const;
  Json ToJson() const;
};

struct FleetProgress {
  size_t clusters = 0;  // eligible clusters (total minus skipped)
  size_t synced = 0;
  size_t failing = 0;  // some applicable set reports Failure at its current generation
  size_t pending = 0;
  size_t skipped = 0;
  size_t held = 0;                            // of the pending: held back by a set's rollout
  std::vector<std::string> failing_clusters;  // "ns/name", sorted
  std::vector<std::string> pending_clusters;
  std::vector<ClusterHubState> states;  // every cluster (not in ToJson), sorted by key
  // The rolled-out sets that apply to a cluster of the view, sorted by kind, namespace and name.
  std::vector<RolloutSummary> rollouts;

  bool done() const { return synced == clusters; }
  // The rollouts that stopped (RolloutSummary::Stopped), of sets that apply to an eligible cluster.
  std::vector<const RolloutSummary*> Stopped() const;
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
