// Hive objects as tests write them: the status Hive's controllers give a running cluster (Hive's
// clustersync syncs no other: installed, and its Unreachable condition present and False), and a
// CustomResourceDefinition with an open schema. Pure functions, and one hub write.
#pragma once

#include <string>
#include <vector>

#include "common/hive/types.h"
#include "common/json.h"
#include "common/kube/client.h"

namespace syncbus::testing {

// A ClusterDeployment's status once installed and reachable: installedTimestamp, and
// `conditions` followed by Unreachable=False.
Json RunningClusterStatus(Json conditions = Json::array());

// The Failed condition of a ClusterSync whose sets all succeeded, as Hive writes it, its times
// `time`.
Json SucceededCondition(const std::string& time);

// A ClusterSync's status entry of set `name`: its observedGeneration and result.
hive::SyncStatus SyncStatusEntry(const std::string& name, int64_t generation,
                                 hive::SyncResult result = hive::SyncResult::kSuccess);

// Writes RunningClusterStatus() through the ClusterDeployment's status subresource (REQUIREs it).
void MarkClusterRunning(kube::Client& hub, const std::string& ns, const std::string& name);

// A CRD of `kind` (`plural`) in `group`, served at `versions` (the last one stored), whose
// schema accepts anything.
Json OpenCrd(const std::string& group, const std::string& kind, const std::string& plural,
             bool namespaced = true, const std::vector<std::string>& versions = {"v1"});

}  // namespace syncbus::testing
