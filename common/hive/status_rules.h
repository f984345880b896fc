// Hive's rules for what a ClusterSync status says beyond its entries (clustersync_controller.go
// setFailedCondition, setFirstSuccessTime): the Failed condition's status, reason and message, and
// when status.firstSuccessTime is due. Shared by the consumer, which writes them, and the
// publisher, which asks for a sync when a status does not say what it must. Pure functions.
#pragma once

#include <string>
#include <vector>

#include "common/hive/types.h"

namespace syncbus::hive {

inline constexpr size_t kMaxFailureMessageBytes = 1024;

// Cuts `message` to at most `max_bytes` (UTF-8 safe), marking the cut.
std::string TruncateMessage(const std::string& message, size_t max_bytes = kMaxFailureMessageBytes);

// Hive's message of the Failed condition: "All SyncSets and SelectorSyncSets have been applied to
// the cluster", or e.g. "SyncSets a, b and SelectorSyncSet c are failing" (truncated).
std::string FailedConditionMessage(const std::vector<std::string>& failing_sync_sets,
                                   const std::vector<std::string>& failing_selector_sync_sets);

// The Failed condition the entries of `status` call for (no times).
Condition ExpectedFailedCondition(const ClusterSyncStatus& status);

// The status's first condition is that one (Hive looks at the first only).
bool FailedConditionCurrent(const ClusterSyncStatus& status);

// status.firstSuccessTime must be set now: unset, the cluster is installed (installedTimestamp),
// and every entry has its firstSuccessTime (or there is none).
bool FirstSuccessDue(const ClusterSyncStatus& status, bool installed);

}  // namespace syncbus::hive
