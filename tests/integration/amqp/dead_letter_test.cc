// Dead-lettering as the syncbus topology relies on it, on a real RabbitMQ 3.10: quorum delivery
// limit into syncbus.dead, retry tiers (quorum, x-message-ttl, at-least-once dead-lettering)
// back into the work queues with x-death counting rounds.
#include <doctest/doctest.h>

#include <thread>

#include "common/amqp/session_impl.h"
#include "common/amqp/syncbus_topology.h"
#include "tests/support/session_helpers.h"
#include "tests/support/test_broker.h"

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

TEST_CASE("a message requeued past x-delivery-limit is parked in syncbus.dead") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("poison"));
  REQUIRE(session.Connect().ok());
  TopologyOptions options;
  options.delivery_limit = 2;
  REQUIRE(session.Declare(SyncbusTopology(options)).ok());
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
    CHECK(deaths[0]["count"] == round);
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
