#include "publisher/sync_ledger.h"

#include <algorithm>

namespace syncbus::publisher {

std::string_view ClusterStateName(ClusterState state) {
  switch (state) {
    case ClusterState::kInSync: return "in_sync";
    case ClusterState::kPending: return "pending";
    case ClusterState::kFailing: return "failing";
    case ClusterState::kPaused: return "paused";
    case ClusterState::kSkipped: return "skipped";
  }
  return "unknown";
}

std::vector<std::string> SyncLedger::TakeDue(WallTime now, SteadyTime steady,
                                             std::chrono::milliseconds timeout) {
  std::vector<std::string> due;
  while (!reapply_queue_.empty() && reapply_queue_.begin()->at <= now) {
    auto it = records_.find(*reapply_queue_.begin()->key);
    due.push_back(it->first);
    Unschedule(it);
    EraseIfEmpty(it);
  }
  // A later publish times out later: until the earliest timeout seen at the last scan, none is
  // due, and the requests need not be looked at (a round runs as often as clusters change).
  if (first_published_.empty() || (timeout == scanned_timeout_ && steady < next_timeout_))
    return due;
  next_timeout_ = SteadyTime::max();
  scanned_timeout_ = timeout;
  for (const auto& [key, record] : records_) {
    if (!record.outstanding) continue;
    const SteadyTime published_at = record.outstanding->published_at;
    if (steady - published_at >= timeout) due.push_back(key);
    next_timeout_ = std::min(next_timeout_, published_at + timeout);
  }
  return due;
}

void SyncLedger::Unschedule(Records::iterator it) {
  if (it->second.reapply_due == WallTime::min()) return;
  reapply_queue_.erase({it->second.reapply_due, &it->first});
  it->second.reapply_due = WallTime::min();
}

void SyncLedger::EraseIfEmpty(Records::iterator it) {
  if (it->second.empty()) records_.erase(it);
}

void SyncLedger::ScheduleReapply(const std::string& key, std::optional<WallTime> due) {
  if (!due) {
    if (auto it = records_.find(key); it != records_.end()) {
      Unschedule(it);
      EraseIfEmpty(it);
    }
    return;
  }
  auto it = records_.try_emplace(key).first;
  Unschedule(it);
  it->second.reapply_due = *due;
  reapply_queue_.insert({*due, &it->first});
}

SyncLedger::PendingMarks SyncLedger::TakePending(const std::string& key) {
  pending_.erase(key);
  PendingMarks marks;
  marks.startup = startup_pending_.erase(key) > 0;
  marks.bulk = bulk_pending_.erase(key) > 0;
  return marks;
}

void SyncLedger::KeepPending(const std::string& key, PendingMarks marks) {
  pending_.insert(key);
  if (marks.startup) startup_pending_.insert(key);
  if (marks.bulk) bulk_pending_.insert(key);
}

const OutstandingRequest* SyncLedger::outstanding(const std::string& key) const {
  auto it = records_.find(key);
  return it == records_.end() ? nullptr : it->second.outstanding.get();
}

SteadyTime SyncLedger::OldestFirstPublished(SteadyTime now) const {
  return first_published_.empty() ? now : std::min(now, *first_published_.begin());
}

void SyncLedger::UnlistFirstPublished(const OutstandingRequest& request) {
  first_published_.erase(first_published_.find(request.first_published));
}

void SyncLedger::EraseOutstanding(ClusterRecord& record) {
  if (!record.outstanding) return;
  UnlistFirstPublished(*record.outstanding);
  record.outstanding.reset();
}

void SyncLedger::PutOutstanding(Records::iterator it, OutstandingRequest request) {
  request.snapshot.cluster_key = {};  // the ledger's key says it
  // Published now, it times out after every request TakeDue last looked at: next_timeout_ holds.
  first_published_.insert(request.first_published);
  std::unique_ptr<OutstandingRequest>& outstanding = it->second.outstanding;
  if (!outstanding) {
    outstanding = std::make_unique<OutstandingRequest>(std::move(request));
    return;
  }
  UnlistFirstPublished(*outstanding);
  *outstanding = std::move(request);  // the record's block is reused
}

void SyncLedger::DropOutstanding(const std::string& key) {
  if (auto it = records_.find(key); it != records_.end()) {
    EraseOutstanding(it->second);
    EraseIfEmpty(it);
  }
}

void SyncLedger::MarkProcessed(const std::string& key) {
  auto it = records_.find(key);
  if (it == records_.end() || !it->second.outstanding) return;
  ClusterRecord& record = it->second;
  if (record.outstanding->full_reapply) {
    record.secrets_applied = std::move(record.outstanding->secrets);
    record.secrets_known = true;
  }
  EraseOutstanding(record);
}

SyncLedger::Recorded SyncLedger::RecordConfirmed(const std::string& key, ConfirmedRequest request) {
  auto it = records_.try_emplace(key).first;
  it->second.last_published = request.confirmed_at;
  if (request.overtaken) {
    // The overtaken resync still does its full reapply: the entry keeps its obligations.
    const OutstandingRequest& resync = *request.overtaken;
    PutOutstanding(it,
                   {std::move(request.snapshot), std::move(request.secrets), request.confirmed_at,
                    resync.full_reapply ? resync.published_wall : request.sent_wall,
                    resync.full_reapply || request.full_reapply, resync.first_published,
                    /*resync_queued=*/true,
                    /*promoted=*/true});
    return Recorded::kPromoted;
  }
  const OutstandingRequest* previous = it->second.outstanding.get();
  const bool resend = previous != nullptr;
  const SteadyTime first_published = resend ? previous->first_published : request.confirmed_at;
  PutOutstanding(it, {std::move(request.snapshot), std::move(request.secrets), request.confirmed_at,
                      request.sent_wall, request.full_reapply, first_published,
                      /*resync_queued=*/request.lane == amqp::Lane::kResync,
                      /*promoted=*/false});
  return resend ? Recorded::kResent : Recorded::kFirst;
}

std::optional<SteadyTime> SyncLedger::last_published(const std::string& key) const {
  auto it = records_.find(key);
  if (it == records_.end() || it->second.last_published == SteadyTime::min()) return std::nullopt;
  return it->second.last_published;
}

const hive::SecretVersions* SyncLedger::applied_secrets(const std::string& key) const {
  auto it = records_.find(key);
  return it == records_.end() || !it->second.secrets_known ? nullptr : &it->second.secrets_applied;
}

const hive::SecretVersions& SyncLedger::AssumeAppliedSecrets(const std::string& key,
                                                             hive::SecretVersions assumed) {
  ClusterRecord& record = records_[key];
  if (!record.secrets_known) {
    record.secrets_applied = std::move(assumed);
    record.secrets_known = true;
  }
  return record.secrets_applied;
}

void SyncLedger::SetState(const std::string& key, ClusterState state) {
  std::optional<ClusterState>& recorded = records_[key].state;
  if (recorded) --state_counts_[static_cast<size_t>(*recorded)];
  recorded = state;
  ++state_counts_[static_cast<size_t>(state)];
}

void SyncLedger::Forget(const std::string& key) {
  if (auto it = records_.find(key); it != records_.end()) {
    EraseOutstanding(it->second);
    Unschedule(it);
    if (it->second.state) --state_counts_[static_cast<size_t>(*it->second.state)];
    records_.erase(it);
  }
}

void SyncLedger::Clear() {
  first_published_.clear();
  next_timeout_ = SteadyTime::min();
  pending_.clear();
  startup_pending_.clear();
  bulk_pending_.clear();
  reapply_queue_.clear();
  records_.clear();
  state_counts_ = {};
}

}  // namespace syncbus::publisher
