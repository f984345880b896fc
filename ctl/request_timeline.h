// A cluster's requests as `syncbusctl trace` shows them (one line per step, with its time and
// duration), and where its newest request is now: queued on a lane, in flight on a consumer,
// waiting in a retry tier, parked in the dead-letter queue, or nowhere (settled). Pure functions
// over trace events (trace_event.h) and dead letters; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "common/bus/trace_event.h"
#include "common/clock.h"
#include "common/json.h"
#include "ctl/dead_letters.h"

namespace syncbus::ctl {

struct RequestPosition {
  enum class Where { kUnknown, kNone, kQueued, kInFlight, kRetrying, kParked };
  Where where = Where::kUnknown;  // kUnknown: no trace event and nothing parked
  std::string request;            // message id of the newest request
  std::string queue;              // kQueued, kRetrying, kParked: the queue holding it
  std::string consumer;           // kInFlight: who holds it
  std::string tier;               // kRetrying
  std::string detail;             // last outcome, parking reason, last error
  WallTime since{};               // when it got there
  int attempt = 0;

  Json ToJson(WallTime now) const;
  std::string Describe(WallTime now) const;  // one line for people
};
const char* WhereName(
    RequestPosition::Where where);  // unknown, none, queued, in-flight, retrying, parked

// `events`: the cluster's events in recording order; `parked`: its messages in syncbus.dead, as
// the dead-letter index lists them (authoritative: a request the broker parked on its delivery
// limit has no settled event).
RequestPosition LocateRequest(const std::vector<TraceEvent>& events,
                              const std::vector<DeadLetter>& parked);

// The timeline table: TIME REQUEST STEP TOOK DETAIL, oldest first; wide: TIME CLUSTER REQUEST
// (the full message id) STEP TOOK DETAIL.
std::string FormatTimeline(const std::vector<TraceEvent>& events, bool wide = false);
// {"events": [...], "position": {...}} with each event as recorded.
Json TimelineJson(const std::vector<TraceEvent>& events, const RequestPosition& position,
                  WallTime now);

}  // namespace syncbus::ctl
