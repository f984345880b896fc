// TraceEvent: one step in the life of a sync request, as the daemons record it on the broker's
// trace stream (syncbus.trace) for `syncbusctl trace` and `status`. The publisher records a
// request it decided on and the broker confirmed; a consumer records each delivery it takes and
// how it settled it; `syncbusctl dlq replay` records a replay. Events of one request share its
// message id. A trace is diagnostics, never state: nothing acts on it, and losing an event only
// thins a timeline. On the stream, events travel in batches, many to a message (one message per
// event made the trace stream a quarter of the broker's work during a 100,000-cluster resync):
// small versioned JSON, decoded strictly (it is read from a queue any broker user could write
// to). Value types and pure functions; thread-compatible.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/amqp/session.h"
#include "common/clock.h"
#include "common/json.h"
#include "common/status.h"

namespace syncbus {

inline constexpr int kTraceEventVersion = 1;  // one event per message (syncbus before batches)
inline constexpr int kTraceBatchVersion = 2;  // {"version":2,"events":[event, ...]}
inline constexpr size_t kMaxTraceEventBytes = 16384;
inline constexpr size_t kMaxTraceSets = 64;
// What a reader accepts in one message, and what a writer puts in one (an event alone larger
// than kTraceBatchBytes still goes, alone).
inline constexpr size_t kMaxTraceMessageBytes = 1 << 20;
inline constexpr size_t kMaxTraceBatchEvents = 2000;
inline constexpr size_t kTraceBatchBytes = size_t{128} * 1024;
inline constexpr size_t kTraceBatchEvents = 500;

enum class TraceStep {
  kPublished,  // publisher: decided (reason), published, confirmed by the broker
  kDelivered,  // consumer: taken from a work queue, about to take the lease and sync
  kSettled,    // consumer: acked, sent to a retry tier, deferred or parked
  kReplayed,   // syncbusctl: republished from the dead-letter queue
};
const char* TraceStepName(TraceStep step);

// How a consumer settled a delivery (kSettled only).
enum class TraceOutcome {
  kNone,
  kApplied,   // sets applied, status stored, acked
  kUpToDate,  // nothing to do (a duplicate or stale trigger), acked
  kSkipped,   // cluster paused, deleting, unreachable or gone, acked
  kRetry,     // failed; sent to retry tier `tier`
  kDeferred,  // could not run now (cluster busy on another consumer, or held back after it ended
              // unsettled before); sent to tier `tier`, no attempt counted
  kParked,    // in the dead-letter queue (`reason`)
};
const char* TraceOutcomeName(TraceOutcome outcome);

// One set the consumer applied (or removed) in a sync.
struct TraceSet {
  std::string kind;  // "SyncSet" or "SelectorSyncSet"
  std::string name;
  int64_t generation = 0;  // 0 for a set removed from the cluster
  int applies = 0;         // objects applied
  bool success = true;
  std::string failure;  // short, secret-free

  bool operator==(const TraceSet&) const = default;
};

struct TraceEvent {
  TraceStep step = TraceStep::kPublished;
  std::string cluster;                    // "namespace/name"
  std::string request;                    // the sync message's message id
  WallTime at{};                          // when the step ended
  std::chrono::milliseconds duration{0};  // how long the step took
  std::string actor;  // who recorded it: publisher or consumer identity, "syncbusctl"

  // kPublished
  std::string reason;  // why: syncset-changed, startup, reapply, ...
  std::string lane;    // change or resync (also kDelivered, kReplayed)
  std::string revision;
  WallTime decided_at{};  // when the publisher enqueued it (request.enqueuedAt)

  // kDelivered and kSettled
  int attempt = 0;  // attempts failed before this delivery
  bool redelivered = false;
  std::chrono::milliseconds queued{0};  // kDelivered: time since the publisher decided

  // kSettled
  TraceOutcome outcome = TraceOutcome::kNone;
  std::string tier;         // kRetry / kDeferred: the delay queue's tier ("30s")
  std::string dead_reason;  // kParked: max-attempts, delivery_limit, ...
  std::string error;        // short, secret-free
  std::chrono::milliseconds prepare{0}, target{0},
      store{0};  // hub reads, target work, status write
  std::vector<TraceSet> sets;

  bool operator==(const TraceEvent&) const = default;
};

// One event alone, as version 1 (the form older syncbus wrote, one per message).
std::string EncodeTraceEvent(const TraceEvent& event);
// Rejects: not a JSON object, over kMaxTraceEventBytes, unsupported version, unknown step or
// outcome, missing or mistyped fields, a cluster that is not "namespace/name" with valid names,
// timestamps that are not RFC 3339, negative durations, more than kMaxTraceSets sets.
Result<TraceEvent> DecodeTraceEvent(std::string_view body);

// The events of one trace stream message: a batch (version 2), or one event (version 1).
struct TraceMessage {
  std::vector<TraceEvent> events;  // in the order recorded
  size_t invalid = 0;              // events of a batch that failed DecodeTraceEvent's checks
};
// Rejects the whole message when it is not a JSON object, is over kMaxTraceMessageBytes, has an
// unsupported version, or a batch's "events" is not an array of at most kMaxTraceBatchEvents;
// an event of a batch that fails the checks is counted and skipped, its neighbours kept.
Result<TraceMessage> DecodeTraceMessage(std::string_view body);

// One message of the trace exchange, holding events [first, end) of what was batched.
struct TraceBatch {
  amqp::Publication publication;
  size_t first = 0;
  size_t end = 0;
};
// `events` in order, in messages of at most `max_events` events and, unless one event alone is
// larger, `max_bytes` of body: JSON, not mandatory (a broker without the trace stream drops it),
// the first event's time as the message timestamp.
std::vector<TraceBatch> TraceBatches(const std::vector<const TraceEvent*>& events,
                                     size_t max_events = kTraceBatchEvents,
                                     size_t max_bytes = kTraceBatchBytes);

}  // namespace syncbus
