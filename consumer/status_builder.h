// Builds a cluster's new ClusterSync status from its previous status and this round's results,
// with upstream Hive's rules (clustersync_controller.go applySyncSets, setFailedCondition,
// setFirstSuccessTime): one entry per applicable set, in the order Hive writes them (the entries
// of removed sets whose deletions failed first, then the sets by name); an entry's
// lastTransitionTime moves whenever anything in it changes; firstSuccessTime is set once;
// resourcesToDelete is sorted by apiVersion, kind, namespace, name; the `Failed` condition names
// the failing sets in Hive's words and is rewritten only when its status, reason or message
// changes; status.firstSuccessTime is the latest of the sets' once every set has one (now when the
// cluster has no set), and only for an installed cluster. Failure messages are truncated so the
// object stays far below etcd's size limit. Pure functions; thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/hive/desired_state.h"
#include "common/hive/status_rules.h"
#include "common/hive/types.h"

namespace syncbus::consumer {

using hive::kMaxFailureMessageBytes;
using hive::SetKind;
using hive::TruncateMessage;

// One entry's round: an applicable set, or a set that no longer applies but had an entry.
struct SetOutcome {
  SetKind kind = SetKind::kSyncSet;
  std::string name;
  int64_t generation = 0;
  bool applied = false;  // false: keep the previous entry as it is
  bool success = false;
  std::string failure_message;
  bool sync_mode = false;
  // Sync mode: what resourcesToDelete holds now (any order; sorted when written).
  std::vector<hive::SyncResourceReference> resources_to_delete;
  // No longer applicable; `applied` means deleting its tracked objects was attempted this round.
  // The entry is dropped once that succeeded, kept (Failure) while it fails.
  bool removed = false;
};

struct BuiltStatus {
  hive::ClusterSyncStatus status;
  // Indexes into the outcomes of the sets that succeeded for the first time this round.
  std::vector<size_t> first_successes;
  // Set when status.firstSuccessTime was set this round.
  std::optional<WallTime> cluster_first_success;
};

// `outcomes`: per kind in Hive's order (removed sets' entries, then the applicable sets by name).
// `installed_timestamp`: the ClusterDeployment's status.installedTimestamp ("" when unset).
BuiltStatus BuildStatus(const hive::ClusterSyncStatus& previous,
                        const std::vector<SetOutcome>& outcomes, WallTime now,
                        const std::string& installed_timestamp);

}  // namespace syncbus::consumer
