// The syncbus topology on a real RabbitMQ 3.10: declarations, clashes, headers routing.
#include "common/bus/topology.h"

#include <doctest/doctest.h>

#include "common/amqp/session_impl.h"
#include "tests/support/session_helpers.h"
#include "tests/support/test_broker.h"

namespace syncbus::amqp {
namespace {

using std::chrono::seconds;
using namespace syncbus::testing;

TEST_CASE("the syncbus topology declares cleanly and again idempotently") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("topology"));
  REQUIRE(session.Connect().ok());
  Topology topology = SyncbusTopology();
  Status first = session.Declare(topology);
  REQUIRE_MESSAGE(first.ok(), first.ToString());
  Status second = session.Declare(topology);
  REQUIRE_MESSAGE(second.ok(), second.ToString());
  for (const auto& q : topology.queues) {
    auto info = session.Inspect(q.name);
    REQUIRE_MESSAGE(info.ok(), info.status().ToString());
    CHECK(info->messages == 0);
    auto stats = vhost.QueueStats(q.name);
    REQUIRE(stats.ok());
    CHECK((*stats)["type"] == q.arguments["x-queue-type"]);
    CHECK((*stats)["arguments"] == q.arguments);
  }
}

TEST_CASE("a conflicting redeclaration is a conflict naming the queue and argument") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("conflict"));
  REQUIRE(session.Connect().ok());
  Topology topology = SyncbusTopology();
  REQUIRE(session.Declare(topology).ok());

  Topology clash;
  clash.queues = {topology.queues[0]};
  clash.queues[0].arguments["x-max-length"] = 7;
  Status s = session.Declare(clash);
  CHECK(s.code() == Code::kConflict);
  CHECK(s.message().find(clash.queues[0].name) != std::string::npos);
  CHECK(s.message().find("x-max-length") != std::string::npos);
  CHECK(session.connected());

  Topology exchange_clash;
  exchange_clash.exchanges = {{kWorkExchange, "fanout"}};
  s = session.Declare(exchange_clash);
  CHECK(s.code() == Code::kConflict);
  CHECK(s.message().find(kWorkExchange) != std::string::npos);
  CHECK(s.message().find("type") != std::string::npos);

  // The channel was reopened: the session keeps working.
  REQUIRE(session.Declare(topology).ok());
  Publication p{kWorkExchange, "change", Message{}};
  p.message.body = "after the clash";
  CHECK(session.Publish(p, kBrokerTimeout).ok());
  CHECK(session.Inspect(WorkQueueName(Lane::kChange))->messages == 1);
}

TEST_CASE("binding to a missing exchange and inspecting a missing queue are NotFound") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("missing"));
  REQUIRE(session.Connect().ok());
  Topology dangling;
  dangling.queues = {{"q"}};
  dangling.bindings = {{"no-such-exchange", "q", "k"}};
  Status s = session.Declare(dangling);
  CHECK(s.code() == Code::kNotFound);
  CHECK(s.message().find("no-such-exchange") != std::string::npos);

  auto info = session.Inspect("no-such-queue");
  CHECK(info.status().code() == Code::kNotFound);
  CHECK(info.status().message().find("no-such-queue") != std::string::npos);
  CHECK(session.connected());
  CHECK(session.Inspect("q").ok());
}

TEST_CASE("a retry is routed to the tier its header names and to no other") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("tiers"));
  REQUIRE(session.Connect().ok());
  TopologyOptions options;
  options.retry_tiers = {seconds(30), seconds(120)};
  REQUIRE(session.Declare(SyncbusTopology(options)).ok());

  Publication p{kRetryExchange, "change", Message{}};
  p.message.body = "retry me";
  p.message.headers = {{kRetryTierHeader, "2m"}};
  REQUIRE(session.Publish(p, kBrokerTimeout).ok());
  CHECK(session.Inspect(RetryQueueName(seconds(120)))->messages == 1);
  CHECK(session.Inspect(RetryQueueName(seconds(30)))->messages == 0);

  p.message.headers = {{kRetryTierHeader, "1h"}};  // no such tier: unroutable
  CHECK(session.Publish(p, kBrokerTimeout).code() == Code::kNotFound);
}

}  // namespace
}  // namespace syncbus::amqp
