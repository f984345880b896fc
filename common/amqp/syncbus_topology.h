// The syncbus topology (exchange, queue and binding names and arguments): the one source of
// truth that the daemons declare and that rabbitmq/definitions.json mirrors.
//
//   syncbus.work (direct) --change--> syncbus.work.change (quorum)   served first
//                         --resync--> syncbus.work.resync (quorum)
//   syncbus.retry (headers, x-syncbus-retry-tier=<tier>) --> syncbus.retry.<tier> (TTL = tier)
//       each dead-letters back to syncbus.work with the original routing key (= lane)
//   syncbus.dead (fanout) --> syncbus.dead (quorum, the parking lot); work queues dead-letter
//       here on their delivery limit (poison messages).
//   syncbus.trace (fanout) --> syncbus.trace (stream, bounded by age and size): the requests'
//       timelines (trace_event.h), read without consuming by `syncbusctl trace` and `status`.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/amqp/topology.h"

namespace syncbus::amqp {

inline constexpr char kWorkExchange[] = "syncbus.work";
inline constexpr char kRetryExchange[] = "syncbus.retry";
inline constexpr char kDeadExchange[] = "syncbus.dead";
inline constexpr char kDeadQueue[] = "syncbus.dead";
inline constexpr char kRetryTierHeader[] = "x-syncbus-retry-tier";
inline constexpr char kTraceExchange[] = "syncbus.trace";
inline constexpr char kTraceQueue[] = "syncbus.trace";

enum class Lane { kChange, kResync };
const char* LaneName(Lane lane);                 // "change" / "resync" (also the routing key)
std::string WorkQueueName(Lane lane);            // "syncbus.work.change"

struct TopologyOptions {
  std::vector<std::chrono::seconds> retry_tiers{std::chrono::seconds(5), std::chrono::seconds(30),
                                                std::chrono::minutes(2), std::chrono::minutes(6)};
  int delivery_limit = 5;           // redeliveries before a work message is parked (poison)
  int max_length = 100000;          // per work queue; beyond it publishes are rejected
  // The trace stream keeps events this long and at most this many bytes (whichever ends
  // first; RabbitMQ trims whole segments of trace_segment_bytes).
  std::chrono::seconds trace_max_age{std::chrono::hours(6)};
  int64_t trace_max_bytes = int64_t{1} << 30;
  int64_t trace_segment_bytes = int64_t{16} << 20;
};

// "5s", "30s", "2m", "6m", "1h", "90s" (also the stream's x-max-age syntax).
std::string TierName(std::chrono::seconds delay);
std::string RetryQueueName(std::chrono::seconds delay);   // "syncbus.retry.30s"

Topology SyncbusTopology(const TopologyOptions& options = {});

// The topology in the format of `rabbitmqctl import_definitions` for one vhost.
Json ToDefinitions(const Topology& topology, const std::string& vhost);

}  // namespace syncbus::amqp
