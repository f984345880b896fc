// Builds a cluster's new ClusterSync status from its previous status and this round's results,
// with upstream Hive's rules: one entry per applicable set; lastTransitionTime changes only when
// the result changes; firstSuccessTime is set once; the `Failed` condition names the failing
// sets; entries of sets no longer applicable are dropped once their Sync-mode objects are
// deleted; failure messages are truncated so the object stays far below etcd's size limit.
// Pure functions; thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/hive/desired_state.h"
#include "common/hive/types.h"

namespace syncbus::consumer {

using hive::SetKind;

inline constexpr size_t kMaxFailureMessageBytes = 1024;

// One applicable set and, when it was applied this round, how that went.
struct SetOutcome {
  SetKind kind = SetKind::kSyncSet;
  std::string name;
  int64_t generation = 0;
  bool applied = false;                     // false: keep the previous entry as it is
  bool success = false;
  std::string failure_message;
  std::vector<hive::SyncResourceReference> resources_to_delete;   // Sync mode tracking
  // No longer applicable; `applied` means its tracked objects were deleted this round. A
  // removed set's entry is dropped once that succeeded and kept (Failure) while it fails.
  bool removed = false;
};

// Cuts `message` to at most `max_bytes` (UTF-8 safe), marking the cut.
std::string TruncateMessage(const std::string& message, size_t max_bytes = kMaxFailureMessageBytes);

hive::ClusterSyncStatus BuildStatus(const hive::ClusterSyncStatus& previous,
                                    const std::vector<SetOutcome>& sets, WallTime now);

}  // namespace syncbus::consumer
