// Dead-letter queue operations behind `syncbusctl dlq`: describe parked messages (cluster,
// reason, attempts, first failure, last error, age), filter them, and list, replay or purge the
// matches in one pass over the queue with basic.get. Replay republishes to the work exchange on
// the message's lane with its attempt history reset and acks the dead copy only after the
// broker confirmed the new one, so an interrupted replay loses nothing (a re-run may replay a
// trigger twice, which costs one cheap up-to-date check). Messages not acted on are requeued.
// Pure functions plus ScanDeadLetters over a caller-owned Session; thread-compatible.
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
  std::string cluster;          // "ns/name"; "" when the message does not say
  std::string lane;             // "change" or "resync": where a replay goes
  std::string reason;           // max-attempts, undecodable, delivery_limit (poison), unknown
  int attempts = 0;
  std::string first_failure;    // RFC 3339, "" when unknown
  std::string last_error;
  std::optional<WallTime> dead_at;
  std::string message_id;

  // Age in seconds is null when the parking time is unknown.
  Json ToJson(WallTime now) const;
};

DeadLetter DescribeDeadLetter(const amqp::Delivery& delivery);

struct DeadLetterFilter {
  std::string cluster;   // "ns/name" exactly, or a bare name matching any namespace
  std::string reason;
  std::optional<std::chrono::milliseconds> older_than;   // parked at least this long ago
  std::optional<std::chrono::milliseconds> newer_than;   // parked less than this long ago

  bool Matches(const DeadLetter& letter, WallTime now) const;
};

// The replayed copy: same body and properties, to the work exchange on the message's lane,
// attempt 0 and no failure history (x-syncbus-* retry/dead headers and x-death removed).
amqp::Publication ReplayPublication(const amqp::Delivery& delivery);

enum class DlqAction { kList, kReplay, kPurge };

struct DlqProgress {
  size_t scanned = 0;    // messages looked at
  size_t total = 0;      // messages in the queue when the scan started (or seen, if more)
  size_t matched = 0;
  size_t done = 0;       // replayed or purged
};

struct DlqScanOptions {
  DlqAction action = DlqAction::kList;
  DeadLetterFilter filter;
  bool dry_run = false;                  // replay/purge: report the matches, change nothing
  double rate_per_second = 0;            // replay: publishes per second; 0 = unlimited
  size_t limit = 0;                      // act on at most this many matches; 0 = all
  std::chrono::milliseconds confirm_timeout{30000};
  // Record each replay on the trace stream. Only when syncbus.trace exists: publishing to a
  // missing exchange closes the channel, which would requeue the scan's messages.
  bool trace_replays = false;
  std::function<void(std::chrono::milliseconds)> sleep;      // rate limit; null = real sleep
  std::function<void(const DlqProgress&)> progress;          // called after each message
};

struct DlqResult {
  std::vector<DeadLetter> matched;
  DlqProgress progress;
  Status error;   // the pass stopped early (broker error); what was done stays done
};

// One pass over the dead-letter queue: every message it holds (each seen once).
// Fails only when the queue cannot be inspected at all.
Result<DlqResult> ScanDeadLetters(amqp::Session& session, const DlqScanOptions& options, const Clock& clock);

// The listing as an aligned text table (CLUSTER LANE REASON ATTEMPTS FIRST-FAILURE AGE
// LAST-ERROR); wide adds PARKED-AT and MESSAGE-ID before LAST-ERROR.
std::string FormatDeadLetterTable(const std::vector<DeadLetter>& letters, WallTime now, bool wide = false);

}  // namespace syncbus::ctl
