// SyncReport: of a cluster's ClusterSync, only what the publisher's decisions read
// (sync_decision.h, cluster_decision.h, rollout_decision.h): per set entry its name, the
// generation it reports, its result and the start of a failure's message; whether the Failed
// condition says what the entries call for; whether status.firstSuccessTime is still to be set.
// The hub cache keeps one per cluster in place of the ClusterSync (at 100,000 clusters every byte
// kept per cluster is 100 kB), in the cluster's entry: the entries live in one immutable block,
// shared by the copies (a snapshot's, under the cache's lock, copies a pointer), so a report is
// 24 bytes and one allocation. A value; thread-compatible, and copies may be read from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "common/hive/desired_state.h"
#include "common/hive/types.h"

namespace syncbus::publisher {

// A failing entry's message, held out of line: an entry that succeeds (nearly all of them) pays a
// pointer for it, not a std::string. A value: copies copy the text.
class FailureMessage {
 public:
  FailureMessage() = default;
  // NOLINTNEXTLINE(google-explicit-constructor,hicpp-explicit-conversions): stands in for a string
  FailureMessage(std::string_view text);
  // NOLINTNEXTLINE(google-explicit-constructor,hicpp-explicit-conversions): as the one above
  FailureMessage(const char* text) : FailureMessage(std::string_view(text)) {}
  FailureMessage(const FailureMessage& other) : FailureMessage(other.view()) {}
  FailureMessage& operator=(const FailureMessage& other);
  FailureMessage(FailureMessage&&) noexcept = default;
  FailureMessage& operator=(FailureMessage&&) noexcept = default;
  ~FailureMessage() = default;

  std::string_view view() const { return text_ ? std::string_view(*text_) : std::string_view(); }
  bool empty() const { return !text_; }
  friend bool operator==(const FailureMessage& a, std::string_view b) { return a.view() == b; }

 private:
  std::unique_ptr<const std::string> text_;  // null for ""
};

// One entry of status.syncSets or status.selectorSyncSets.
struct ReportedSet {
  hive::SetKind kind = hive::SetKind::kSyncSet;
  hive::SyncResult result = hive::SyncResult::kSuccess;
  int64_t observed_generation = 0;
  std::string name;
  // A failing entry's message, its first kFailureMessageKept bytes (a rollout's halt says it,
  // rollout_keeper.h); "" for a successful one.
  FailureMessage failure_message;
};

class SyncReport {
 public:
  static constexpr size_t kFailureMessageKept = 256;

  // The entries, SyncSets' first, each list in the ClusterSync's order.
  std::span<const ReportedSet> sets() const { return {entries_.get(), count_}; }
  // The first condition is the Failed condition the entries call for
  // (hive::FailedConditionCurrent).
  bool condition_current() const { return condition_current_; }
  // status.firstSuccessTime is unset and every entry has its own (or there is none): it is due
  // once the cluster is installed (hive::FirstSuccessDue).
  bool first_success_pending() const { return first_success_pending_; }

  static SyncReport Of(const hive::ClusterSync& cluster_sync);
  // The entry of set `name` of `kind` (the first, as Hive reads it); null when none.
  const ReportedSet* Find(hive::SetKind kind, const std::string& name) const;

 private:
  // The first entry; the block holds them all (see Of()).
  std::shared_ptr<const ReportedSet> entries_;
  uint32_t count_ = 0;
  bool condition_current_ = false;
  bool first_success_pending_ = false;
};

}  // namespace syncbus::publisher
