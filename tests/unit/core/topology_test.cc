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
  CHECK(t.queues.size() == 2 + 4 + 1);
  for (const auto& q : t.queues) CHECK(q.arguments["x-queue-type"] == "quorum");
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
