// Dead-lettering as the syncbus topology relies on it, on each RabbitMQ version: the quorum
// delivery limit (syncbus's policy) into syncbus.dead and its index, retry tiers (quorum,
// x-message-ttl, at-least-once dead-lettering) back into the work queues, and a parked request
// that stays however often it is returned (RabbitMQ 4.0 drops a message returned more than 20
// times from a quorum queue without an explicit limit).
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

// Dead-lettering out of a quorum queue is asynchronous: poll with basic.get.
Delivery GetWithin(Session& session, const std::string& queue, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto got = session.Get(queue);
    REQUIRE_MESSAGE(got.ok(), got.status().ToString());
    if (got->has_value()) return **got;
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "nothing arrived in " << queue);
    std::this_thread::sleep_for(milliseconds(50));
  }
}

// The bodies of the messages in `queue`, in order, by taking them all and giving them back.
std::vector<std::string> Bodies(Session& session, const std::string& queue) {
  std::vector<std::string> bodies;
  std::vector<uint64_t> tags;
  for (;;) {
    auto got = session.Get(queue);
    REQUIRE_MESSAGE(got.ok(), got.status().ToString());
    if (!got->has_value()) break;
    bodies.push_back((*got)->message.body);
    tags.push_back((*got)->delivery_tag);
  }
  for (uint64_t tag : tags) REQUIRE(session.Nack(tag, true).ok());
  return bodies;
}

// Parks `n` messages through the exchange syncbus.dead, as the consumers do.
void ParkMessages(Session& session, int n) {
  for (int i = 0; i < n; ++i) {
    Publication p{kDeadExchange, "change", Message{}};
    p.message.body = "parked-" + std::to_string(i);
    p.message.message_id = p.message.body;
    REQUIRE(session.Publish(p, kBrokerTimeout).ok());
  }
}

TEST_CASE(
    "a message requeued past the delivery limit of syncbus's policy is parked in syncbus.dead and "
    "its index") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("poison"));
  REQUIRE(session.Connect().ok());
  REQUIRE(vhost.SetUpSyncbus(session, {.delivery_limit = 2}).ok());
  const std::string work = WorkQueueName(Lane::kChange);

  Publication p{kWorkExchange, "change", Message{}};
  p.message.body = "poison";
  p.message.message_id = "poison-1";
  REQUIRE(session.Publish(p, kBrokerTimeout).ok());
  REQUIRE(session.Consume(work, 1).ok());

  // delivery_limit 2: delivered 3 times (N + 1), then dead-lettered.
  for (int delivery = 1; delivery <= 3; ++delivery) {
    Delivery d = NextOrFail(session);
    CHECK(d.message.body == "poison");
    CHECK(d.redelivered == (delivery > 1));
    REQUIRE(session.Nack(d.delivery_tag, true).ok());
  }
  auto more = session.Next(milliseconds(1000));
  REQUIRE(more.ok());
  CHECK(!more->has_value());

  Delivery dead = GetWithin(session, kDeadQueue, kBrokerTimeout);
  CHECK(dead.message.body == "poison");
  CHECK(dead.message.message_id == "poison-1");
  CHECK(dead.exchange == kDeadExchange);
  const Json& deaths = dead.message.headers["x-death"];
  REQUIRE(deaths.is_array());
  REQUIRE(deaths.size() == 1);
  CHECK(deaths[0]["reason"] == "delivery_limit");
  CHECK(deaths[0]["queue"] == work);
  CHECK(deaths[0]["count"] == 1);
  CHECK(deaths[0]["exchange"] == kWorkExchange);
  CHECK(deaths[0]["routing-keys"] == Json::array({"change"}));
  CHECK(deaths[0]["time"].contains("$timestamp"));
  CHECK(dead.message.headers["x-first-death-reason"] == "delivery_limit");
  CHECK(dead.message.headers["x-first-death-queue"] == work);
  REQUIRE(session.Ack(dead.delivery_tag).ok());
  // The broker's dead-lettering reached the index too (at-least-once, through syncbus.dead).
  REQUIRE(session.ConsumeStream(kDeadIndexQueue, 10, 0).ok());
  Delivery indexed = NextOrFail(session);
  CHECK(indexed.message.message_id == "poison-1");
  CHECK(indexed.message.headers["x-first-death-reason"] == "delivery_limit");
}

TEST_CASE("a parked request stays, in its place, however often a replay or purge gives it back") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("stays"));
  REQUIRE(session.Connect().ok());
  REQUIRE(vhost.SetUpSyncbus(session).ok());
  ParkMessages(session, 3);
  const std::vector<std::string> parked = {"parked-0", "parked-1", "parked-2"};
  // 25 passes that take everything and give it back (a replay or purge of other clusters does
  // that): more returns than RabbitMQ 4.0's default limit of 20 allows.
  for (int pass = 0; pass < 25; ++pass) REQUIRE(Bodies(session, kDeadQueue) == parked);
  // The limit is explicit, as argument and policy (the management API shows a policy after
  // its next statistics round).
  Json stats;
  CHECK(WaitFor(
      [&] {
        auto got = vhost.QueueStats(kDeadQueue);
        if (got.ok()) stats = *got;
        return got.ok() && stats.value("policy", Json()) == "syncbus-dead";
      },
      seconds(30)));
  CHECK(stats["arguments"]["x-delivery-limit"] == kNeverReachedDeliveryLimit);
  CHECK(stats["effective_policy_definition"]["delivery-limit"] == kNeverReachedDeliveryLimit);
}

TEST_CASE(
    "a dead-letter queue declared by an older version, without a limit, is covered by the policy") {
  for (bool with_policies : {true, false}) {
    CAPTURE(with_policies);
    TestVhost vhost = NewTestVhost();
    RabbitmqSession session(vhost.Options("old-dlq"));
    REQUIRE(session.Connect().ok());
    if (with_policies) REQUIRE(vhost.ApplyPolicies(SyncbusTopology().policies).ok());
    Topology old = SyncbusTopology();
    for (auto& q : old.queues) {
      if (q.name == kDeadQueue)
        q.arguments = Json{{"x-queue-type", "quorum"}};  // as declared before
    }
    REQUIRE(session.Declare(old).ok());
    ParkMessages(session, 1);
    for (int pass = 0; pass < 25; ++pass) (void)Bodies(session, kDeadQueue);
    const bool kept = Bodies(session, kDeadQueue).size() == 1;
    if (with_policies) {
      CHECK(kept);
    } else if (vhost.env().version != "3.10") {
      // What the policy prevents: RabbitMQ 4.0's default limit drops it (no dead-letter target).
      CHECK_FALSE(kept);
    }
  }
}

TEST_CASE("a retry tier delays by its TTL and returns to the work lane, x-death counts rounds") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("retry"));
  REQUIRE(session.Connect().ok());
  TopologyOptions options;
  options.retry_tiers = {seconds(1), seconds(30)};
  REQUIRE(session.Declare(SyncbusTopology(options)).ok());
  const std::string work = WorkQueueName(Lane::kResync);
  REQUIRE(session.Consume(work, 1).ok());

  Publication p{kRetryExchange, "resync", Message{}};
  p.message.body = "cluster ns/c1";
  p.message.message_id = "retry-1";
  p.message.headers = {{kRetryTierHeader, "1s"}, {"x-syncbus-attempt", 1}};

  for (int round = 1; round <= 2; ++round) {
    const auto sent = std::chrono::steady_clock::now();
    Status published = session.Publish(p, kBrokerTimeout);
    REQUIRE_MESSAGE(published.ok(), published.ToString());
    Delivery d = NextOrFail(session, milliseconds(15000));
    const double delay =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
    MESSAGE("round ", round, ": back after ", delay, " s");
    CHECK(delay >= 0.8);
    CHECK(delay <= 3.0);
    CHECK(d.message.body == "cluster ns/c1");
    CHECK(d.routing_key == "resync");
    CHECK(d.exchange == kWorkExchange);
    CHECK(d.message.headers[kRetryTierHeader] == "1s");
    const Json& deaths = d.message.headers["x-death"];
    REQUIRE(deaths.size() == 1);
    CHECK(deaths[0]["queue"] == RetryQueueName(seconds(1)));
    CHECK(deaths[0]["reason"] == "expired");
    // RabbitMQ 4.0 no longer reads an x-death header a client publishes: the count starts again.
    // (syncbus counts attempts in x-syncbus-attempt, never in x-death.)
    CHECK(deaths[0]["count"] == (vhost.env().version == "3.10" ? round : 1));
    CHECK(deaths[0]["routing-keys"] == Json::array({"resync"}));
    CHECK(session.Inspect(RetryQueueName(seconds(30)))->messages == 0);
    REQUIRE(session.Ack(d.delivery_tag).ok());
    // The consumer retries by republishing what it received, x-death included.
    p.message.headers = d.message.headers;
    p.message.headers.erase("x-delivery-count");
  }
}

}  // namespace
}  // namespace syncbus::amqp
