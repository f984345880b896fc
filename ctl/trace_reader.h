// Reading the trace stream (syncbus.trace) behind `syncbusctl trace` and `status`: every event
// recorded since a point in time, optionally of one cluster, read without consuming (other
// readers and the retention policy are unaffected). Undecodable events are counted and skipped,
// never trusted; a second copy of an event (its recorder published it again, unconfirmed) is
// skipped. Runs over a caller-owned Session; thread-compatible.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/amqp/session.h"
#include "common/bus/trace_event.h"
#include "common/clock.h"
#include "common/status.h"

namespace syncbus::ctl {

struct TraceQuery {
  WallTime since{};     // events recorded at or after this (second precision)
  std::string cluster;  // "ns/name" exactly, or a bare name in any namespace; "" = all
  // The read ends at the first event recorded after `until`, or when the stream has been quiet
  // this long (it has no end marker).
  WallTime until{};
  std::chrono::milliseconds quiet{1500};
  // --follow: called for each matching event; the read goes on until `keep_going` is false.
  std::function<void(const TraceEvent&)> on_event;
  std::function<bool()> keep_going;
};

struct TraceRead {
  std::vector<TraceEvent> events;  // matching, ordered by their time
  size_t scanned = 0;              // events read from the stream
  size_t undecodable = 0;
};

bool TraceClusterMatches(const std::string& filter, const std::string& cluster);

Result<TraceRead> ReadTrace(amqp::Session& session, const TraceQuery& query);

}  // namespace syncbus::ctl
