#include "publisher/sync_decision.h"

#include <algorithm>

#include "common/digest.h"
#include "common/time_format.h"

namespace syncbus::publisher {
namespace {

// An entry of a set that neither applies nor is held back by a rollout (whose entry stays as it
// is).
bool HasEntryOutside(const DesiredState& desired, const SyncReport& report) {
  for (const auto& e : report.sets()) {
    auto named = [&](const DesiredSet& s) { return s.kind == e.kind && s.name == e.name; };
    bool found = std::any_of(desired.sets.begin(), desired.sets.end(), named) ||
                 std::any_of(desired.held.begin(), desired.held.end(), named);
    if (!found) return true;
  }
  return false;
}

}  // namespace

std::optional<WallTime> LeaseRenewal(const hive::ClusterSyncLease& lease) {
  auto renewed = ParseRfc3339(lease.renew_time);
  return renewed.ok() ? std::optional<WallTime>(*renewed) : std::nullopt;
}

std::chrono::milliseconds ReapplyJitter(const std::string& cluster_key,
                                        const ReapplyPolicy& policy) {
  double span = policy.jitter * static_cast<double>(policy.interval.count());
  if (span < 1) return std::chrono::milliseconds(0);
  double frac = static_cast<double>(StableHash64("reapply-jitter|" + cluster_key) >> 11) /
                static_cast<double>(1ULL << 53);
  return std::chrono::milliseconds(static_cast<long long>(frac * span));
}

std::optional<WallTime> ReapplyDueAt(const std::string& cluster_key,
                                     std::optional<WallTime> lease_renewal,
                                     const ReapplyPolicy& policy) {
  if (!lease_renewal) return std::nullopt;
  return *lease_renewal + policy.interval + ReapplyJitter(cluster_key, policy);
}

SyncNeed DecideSync(const DesiredState& desired, const SyncReport* status,
                    std::optional<WallTime> lease_renewal, WallTime now,
                    const ReapplyPolicy& policy) {
  if (!desired.skip_reason.empty()) return {NeedKind::kNone, std::nullopt};
  // Hive keeps a ClusterSync (and its lease) for every eligible cluster, with sets or without.
  if (!status) return {NeedKind::kChange, SyncReason::kMissingStatus};
  bool failed = false;
  for (const auto& set : desired.sets) {
    const ReportedSet* e = status->Find(set.kind, set.name);
    if (!e) return {NeedKind::kChange, SyncReason::kMissingStatus};
    if (e->observed_generation != set.generation) {
      return {NeedKind::kChange, SyncReason::kGenerationChanged};
    }
    if (e->result != hive::SyncResult::kSuccess) failed = true;
  }
  if (HasEntryOutside(desired, *status)) return {NeedKind::kChange, SyncReason::kSetRemoved};
  // The condition and firstSuccessTime Hive derives from the entries: a status that does not say
  // what they call for (written by another version, or before the cluster was installed) is
  // brought up to date.
  if (!status->condition_current() || (status->first_success_pending() && desired.installed)) {
    return {NeedKind::kChange, SyncReason::kStatusOutdated};
  }
  if (failed) return {NeedKind::kFailed, SyncReason::kFailed};
  auto due = ReapplyDueAt(desired.cluster_key, lease_renewal, policy);
  if (!due || *due <= now) return {NeedKind::kReapply, SyncReason::kReapplyDue};
  return {NeedKind::kNone, std::nullopt};
}

bool FullReapplyDue(const std::string& cluster_key, std::optional<WallTime> lease_renewal,
                    WallTime now, const ReapplyPolicy& policy) {
  auto due = ReapplyDueAt(cluster_key, lease_renewal, policy);
  return !due || *due <= now;
}

bool SnapshotProcessed(const DesiredState& snapshot, const SyncReport* status) {
  if (!status) return false;
  for (const auto& set : snapshot.sets) {
    const ReportedSet* e = status->Find(set.kind, set.name);
    if (!e || e->observed_generation < set.generation) return false;
  }
  return !HasEntryOutside(snapshot, *status);
}

}  // namespace syncbus::publisher
