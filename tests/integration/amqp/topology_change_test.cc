// Changing the topology of a running system (docs/operations.md, "Changing the topology"), on each
// RabbitMQ version: a limit changed through its policy applies to live queues and keeps what they
// hold; the daemons' declaration keeps a queue that an older version declared with other
// arguments; a retry tier's delay changes by a new tier while the old one drains, then goes.
#include <set>
#include <thread>

#include <doctest/doctest.h>

#include "common/amqp/session_impl.h"
#include "common/bus/topology.h"
#include "tests/support/session_helpers.h"
#include "tests/support/test_broker.h"
#include "tests/support/wait.h"

namespace syncbus::amqp {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using namespace syncbus::testing;

// The queue's settings as the broker applies them (management API; it lags by a moment).
Json EffectivePolicy(const TestVhost& vhost, const std::string& queue) {
  auto stats = vhost.QueueStats(queue);
  REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
  return (*stats).value("effective_policy_definition", Json::object());
}

TEST_CASE(
    "a limit changed through syncbus's policy applies to the live queue and keeps what it holds") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("policy-change"));
  REQUIRE(session.Connect().ok());
  TopologyOptions options{.max_length = 10};
  REQUIRE(vhost.SetUpSyncbus(session, options).ok());
  const std::string work = WorkQueueName(Lane::kChange);
  for (int i = 0; i < 4; ++i)
    REQUIRE(session.Publish(Work("change", "m" + std::to_string(i)), kBrokerTimeout).ok());
  Publication parked{kDeadExchange, "change", Message{}};
  parked.message.body = "parked";
  REQUIRE(session.Publish(parked, kBrokerTimeout).ok());

  // Lowered below what the queue holds: nothing is dropped (reject-publish), new work is refused.
  // The dead-letter index's size changes with it (its policy too).
  options.max_length = 2;
  options.delivery_limit = 3;
  options.dead_index_max_bytes = int64_t{512} << 20;
  REQUIRE(vhost.ApplyPolicies(SyncbusTopology(options).policies).ok());
  REQUIRE(WaitFor([&] { return EffectivePolicy(vhost, work).value("max-length", 0) == 2; },
                  seconds(30)));
  CHECK(EffectivePolicy(vhost, work)["delivery-limit"] == 3);
  bool refused = WaitFor(
      [&] { return !session.Publish(Work("change", "over"), kBrokerTimeout).ok(); }, seconds(15));
  CHECK(refused);
  CHECK(ReadyMessages(session, work) >= 4);
  CHECK(ReadyMessages(session, kDeadQueue) == 1);  // the parked request stays
  REQUIRE(WaitFor(
      [&] {
        return EffectivePolicy(vhost, kDeadIndexQueue).value("max-length-bytes", int64_t{0}) ==
               int64_t{512} << 20;
      },
      seconds(30)));

  // Raised again (an argument could only have been lowered): accepted, and all still there.
  options.max_length = 100;
  REQUIRE(vhost.ApplyPolicies(SyncbusTopology(options).policies).ok());
  REQUIRE(WaitFor([&] { return EffectivePolicy(vhost, work).value("max-length", 0) == 100; },
                  seconds(30)));
  CHECK(WaitFor([&] { return session.Publish(Work("change", "after"), kBrokerTimeout).ok(); },
                seconds(15)));
  CHECK(ReadyMessages(session, work) >= 5);
  CHECK(ReadyMessages(session, kDeadQueue) == 1);
}

TEST_CASE("the daemons' declaration keeps a queue an older version declared with other arguments") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("old-topology"));
  REQUIRE(session.Connect().ok());
  // The topology as versions before the policies declared it: limits as arguments, a dead-letter
  // queue without a limit.
  Topology old = SyncbusTopology();
  for (auto& q : old.queues) {
    if (q.name.rfind("syncbus.work.", 0) == 0) {
      q.arguments["x-delivery-limit"] = 5;
      q.arguments["x-max-length"] = 100000;
    }
    if (q.name == kDeadQueue) q.arguments = Json{{"x-queue-type", "quorum"}};
  }
  REQUIRE(session.Declare(old).ok());
  REQUIRE(session.Publish(Work("change", "queued"), kBrokerTimeout).ok());
  Publication parked{kDeadExchange, "change", Message{}};
  parked.message.body = "parked";
  REQUIRE(session.Publish(parked, kBrokerTimeout).ok());

  // A plain Declare is refused; the daemons' declaration keeps the queues and goes on.
  CHECK(session.Declare(SyncbusTopology()).code() == Code::kConflict);
  Status declared = DeclareTopology(session, SyncbusTopology());
  REQUIRE_MESSAGE(declared.ok(), declared.ToString());
  CHECK(session.connected());
  CHECK(ReadyMessages(session, WorkQueueName(Lane::kChange)) == 1);
  CHECK(ReadyMessages(session, kDeadQueue) == 1);
  CHECK(session.Inspect(kDeadIndexQueue).ok());  // created: it did not exist before
  auto stats = vhost.QueueStats(WorkQueueName(Lane::kChange));
  REQUIRE(stats.ok());
  CHECK((*stats)["arguments"]["x-delivery-limit"] == 5);  // kept as it was
  CHECK(session.Publish(Work("resync", "still works"), kBrokerTimeout).ok());
}

TEST_CASE(
    "a retry tier's delay changes by a new tier while the old one drains back to work, then goes") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("tier-change"));
  REQUIRE(session.Connect().ok());
  TopologyOptions before{.retry_tiers = {seconds(1), seconds(3)}};
  REQUIRE(vhost.SetUpSyncbus(session, before).ok());
  Publication retry{kRetryExchange, "change", Message{}};
  retry.message.body = "waiting in 3s";
  retry.message.headers = {{kRetryTierHeader, "3s"}};
  REQUIRE(session.Publish(retry, kBrokerTimeout).ok());
  CHECK(ReadyMessages(session, RetryQueueName(seconds(3))) == 1);

  // The new configuration: 3s becomes 2s. The old tier is no longer declared but stays.
  TopologyOptions after;
  after.retry_tiers = {seconds(1), seconds(2)};
  REQUIRE(DeclareTopology(session, SyncbusTopology(after)).ok());
  retry.message.body = "waiting in 2s";
  retry.message.headers = {{kRetryTierHeader, "2s"}};
  REQUIRE(session.Publish(retry, kBrokerTimeout).ok());
  const std::string old_tier = RetryQueueName(seconds(3));
  const std::string path =
      "/api/queues/" + ManagementApi::Escape(vhost.name()) + "/" + ManagementApi::Escape(old_tier);
  CHECK(ReadyMessages(session, old_tier) == 1);  // left as it was, still holding its request

  // Both come back to their lane after their delay.
  REQUIRE(session.Consume(WorkQueueName(Lane::kChange), 10).ok());
  std::set<std::string> back;
  for (int i = 0; i < 2; ++i) {
    Delivery d = NextOrFail(session, milliseconds(15000));
    back.insert(d.message.body);
    REQUIRE(session.Ack(d.delivery_tag).ok());
  }
  CHECK(back == std::set<std::string>{"waiting in 3s", "waiting in 2s"});
  // Empty, and nothing publishes to it any more: delete it (quorum queues have no if-empty).
  CHECK(ReadyMessages(session, old_tier) == 0);
  auto deleted = vhost.api().Call("DELETE", path);
  REQUIRE(deleted.ok());
  CHECK(deleted->status / 100 == 2);
  CHECK(session.Inspect(old_tier).status().code() == Code::kNotFound);
}

}  // namespace
}  // namespace syncbus::amqp
