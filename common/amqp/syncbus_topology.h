// The syncbus topology (exchange, queue and binding names and arguments): the one source of
// truth that the daemons declare and that rabbitmq/definitions.json mirrors.
//
//   syncbus.work (direct) --change--> syncbus.work.change (quorum)   served first
//                         --resync--> syncbus.work.resync (quorum)
//   syncbus.retry (headers, x-syncbus-retry-tier=<tier>) --> syncbus.retry.<tier> (TTL = tier)
//       each dead-letters back to syncbus.work with the original routing key (= lane)
//   syncbus.dead (fanout) --> syncbus.dead (quorum, the parking lot); work queues dead-letter
//       here on their delivery limit (poison messages).
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

enum class Lane { kChange, kResync };
const char* LaneName(Lane lane);                 // "change" / "resync" (also the routing key)
std::string WorkQueueName(Lane lane);            // "syncbus.work.change"

struct TopologyOptions {
  std::vector<std::chrono::seconds> retry_tiers{std::chrono::seconds(5), std::chrono::seconds(30),
                                                std::chrono::minutes(2), std::chrono::minutes(6)};
  int delivery_limit = 5;           // redeliveries before a work message is parked (poison)
  int max_length = 100000;          // per work queue; beyond it publishes are rejected
};

// "5s", "30s", "2m", "6m", "1h", "90s".
std::string TierName(std::chrono::seconds delay);
std::string RetryQueueName(std::chrono::seconds delay);   // "syncbus.retry.30s"

Topology SyncbusTopology(const TopologyOptions& options = {});

// The topology in the format of `rabbitmqctl import_definitions` for one vhost.
Json ToDefinitions(const Topology& topology, const std::string& vhost);

}  // namespace syncbus::amqp
