// SyncLedger: the publisher's memory between rounds. Per cluster: the request outstanding (what
// it was published for, when, whether it waits on the resync lane or was overtaken by a change),
// the last publish, the source-Secret versions the cluster runs; which clusters wait to be sent
// (pending, and which of those as start-up work or as a bulk edit's change); when each
// cluster's periodic full reapply falls due; and each cluster's state at its last evaluation. It
// records; what to do about a cluster is cluster_decision.h's. Not thread-safe: owned by the
// Publisher, used on its thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/bus/topology.h"
#include "common/clock.h"
#include "common/hive/desired_state.h"

namespace syncbus::publisher {

// A cluster's state at its last evaluation (cluster_decision.h says which).
enum class ClusterState : uint8_t { kInSync, kPending, kFailing, kPaused, kSkipped };
inline constexpr ClusterState kClusterStates[] = {ClusterState::kInSync, ClusterState::kPending,
                                                  ClusterState::kFailing, ClusterState::kPaused,
                                                  ClusterState::kSkipped};
// The metric label and log text: "in_sync", "pending", "failing", "paused", "skipped".
std::string_view ClusterStateName(ClusterState state);

// A published request not yet processed.
struct OutstandingRequest {
  hive::DesiredState snapshot;   // what it was published for (its cluster_key left empty)
  hive::SecretVersions secrets;  // the source Secrets' versions when it was published
  SteadyTime published_at;
  WallTime published_wall;
  bool full_reapply = false;
  SteadyTime first_published;  // kept when the request is re-sent
  // A request of this cluster waits on the resync lane. A change then goes out on the change
  // lane at once ("promoted") instead of waiting behind the resync backlog; the entry keeps the
  // resync's obligations (its full reapply, its publish time) until that is processed too.
  bool resync_queued = false;
  bool promoted = false;  // a change-lane request went out after the queued resync
};

// A request the broker confirmed, as the ledger records it.
struct ConfirmedRequest {
  hive::DesiredState snapshot;
  hive::SecretVersions secrets;
  bool full_reapply = false;
  amqp::Lane lane = amqp::Lane::kChange;
  // The outstanding resync request this change overtook (a promotion), if any.
  std::optional<OutstandingRequest> overtaken;
  SteadyTime confirmed_at;
  WallTime sent_wall;
};

class SyncLedger {
 public:
  // How a confirmed request entered the ledger.
  enum class Recorded { kFirst, kResent, kPromoted };
  // How a pending cluster had waited.
  struct PendingMarks {
    bool startup = false;  // as start-up work
    bool bulk = false;     // as a bulk edit's change
  };

  // The clusters whose reapply fell due by `now` (taken off the schedule), then those whose
  // request has been outstanding for `timeout` or longer.
  std::vector<std::string> TakeDue(WallTime now, SteadyTime steady,
                                   std::chrono::milliseconds timeout);
  // Sets when the cluster's next full reapply is due; nullopt takes it off the schedule.
  void ScheduleReapply(const std::string& key, std::optional<WallTime> due);

  const std::set<std::string>& pending() const { return pending_; }
  // Takes the cluster off the pending sets; says how it waited.
  PendingMarks TakePending(const std::string& key);
  // The cluster waits to be sent (start-up work stays start-up work, a bulk change stays bulk).
  void KeepPending(const std::string& key, PendingMarks marks);

  const OutstandingRequest* outstanding(const std::string& key) const;
  size_t outstanding_count() const { return first_published_.size(); }
  // The first publish of the oldest outstanding request; `now` when there is none.
  SteadyTime OldestFirstPublished(SteadyTime now) const;
  // The cluster's request was processed: forgotten; a full reapply's Secrets are now applied.
  void MarkProcessed(const std::string& key);
  // The cluster needs nothing: whatever was outstanding is forgotten.
  void DropOutstanding(const std::string& key);
  Recorded RecordConfirmed(const std::string& key, ConfirmedRequest request);
  std::optional<SteadyTime> last_published(const std::string& key) const;

  // The source-Secret versions the cluster is known to run, or null when the ledger does not
  // know yet (see AssumeAppliedSecrets).
  const hive::SecretVersions* applied_secrets(const std::string& key) const;
  // Records what a cluster seen for the first time is assumed to run.
  const hive::SecretVersions& AssumeAppliedSecrets(const std::string& key,
                                                   hive::SecretVersions assumed);

  // Records the cluster's state at its evaluation.
  void SetState(const std::string& key, ClusterState state);
  // How many clusters were in `state` at their last evaluation.
  size_t state_count(ClusterState state) const { return state_counts_[static_cast<size_t>(state)]; }

  // Forgets a deleted cluster: its request, last publish, Secrets, reapply schedule and state.
  void Forget(const std::string& key);
  // Forgets everything (leadership lost).
  void Clear();

 private:
  // What the ledger keeps of a cluster: one record per cluster, erased once it holds nothing (at
  // 100,000 clusters, each map keyed by the name costs ~10 MB, so there is one).
  // Packed (56 bytes, where optionals took 80: at 100,000 clusters, 2.4 MB): a time's absence is
  // its min() value, which no clock reads.
  struct ClusterRecord {
    // The request outstanding, out of line: most records have none once the fleet has converged.
    std::unique_ptr<OutstandingRequest> outstanding;
    SteadyTime last_published = SteadyTime::min();  // min(): never published
    WallTime reapply_due = WallTime::min();         // min(): not on the reapply schedule
    // Source-Secret versions applied by the last processed full reapply, or assumed applied;
    // meaningful once secrets_known.
    hive::SecretVersions secrets_applied;
    bool secrets_known = false;
    std::optional<ClusterState> state;
    bool empty() const {
      return !outstanding && last_published == SteadyTime::min() &&
             reapply_due == WallTime::min() && !secrets_known && !state;
    }
  };
  using Records = std::map<std::string, ClusterRecord>;
  // A cluster's place on the reapply schedule: by due time, then by name; `key` points at the
  // name in records_ (a std::map's keys stay put).
  struct Due {
    WallTime at{};
    const std::string* key = nullptr;
    bool operator<(const Due& other) const {
      return at != other.at ? at < other.at : *key < *other.key;
    }
  };
  void PutOutstanding(Records::iterator it, OutstandingRequest request);
  // Takes `request`'s first publish out of first_published_.
  void UnlistFirstPublished(const OutstandingRequest& request);
  // Forgets the record's outstanding request, if any (the record stays, even if empty).
  void EraseOutstanding(ClusterRecord& record);
  // Takes the cluster off the reapply schedule.
  void Unschedule(Records::iterator it);
  void EraseIfEmpty(Records::iterator it);

  Records records_;
  // Of the records' outstanding requests: their first publishes (how many there are, and the
  // oldest). A round runs whenever a cluster changes: it costs O(log n) in the clusters, but
  // TakeDue's look at every record, which waits until an outstanding request may have timed out
  // (1.9 ms at 100,000 records: at most one look per request timing out, 30 min after its publish).
  std::multiset<SteadyTime> first_published_;
  // No request outstanding at TakeDue's last scan times out before this, with that scan's
  // timeout; later ones time out later still.
  SteadyTime next_timeout_ = SteadyTime::min();
  std::chrono::milliseconds scanned_timeout_{0};

  std::set<std::string> pending_;
  std::set<std::string> startup_pending_;  // pending keys left over from a start-up round
  std::set<std::string> bulk_pending_;     // pending keys of a bulk edit
  std::set<Due> reapply_queue_;            // the records with a reapply_due
  std::array<size_t, std::size(kClusterStates)> state_counts_{};  // the records' states
};

}  // namespace syncbus::publisher
