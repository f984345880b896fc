#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "common/amqp/syncbus_topology.h"
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
  CHECK(t.queues.size() == 2 + 4 + 1 + 1);
  for (const auto& q : t.queues) {
    if (q.name == amqp::kTraceQueue) continue;
    CHECK(q.arguments["x-queue-type"] == "quorum");
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
  for (const auto& b : t.bindings) bound = bound || (b.source == "syncbus.trace" && b.destination == "syncbus.trace");
  CHECK(bound);
}

TEST_CASE("rabbitmq/definitions.json equals the topology declared in code") {
  std::ifstream in(testing::SourceDir() + "/rabbitmq/definitions.json");
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  Json file = Json::parse(ss.str());
  Json code = amqp::ToDefinitions(amqp::SyncbusTopology(), "/");
  for (const char* section : {"exchanges", "queues", "bindings"}) {
    CAPTURE(section);
    CHECK(file[section] == code[section]);
  }
}
