// Whether a cluster needs a sync request, and why: its desired state compared with what its
// ClusterSync reports (sync_report.h), and whether its periodic full reapply is due
// (ClusterSyncLease renewTime
// + interval + a jitter that is stable per cluster, so a due reapply is never skipped by a
// re-drawn jitter). Pure functions; thread-compatible.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "common/bus/sync_reason.h"
#include "common/clock.h"
#include "common/hive/desired_state.h"
#include "common/hive/types.h"
#include "publisher/sync_report.h"

namespace syncbus::publisher {

using hive::DesiredSet;
using hive::DesiredState;
using hive::SetKind;

enum class NeedKind {
  kNone,     // in sync (or skipped): nothing to send
  kChange,   // a set is new, changed, or removed: change lane
  kFailed,   // everything processed but some set failed: the consumer's retries own it
  kReapply,  // periodic full reapply due: resync lane, full_reapply
};

struct SyncNeed {
  NeedKind kind = NeedKind::kNone;
  // Why a request is needed; none for kNone (in sync, or skipped: DesiredState::skip_reason).
  std::optional<SyncReason> reason;
};

struct ReapplyPolicy {
  std::chrono::milliseconds interval{std::chrono::hours(2)};
  double jitter = 0.1;  // fraction of the interval
};

// A ClusterSyncLease's renewTime as the decision reads it: none when absent or not a time.
std::optional<WallTime> LeaseRenewal(const hive::ClusterSyncLease& lease);

// The cluster's reapply offset in [0, jitter * interval), derived from its identity.
std::chrono::milliseconds ReapplyJitter(const std::string& cluster_key,
                                        const ReapplyPolicy& policy);
// When the next full reapply is due; nullopt when never applied (due now).
std::optional<WallTime> ReapplyDueAt(const std::string& cluster_key,
                                     std::optional<WallTime> lease_renewal,
                                     const ReapplyPolicy& policy);

SyncNeed DecideSync(const DesiredState& desired, const SyncReport* status,
                    std::optional<WallTime> lease_renewal, WallTime now,
                    const ReapplyPolicy& policy);

// Whether a cluster's request must be a full reapply: its reapply is due (or it never had one: no
// lease), so the consumer renews the lease in the same pass.
bool FullReapplyDue(const std::string& cluster_key, std::optional<WallTime> lease_renewal,
                    WallTime now, const ReapplyPolicy& policy);

// Whether a request published for `snapshot` has been processed according to `status`: the
// ClusterSync exists, every set of the snapshot reported at (at least) its generation and no
// entry for a set outside it.
bool SnapshotProcessed(const DesiredState& snapshot, const SyncReport* status);

}  // namespace syncbus::publisher
