#include "common/amqp/syncbus_topology.h"

namespace syncbus::amqp {

const char* LaneName(Lane lane) { return lane == Lane::kChange ? "change" : "resync"; }

std::string WorkQueueName(Lane lane) { return std::string(kWorkExchange) + "." + LaneName(lane); }

std::string TierName(std::chrono::seconds delay) {
  auto s = delay.count();
  if (s >= 3600 && s % 3600 == 0) return std::to_string(s / 3600) + "h";
  if (s >= 60 && s % 60 == 0) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

std::string RetryQueueName(std::chrono::seconds delay) {
  return std::string(kRetryExchange) + "." + TierName(delay);
}

Topology SyncbusTopology(const TopologyOptions& options) {
  Topology t;
  t.exchanges.push_back({kWorkExchange, "direct"});
  t.exchanges.push_back({kRetryExchange, "headers"});
  t.exchanges.push_back({kDeadExchange, "fanout"});

  for (Lane lane : {Lane::kChange, Lane::kResync}) {
    Json args = {
        {"x-queue-type", "quorum"},
        {"x-delivery-limit", options.delivery_limit},
        {"x-dead-letter-exchange", kDeadExchange},
        {"x-dead-letter-strategy", "at-least-once"},
        {"x-overflow", "reject-publish"},
        {"x-max-length", options.max_length},
    };
    t.queues.push_back({WorkQueueName(lane), true, std::move(args)});
    t.bindings.push_back({kWorkExchange, WorkQueueName(lane), LaneName(lane)});
  }
  for (auto delay : options.retry_tiers) {
    Json args = {
        {"x-queue-type", "quorum"},
        {"x-message-ttl", static_cast<int64_t>(delay.count()) * 1000},
        {"x-dead-letter-exchange", kWorkExchange},
        {"x-dead-letter-strategy", "at-least-once"},
        {"x-overflow", "reject-publish"},
    };
    t.queues.push_back({RetryQueueName(delay), true, std::move(args)});
    // "all-with-x": RabbitMQ's plain "all" ignores binding keys starting with "x-", which
    // would route every retry into every tier.
    t.bindings.push_back({kRetryExchange, RetryQueueName(delay), "",
                          Json{{"x-match", "all-with-x"}, {kRetryTierHeader, TierName(delay)}}});
  }
  t.queues.push_back({kDeadQueue, true, Json{{"x-queue-type", "quorum"}}});
  t.bindings.push_back({kDeadExchange, kDeadQueue, ""});
  t.exchanges.push_back({kTraceExchange, "fanout"});
  t.queues.push_back({kTraceQueue, true,
                      Json{{"x-queue-type", "stream"},
                           {"x-max-age", TierName(options.trace_max_age)},
                           {"x-max-length-bytes", options.trace_max_bytes},
                           {"x-stream-max-segment-size-bytes", options.trace_segment_bytes}}});
  t.bindings.push_back({kTraceExchange, kTraceQueue, ""});
  return t;
}

Json ToDefinitions(const Topology& topology, const std::string& vhost) {
  Json exchanges = Json::array(), queues = Json::array(), bindings = Json::array();
  for (const auto& e : topology.exchanges) {
    exchanges.push_back({{"name", e.name}, {"vhost", vhost}, {"type", e.type},
                         {"durable", e.durable}, {"auto_delete", false}, {"internal", false},
                         {"arguments", e.arguments}});
  }
  for (const auto& q : topology.queues) {
    queues.push_back({{"name", q.name}, {"vhost", vhost}, {"durable", q.durable},
                      {"auto_delete", false}, {"arguments", q.arguments}});
  }
  for (const auto& b : topology.bindings) {
    bindings.push_back({{"source", b.source}, {"vhost", vhost}, {"destination", b.destination},
                        {"destination_type", "queue"}, {"routing_key", b.routing_key},
                        {"arguments", b.arguments}});
  }
  return {{"exchanges", exchanges}, {"queues", queues}, {"bindings", bindings}};
}

}  // namespace syncbus::amqp
