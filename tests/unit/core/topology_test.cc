#include "common/bus/topology.h"

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <doctest/doctest.h>

#include "tests/support/child_process.h"

using namespace syncbus;
using namespace std::chrono_literals;

TEST_CASE("topology names are readable and tiers map to queues") {
  CHECK(amqp::WorkQueueName(amqp::Lane::kChange) == "syncbus.work.change");
  CHECK(amqp::RetryQueueName(30s) == "syncbus.retry.30s");
  CHECK(amqp::RetryQueueName(120s) == "syncbus.retry.2m");
  CHECK(amqp::TierName(3600s) == "1h");
  CHECK(amqp::TierName(90s) == "90s");
  amqp::Topology t = amqp::SyncbusTopology();
  CHECK(t.queues.size() == 2 + 4 + 1 + 1 + 1 + 1);
  for (const auto& q : t.queues) {
    if (q.name == amqp::kTraceQueue || q.name == amqp::kDeadIndexQueue) continue;
    CHECK(q.arguments["x-queue-type"] == "quorum");
  }
}

// The policy RabbitMQ applies to `queue`: the matching one of the highest priority.
const amqp::PolicySpec* PolicyOf(const amqp::Topology& t, const std::string& queue) {
  const amqp::PolicySpec* best = nullptr;
  for (const auto& p : t.policies) {
    if (std::regex_search(queue, std::regex(p.pattern)) && (!best || p.priority > best->priority))
      best = &p;
  }
  return best;
}

// How many of `t`'s policies match `queue` (syncbus means exactly one per queue).
int MatchingPolicies(const amqp::Topology& t, const std::string& queue) {
  int matching = 0;
  for (const auto& p : t.policies)
    matching += std::regex_search(queue, std::regex(p.pattern)) ? 1 : 0;
  return matching;
}

TEST_CASE(
    "every quorum queue has an explicit delivery limit, and exactly one syncbus policy applies to "
    "each queue") {
  amqp::TopologyOptions options;
  options.delivery_limit = 3;
  options.max_length = 1234;
  amqp::Topology t = amqp::SyncbusTopology(options);
  for (const auto& q : t.queues) {
    CAPTURE(q.name);
    CHECK(MatchingPolicies(t, q.name) == 1);
    const amqp::PolicySpec* p = PolicyOf(t, q.name);
    REQUIRE(p != nullptr);
    if (q.arguments["x-queue-type"] == "quorum") {
      // A limit RabbitMQ 4.0's default of 20 never replaces: the policy's, and the argument's if
      // any.
      REQUIRE(p->definition.contains("delivery-limit"));
      if (q.arguments.contains("x-delivery-limit")) {
        CHECK(q.arguments["x-delivery-limit"] == p->definition["delivery-limit"]);
      }
    }
  }
  const amqp::PolicySpec* work = PolicyOf(t, "syncbus.work.change");
  CHECK(work->definition["delivery-limit"] == 3);
  CHECK(work->definition["max-length"] == 1234);
  // Limits that may change live in the policy, not in the queue's (immutable) arguments.
  for (const auto& q : t.queues) {
    if (q.name.rfind("syncbus.work.", 0) != 0) continue;
    CHECK_FALSE(q.arguments.contains("x-delivery-limit"));
    CHECK_FALSE(q.arguments.contains("x-max-length"));
    CHECK(q.arguments["x-dead-letter-exchange"] == amqp::kDeadExchange);
    CHECK(q.arguments["x-dead-letter-strategy"] == "at-least-once");
  }
  // The parking lot and the tiers never drop a returned message.
  CHECK(PolicyOf(t, amqp::kDeadQueue)->definition["delivery-limit"] ==
        amqp::kNeverReachedDeliveryLimit);
  CHECK(PolicyOf(t, "syncbus.retry.5s")->definition["delivery-limit"] ==
        amqp::kNeverReachedDeliveryLimit);
  CHECK(PolicyOf(t, "syncbus.retry.other") == nullptr);
  CHECK(PolicyOf(t, "syncbus.deadly") == nullptr);
}

TEST_CASE(
    "every parked message is also written to the dead-letter index, which nothing else feeds") {
  amqp::Topology t = amqp::SyncbusTopology();
  std::set<std::string> into_index, from_dead;
  for (const auto& b : t.bindings) {
    if (b.destination == amqp::kDeadIndexQueue) into_index.insert(b.source);
    if (b.source == amqp::kDeadExchange) from_dead.insert(b.destination);
  }
  CHECK(into_index == std::set<std::string>{amqp::kDeadExchange, amqp::kDeadIndexExchange});
  CHECK(from_dead == std::set<std::string>{amqp::kDeadQueue, amqp::kDeadIndexQueue});
  for (const auto& q : t.queues) {
    if (q.name != amqp::kDeadIndexQueue) continue;
    CHECK(q.arguments["x-queue-type"] == "stream");
    CHECK_FALSE(q.arguments.contains("x-max-age"));  // parked until replayed or purged
  }
}

TEST_CASE("the trace is a stream bounded by age and size, fed by a fanout exchange") {
  amqp::TopologyOptions options;
  options.trace_max_age = 2h;
  options.trace_max_bytes = int64_t{64} << 20;
  amqp::Topology t = amqp::SyncbusTopology(options);
  const amqp::QueueSpec* trace = nullptr;
  for (const auto& q : t.queues) {
    if (q.name == "syncbus.trace") trace = &q;
  }
  REQUIRE(trace != nullptr);
  CHECK(trace->durable);
  CHECK(trace->arguments["x-queue-type"] == "stream");
  CHECK(trace->arguments["x-max-age"] == "2h");
  CHECK(trace->arguments["x-max-length-bytes"] == int64_t{64} << 20);
  bool bound = false;
  for (const auto& b : t.bindings)
    bound = bound || (b.source == "syncbus.trace" && b.destination == "syncbus.trace");
  CHECK(bound);
}

TEST_CASE("the preview queue drops what nobody answers and parks nothing") {
  amqp::Topology t = amqp::SyncbusTopology();
  const amqp::QueueSpec* preview = nullptr;
  for (const auto& q : t.queues) {
    if (q.name == amqp::kPreviewQueue) preview = &q;
  }
  REQUIRE(preview != nullptr);
  CHECK(preview->arguments["x-queue-type"] == "quorum");
  CHECK(preview->arguments["x-message-ttl"] == 30 * 60 * 1000);
  // A preview is a question, not work to keep: nothing of it reaches the parking lot.
  CHECK_FALSE(preview->arguments.contains("x-dead-letter-exchange"));
  CHECK(PolicyOf(t, amqp::kPreviewQueue)->definition["delivery-limit"] == 3);
  int bound = 0;
  for (const auto& b : t.bindings) {
    if (b.destination != amqp::kPreviewQueue) continue;
    ++bound;
    CHECK(b.source == amqp::kWorkExchange);
    CHECK(b.routing_key == amqp::kPreviewRoutingKey);
  }
  CHECK(bound == 1);
}

TEST_CASE(
    "a consumer's own queues, one per lane, return what it does not take to that lane, and are "
    "bound to its identity and their lane only") {
  amqp::TopologyOptions options;
  options.forward_ttl = 7s;
  options.consumer_queue_expiry = 5min;
  options.delivery_limit = 4;
  amqp::Topology t = amqp::ConsumerTopology("consumer-1", options);
  CHECK(amqp::ConsumerQueueName("consumer-1", amqp::Lane::kChange) ==
        "syncbus.consumer.consumer-1.change");
  CHECK(amqp::ConsumerQueueName("consumer-1", amqp::Lane::kResync) ==
        "syncbus.consumer.consumer-1.resync");
  REQUIRE(t.queues.size() == 2);
  REQUIRE(t.bindings.size() == 2);
  amqp::Topology shared = amqp::SyncbusTopology(options);
  for (size_t i = 0; i < 2; ++i) {
    const std::string lane = i == 0 ? "change" : "resync";
    CAPTURE(lane);
    const amqp::QueueSpec& q = t.queues[i];
    CHECK(q.name == "syncbus.consumer.consumer-1." + lane);
    CHECK(q.durable);
    CHECK(q.arguments["x-queue-type"] == "quorum");
    CHECK(q.arguments["x-message-ttl"] == 7000);
    CHECK(q.arguments["x-expires"] == 300000);
    CHECK(q.arguments["x-dead-letter-exchange"] == amqp::kWorkExchange);
    // Back on the message's own routing key (its lane), at least once (which needs
    // reject-publish).
    CHECK_FALSE(q.arguments.contains("x-dead-letter-routing-key"));
    CHECK(q.arguments["x-dead-letter-strategy"] == "at-least-once");
    CHECK(q.arguments["x-overflow"] == "reject-publish");
    CHECK(t.bindings[i].source == amqp::kForwardExchange);
    CHECK(t.bindings[i].destination == q.name);
    CHECK(t.bindings[i].arguments ==
          Json{{"x-match", "all-with-x"}, {kForwardToHeader, "consumer-1"}, {kLaneHeader, lane}});
    // The policy is the shared topology's, one for either lane.
    CHECK(MatchingPolicies(shared, q.name) == 1);
    const amqp::PolicySpec* policy = PolicyOf(shared, q.name);
    REQUIRE(policy != nullptr);
    // Back to its lane at the first unsettled return, where x-death counts it (headers.h).
    CHECK(policy->definition["delivery-limit"] == 0);
  }
  CHECK(t.exchanges.empty());
  CHECK(t.policies.empty());

  // The exchange is the shared topology's.
  int forward = 0;
  for (const auto& e : shared.exchanges)
    forward += e.name == amqp::kForwardExchange && e.type == "headers" ? 1 : 0;
  CHECK(forward == 1);
  CHECK(PolicyOf(shared, "syncbus.consumers") == nullptr);
}

TEST_CASE("rabbitmq/definitions.json equals the topology declared in code") {
  std::ifstream in(testing::SourceDir() + "/rabbitmq/definitions.json");
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  Json file = Json::parse(ss.str());
  Json code = amqp::ToDefinitions(amqp::SyncbusTopology(), "/");
  for (const char* section : {"exchanges", "queues", "bindings", "policies"}) {
    CAPTURE(section);
    CHECK(file[section] == code[section]);
  }
}
