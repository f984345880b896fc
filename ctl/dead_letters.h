// Dead-letter queue operations behind `syncbusctl dlq`: describe parked messages (cluster,
// reason, attempts, first failure, last error, age), filter them, list the matches from the
// dead-letter index (dead_letter_index.h: the queue itself is never touched by a listing), and
// replay or purge them in one pass over the queue with basic.get. Replay republishes to the work
// exchange on the message's lane with its attempt history reset and acks the dead copy only after
// the broker confirmed the new one, so an interrupted replay loses nothing (a re-run may replay a
// trigger twice, which costs one cheap up-to-date check); each copy taken out is recorded in the
// index. A cluster that kept failing is parked once per episode (the publisher sends it again
// after outstandingTimeout): a replay republishes one copy per cluster and lane, the newest, and
// removes the older ones, since each is only a trigger of the same sync. Listings group the copies
// by cluster and reason. Messages not acted on are requeued (the queue's delivery limit is never
// reached, see common/bus/topology.h). Reindex rebuilds the index from the queue. Pure functions
// plus the passes over a caller-owned Session; thread-compatible.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/amqp/session.h"
#include "common/clock.h"
#include "common/json.h"
#include "common/status.h"

namespace syncbus::ctl {

struct DeadLetter {
  uint64_t delivery_tag = 0;
  std::string cluster;  // "ns/name"; "" when the message does not say
  std::string lane;     // "change" or "resync": where a replay goes
  std::string reason;   // max-attempts, undecodable, delivery_limit (poison), unknown
  int attempts = 0;
  std::string first_failure;  // RFC 3339, "" when unknown
  std::string last_error;
  std::optional<WallTime> dead_at;
  std::string message_id;
  bool by_broker = false;  // parked by the broker's own delivery limit (x-death), not by syncbus
  int unsettled = 0;       // delivery_limit: deliveries that ended with the consumer gone
  // Of those, forwards the consumer they were forwarded to died holding (RabbitMQ 4.0 counts
  // each twice in `unsettled`: docs/operations.md, "Messages in the dead-letter queue").
  int returns_from_consumers = 0;
  bool full_reapply = false;  // the request's fullReapply
  amqp::Message message;      // the parked copy, for --json

  // The copies a replay runs once: cluster, lane and fullReapply; "" for a message without a
  // cluster (undecodable), which is never merged with another.
  std::string ReplayKey() const;

  // Age in seconds is null when the parking time is unknown; `with_message` adds the copy's
  // headers and body.
  Json ToJson(WallTime now, bool with_message = false) const;
};

DeadLetter DescribeDeadLetter(const amqp::Delivery& delivery);

struct DeadLetterFilter {
  std::string cluster;  // "ns/name" exactly, or a bare name matching any namespace
  std::string reason;
  std::optional<std::chrono::milliseconds> older_than;  // parked at least this long ago
  std::optional<std::chrono::milliseconds> newer_than;  // parked less than this long ago

  bool Matches(const DeadLetter& letter, WallTime now) const;
};

// The replayed copy: same body and properties, to the work exchange on the message's lane,
// attempt 0 and no failure history (x-syncbus-* retry/dead headers and x-death removed).
amqp::Publication ReplayPublication(const amqp::Delivery& delivery);

enum class DlqAction { kList, kReplay, kPurge, kReindex };

struct DlqProgress {
  size_t scanned = 0;  // messages looked at
  size_t total = 0;    // messages in the queue when the scan started (or seen, if more)
  size_t matched = 0;
  size_t done = 0;       // replayed or purged
  size_t coalesced = 0;  // replay: older copies removed, their cluster's newest copy replayed
};

// A listing from the dead-letter index, and what the queue itself holds now.
struct DlqListing {
  std::vector<DeadLetter> matched;      // in the order they were parked
  size_t listed = 0;                    // copies the index lists (matching or not)
  std::optional<uint32_t> queue_depth;  // ready messages in syncbus.dead (passive declare)
  bool trimmed = false;                 // see DeadLetterIndex::trimmed

  // One line for people when the index and the queue disagree; "" when they agree.
  std::string Discrepancy() const;
};

// The matches (at most `limit`, 0 = all) as the index lists them. Changes nothing in
// syncbus.dead. kNotFound when the index does not exist.
Result<DlqListing> ListDeadLetters(amqp::Session& session, const DeadLetterFilter& filter,
                                   size_t limit, const Clock& clock,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(60));

struct DlqScanOptions {
  DlqAction action = DlqAction::kReplay;  // kReplay or kPurge
  DeadLetterFilter filter;
  double rate_per_second = 0;  // replay: publishes per second; 0 = unlimited
  size_t limit = 0;            // act on at most this many matches; 0 = all
  std::chrono::milliseconds confirm_timeout{30000};
  // Record each replay on the trace stream, and each copy taken out in the dead-letter index.
  // Only when the stream exists: publishing to a missing exchange closes the channel, which would
  // requeue the scan's messages.
  bool trace_replays = false;
  bool record_removals = false;
  std::function<void(std::chrono::milliseconds)> sleep;  // rate limit; null = real sleep
  std::function<void(const DlqProgress&)> progress;      // called after each message
};

struct DlqResult {
  std::vector<DeadLetter> matched;
  DlqProgress progress;
  Status error;  // the pass stopped early (broker error); what was done stays done
};

// One pass over the dead-letter queue, replaying or purging the matches: every message it holds
// is seen once. A replay holds the newest matching copy of each ReplayKey unacked until the end of
// the pass and replays it then; an older copy is removed as soon as a newer one is met (counted in
// `coalesced`), so an interrupted pass leaves at least the newest copy parked. Fails only when the
// queue cannot be inspected at all.
Result<DlqResult> ScanDeadLetters(amqp::Session& session, const DlqScanOptions& options,
                                  const Clock& clock);

// Rebuilds the index: voids it (a reset record), then moves every message of syncbus.dead, in
// order, to the back of the queue through the exchange syncbus.dead (confirmed before the old copy
// is acked), which indexes each again. For messages parked before the index existed, or an index
// that no longer agrees with the queue. Run it while no replay or purge runs: what another
// command holds unacked at the time is not moved (run it again after).
Result<DlqResult> ReindexDeadLetters(
    amqp::Session& session, std::chrono::milliseconds confirm_timeout,
    const std::function<void(const DlqProgress&)>& progress = nullptr);

// The copies of one cluster parked for one reason (a message without a cluster is a group of
// its own), in the order the first of each was parked.
struct DeadLetterGroup {
  std::string cluster;  // "" when the messages do not say
  std::string reason;
  std::vector<const DeadLetter*> copies;  // oldest first
  const DeadLetter& newest() const { return *copies.back(); }
};
std::vector<DeadLetterGroup> GroupDeadLetters(const std::vector<DeadLetter>& letters);

// The listing as an aligned text table, one row per cluster and reason (CLUSTER REASON COPIES
// ATTEMPTS FIRST-FAILURE OLDEST NEWEST LAST-ERROR: the newest copy's attempts and error, the
// earliest first failure, the ages of the oldest and the newest copy), then a line counting the
// copies and clusters by reason. Wide lists every copy instead (CLUSTER LANE REASON ATTEMPTS
// FIRST-FAILURE AGE PARKED-AT MESSAGE-ID LAST-ERROR), then the same line.
std::string FormatDeadLetterTable(const std::vector<DeadLetter>& letters, WallTime now,
                                  bool wide = false);

}  // namespace syncbus::ctl
