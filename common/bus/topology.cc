#include "common/bus/topology.h"

#include "common/log.h"

namespace syncbus::amqp {

const char* LaneName(Lane lane) {
  return lane == Lane::kChange ? "change" : "resync";
}

std::string WorkQueueName(Lane lane) {
  return std::string(kWorkExchange) + "." + LaneName(lane);
}

std::string TierName(std::chrono::seconds delay) {
  auto s = delay.count();
  if (s >= 3600 && s % 3600 == 0) return std::to_string(s / 3600) + "h";
  if (s >= 60 && s % 60 == 0) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

std::string RetryQueueName(std::chrono::seconds delay) {
  return std::string(kRetryExchange) + "." + TierName(delay);
}

std::string ConsumerQueueName(const std::string& identity, Lane lane) {
  return kConsumerQueuePrefix + identity + "." + LaneName(lane);
}

Topology SyncbusTopology(const TopologyOptions& options) {
  Topology t;
  t.exchanges.push_back({kWorkExchange, "direct"});
  t.exchanges.push_back({kRetryExchange, "headers"});
  t.exchanges.push_back({kDeadExchange, "fanout"});
  t.exchanges.push_back({kForwardExchange, "headers"});

  for (Lane lane : {Lane::kChange, Lane::kResync}) {
    Json args = {
        {"x-queue-type", "quorum"},
        {"x-dead-letter-exchange", kDeadExchange},
        {"x-dead-letter-strategy", "at-least-once"},
        {"x-overflow", "reject-publish"},
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
  t.queues.push_back(
      {kDeadQueue, true,
       Json{{"x-queue-type", "quorum"}, {"x-delivery-limit", kNeverReachedDeliveryLimit}}});
  t.bindings.push_back({kDeadExchange, kDeadQueue, ""});
  t.exchanges.push_back({kDeadIndexExchange, "fanout"});
  t.queues.push_back({kDeadIndexQueue, true,
                      Json{{"x-queue-type", "stream"},
                           {"x-max-length-bytes", options.dead_index_max_bytes},
                           {"x-stream-max-segment-size-bytes", options.dead_index_segment_bytes}}});
  t.bindings.push_back({kDeadExchange, kDeadIndexQueue, ""});
  t.bindings.push_back({kDeadIndexExchange, kDeadIndexQueue, ""});
  t.exchanges.push_back({kTraceExchange, "fanout"});
  t.queues.push_back({kTraceQueue, true,
                      Json{{"x-queue-type", "stream"},
                           {"x-max-age", TierName(options.trace_max_age)},
                           {"x-max-length-bytes", options.trace_max_bytes},
                           {"x-stream-max-segment-size-bytes", options.trace_segment_bytes}}});
  t.bindings.push_back({kTraceExchange, kTraceQueue, ""});
  // No dead-letter exchange: a preview is a question, not work to keep. The quorum queue drops
  // what expires or reaches its delivery limit (quorum queues honour x-message-ttl since
  // RabbitMQ 3.10).
  t.queues.push_back(
      {kPreviewQueue, true,
       Json{{"x-queue-type", "quorum"},
            {"x-message-ttl", static_cast<int64_t>(options.preview_ttl.count()) * 1000}}});
  t.bindings.push_back({kWorkExchange, kPreviewQueue, kPreviewRoutingKey});

  // One policy per kind of queue (RabbitMQ applies one policy to a queue: the matching one of
  // the highest priority). Patterns are anchored and disjoint.
  t.policies.push_back(
      {"syncbus-work", R"(^syncbus\.work\.(change|resync)$)", "queues", 10,
       Json{{"delivery-limit", options.delivery_limit}, {"max-length", options.max_length}}});
  t.policies.push_back({"syncbus-retry", R"(^syncbus\.retry\.[0-9]+[smh]$)", "queues", 10,
                        Json{{"delivery-limit", kNeverReachedDeliveryLimit}}});
  t.policies.push_back({"syncbus-dead", R"(^syncbus\.dead$)", "queues", 10,
                        Json{{"delivery-limit", kNeverReachedDeliveryLimit}}});
  t.policies.push_back({"syncbus-dead-index", R"(^syncbus\.dead\.index$)", "queues", 10,
                        Json{{"max-length-bytes", options.dead_index_max_bytes}}});
  t.policies.push_back({"syncbus-preview", R"(^syncbus\.preview$)", "queues", 10,
                        Json{{"delivery-limit", options.preview_delivery_limit}}});
  // The consumers' own queues (ConsumerTopology): a request that comes back unsettled (its
  // consumer died or lost its connection holding it) goes back to its lane at once, where its
  // x-death entry counts as an unsettled delivery (headers.h): a queue's own count would be lost
  // when it dead-letters, and a dead consumer's queue has nobody to deliver it again anyway.
  t.policies.push_back(
      {"syncbus-consumer", R"(^syncbus\.consumer\.)", "queues", 10, Json{{"delivery-limit", 0}}});
  t.policies.push_back({"syncbus-trace", R"(^syncbus\.trace$)", "queues", 10,
                        Json{{"max-age", TierName(options.trace_max_age)},
                             {"max-length-bytes", options.trace_max_bytes}}});
  return t;
}

Topology ConsumerTopology(const std::string& identity, const TopologyOptions& options) {
  Topology t;
  // At-least-once dead-lettering needs reject-publish overflow (else RabbitMQ falls back to
  // at-most-once). No dead-letter routing key: the message's own, its lane, takes it back there.
  for (Lane lane : {Lane::kChange, Lane::kResync}) {
    Json args = {
        {"x-queue-type", "quorum"},
        {"x-message-ttl", static_cast<int64_t>(options.forward_ttl.count()) * 1000},
        {"x-expires", static_cast<int64_t>(options.consumer_queue_expiry.count()) * 1000},
        {"x-dead-letter-exchange", kWorkExchange},
        {"x-dead-letter-strategy", "at-least-once"},
        {"x-overflow", "reject-publish"},
    };
    const std::string queue = ConsumerQueueName(identity, lane);
    t.queues.push_back({queue, true, std::move(args)});
    // "all-with-x", as for the retry tiers: plain "all" ignores x- keys and would route every
    // forward to every consumer.
    t.bindings.push_back({kForwardExchange, queue, "",
                          Json{{"x-match", "all-with-x"},
                               {kForwardToHeader, identity},
                               {kLaneHeader, LaneName(lane)}}});
  }
  return t;
}

Json ToDefinitions(const Topology& topology, const std::string& vhost) {
  Json exchanges = Json::array(), queues = Json::array(), bindings = Json::array(),
       policies = Json::array();
  for (const auto& e : topology.exchanges) {
    exchanges.push_back({{"name", e.name},
                         {"vhost", vhost},
                         {"type", e.type},
                         {"durable", e.durable},
                         {"auto_delete", false},
                         {"internal", false},
                         {"arguments", e.arguments}});
  }
  for (const auto& q : topology.queues) {
    queues.push_back({{"name", q.name},
                      {"vhost", vhost},
                      {"durable", q.durable},
                      {"auto_delete", false},
                      {"arguments", q.arguments}});
  }
  for (const auto& b : topology.bindings) {
    bindings.push_back({{"source", b.source},
                        {"vhost", vhost},
                        {"destination", b.destination},
                        {"destination_type", "queue"},
                        {"routing_key", b.routing_key},
                        {"arguments", b.arguments}});
  }
  for (const auto& p : topology.policies) {
    policies.push_back({{"name", p.name},
                        {"vhost", vhost},
                        {"pattern", p.pattern},
                        {"apply-to", p.apply_to},
                        {"priority", p.priority},
                        {"definition", p.definition}});
  }
  return {
      {"exchanges", exchanges}, {"queues", queues}, {"bindings", bindings}, {"policies", policies}};
}

Status DeclareTopology(Session& session, const Topology& topology) {
  Topology rest;
  rest.exchanges = topology.exchanges;
  SYNCBUS_RETURN_IF_ERROR(session.Declare(rest));
  for (const QueueSpec& queue : topology.queues) {
    Topology one;
    one.queues = {queue};
    Status declared = session.Declare(one);
    if (declared.code() != Code::kConflict) {
      SYNCBUS_RETURN_IF_ERROR(declared);
      continue;
    }
    // The broker refused other arguments for an existing queue (and reopened the channel):
    // keep the queue as it is, provided it is there.
    SYNCBUS_RETURN_IF_ERROR(session.Inspect(queue.name).status());
    log::Warn(
        "amqp: a queue exists with other arguments than this version declares; it is kept as it is "
        "(see docs/operations.md, \"Changing the topology\")",
        {{"queue", queue.name}, {"broker", declared.message()}});
  }
  rest = Topology();
  rest.bindings = topology.bindings;
  return session.Declare(rest);
}

}  // namespace syncbus::amqp
