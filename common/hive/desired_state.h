// Desired state of one cluster: which SyncSets and SelectorSyncSets apply to it (at which
// generation), whether syncing is skipped, and a stable revision digest summarising it.
// Pure functions over hive types; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/hive/types.h"

namespace syncbus::hive {

enum class SetKind { kSyncSet, kSelectorSyncSet };

struct DesiredSet {
  SetKind kind;
  std::string name;
  int64_t generation = 0;
  bool operator==(const DesiredSet&) const = default;
};

struct DesiredState {
  std::string cluster_key;       // "namespace/name"
  std::vector<DesiredSet> sets;  // SyncSets then SelectorSyncSets, each by name
  // Sets a rollout holds back from the cluster (common/bus/rollout_release.h): whatever its
  // ClusterSync says of them stays as it is, and nothing is expected of them.
  std::vector<DesiredSet> held;
  std::string skip_reason;  // non-empty: ClusterDeployment::SkipReason()
  bool installed = false;   // status.installedTimestamp is set (ClusterSync firstSuccessTime rule)
  std::string revision;     // digest of cluster identity + sets (+ secret versions)
};

// Secret versions that the sets' secretMappings read ("ns/name" -> resourceVersion); a changed
// source Secret changes the revision.
using SecretVersions = std::vector<std::pair<std::string, std::string>>;

// `syncsets`: the SyncSets of the cluster's namespace (those not referencing it are ignored);
// `selector_syncsets`: all SelectorSyncSets (those not matching its labels are ignored);
// `held`: the sets a rollout holds back from the cluster (left out of the other two).
DesiredState ComputeDesired(const hive::ClusterDeployment& cd,
                            const std::vector<const hive::SyncSet*>& syncsets,
                            const std::vector<const hive::SelectorSyncSet*>& selector_syncsets,
                            const SecretVersions& secrets = {}, std::vector<DesiredSet> held = {});

bool AppliesTo(const hive::SyncSet& ss, const hive::ClusterDeployment& cd);
bool AppliesTo(const hive::SelectorSyncSet& sss, const hive::ClusterDeployment& cd);

}  // namespace syncbus::hive
