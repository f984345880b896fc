// Consuming on a real RabbitMQ 3.10: prefetch, requeue, deliveries interleaved with confirms,
// broker-side consumer cancellation.
#include <set>

#include <doctest/doctest.h>

#include "common/amqp/session_impl.h"
#include "common/bus/topology.h"
#include "tests/support/session_helpers.h"
#include "tests/support/test_broker.h"
#include "tests/support/wait.h"

namespace syncbus::amqp {
namespace {

using std::chrono::milliseconds;
using namespace syncbus::testing;

// Requeues reach a quorum queue asynchronously: poll its depth.
bool WaitForDepth(Session& session, const std::string& queue, uint32_t depth) {
  return WaitFor(
      [&] {
        auto info = session.Inspect(queue);
        return info.ok() && info->messages == depth;
      },
      kBrokerTimeout);
}

TEST_CASE("a consumer with prefetch N holds at most N unacked deliveries") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("prefetch"));
  REQUIRE(session.Connect().ok());
  REQUIRE(session.Declare(SyncbusTopology()).ok());
  const std::string work = WorkQueueName(Lane::kChange);
  std::vector<Publication> batch;
  for (int i = 0; i < 10; ++i) batch.push_back(Work("change", std::to_string(i)));
  for (const auto& r : session.PublishAll(batch, kBrokerTimeout)) REQUIRE(r.ok());

  auto tag = session.Consume(work, 3);
  REQUIRE_MESSAGE(tag.ok(), tag.status().ToString());
  std::vector<Delivery> held;
  for (int i = 0; i < 3; ++i) held.push_back(NextOrFail(session));
  CHECK(held[0].message.body == "0");
  CHECK(held[0].consumer_tag == *tag);
  CHECK(held[0].queue == work);
  auto more = session.Next(milliseconds(1500));
  REQUIRE(more.ok());
  CHECK(!more->has_value());
  CHECK(session.Inspect(work)->messages == 7);

  REQUIRE(session.Ack(held[0].delivery_tag).ok());
  Delivery next = NextOrFail(session);
  CHECK(next.message.body == "3");
  more = session.Next(milliseconds(500));
  REQUIRE(more.ok());
  CHECK(!more->has_value());
}

TEST_CASE("nack with requeue redelivers with the redelivered flag and a delivery count") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("requeue"));
  REQUIRE(session.Connect().ok());
  REQUIRE(session.Declare(SyncbusTopology()).ok());
  const std::string work = WorkQueueName(Lane::kResync);
  REQUIRE(session.Publish(Work("resync", "again"), kBrokerTimeout).ok());
  REQUIRE(session.Consume(work, 1).ok());
  Delivery first = NextOrFail(session);
  CHECK(!first.redelivered);
  CHECK(!first.message.headers.contains("x-delivery-count"));  // set from the first return on
  REQUIRE(session.Nack(first.delivery_tag, true).ok());
  Delivery second = NextOrFail(session);
  CHECK(second.message.body == "again");
  CHECK(second.redelivered);
  CHECK(second.message.headers.value("x-delivery-count", -1) == 1);
  CHECK(second.delivery_tag != first.delivery_tag);
  REQUIRE(session.Reject(second.delivery_tag, true).ok());
  Delivery third = NextOrFail(session);
  CHECK(third.redelivered);
  CHECK(third.message.headers.value("x-delivery-count", -1) == 2);
  REQUIRE(session.Ack(third.delivery_tag).ok());
  CHECK(WaitForDepth(session, work, 0));
}

TEST_CASE("deliveries that arrive while waiting for confirms are kept for Next") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("interleave"));
  REQUIRE(session.Connect().ok());
  REQUIRE(session.Declare(SyncbusTopology()).ok());
  REQUIRE(session.Consume(WorkQueueName(Lane::kChange), 0).ok());

  std::vector<Publication> batch;
  for (int i = 0; i < 2000; ++i) batch.push_back(Work("change", std::to_string(i)));
  for (const auto& r : session.PublishAll(batch, milliseconds(30000))) REQUIRE(r.ok());
  std::set<std::string> seen;
  for (int i = 0; i < 2000; ++i) {
    Delivery d = NextOrFail(session);
    seen.insert(d.message.body);
    REQUIRE(session.Ack(d.delivery_tag).ok());
  }
  CHECK(seen.size() == 2000);
  // Confirms that arrive while Next waits are taken in too.
  CHECK(session.Publish(Work("change", "last"), kBrokerTimeout).ok());
  CHECK(NextOrFail(session).message.body == "last");
}

TEST_CASE("deleting the consumed queue cancels the consumer: Next fails naming the queue") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("cancel"));
  REQUIRE(session.Connect().ok());
  REQUIRE(session.Declare(SyncbusTopology()).ok());
  const std::string work = WorkQueueName(Lane::kResync);
  REQUIRE(session.Consume(work, 1).ok());
  auto deleted = vhost.api().Call("DELETE", "/api/queues/" + ManagementApi::Escape(vhost.name()) +
                                                "/" + ManagementApi::Escape(work));
  REQUIRE(deleted.ok());
  REQUIRE(deleted->status / 100 == 2);
  auto next = session.Next(kBrokerTimeout);
  CHECK(next.status().code() == Code::kUnavailable);
  CHECK(next.status().message().find(work) != std::string::npos);
  CHECK(!session.connected());

  // Reconnecting and redeclaring brings the queue back.
  REQUIRE(session.Connect().ok());
  REQUIRE(session.Declare(SyncbusTopology()).ok());
  CHECK(session.Consume(work, 1).ok());
}

TEST_CASE("cancelling our own consumer stops deliveries, Get and unknown queues") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("get"));
  REQUIRE(session.Connect().ok());
  REQUIRE(session.Declare(SyncbusTopology()).ok());
  const std::string work = WorkQueueName(Lane::kChange);
  auto tag = session.Consume(work, 1);
  REQUIRE(tag.ok());
  REQUIRE(session.Cancel(*tag).ok());
  REQUIRE(session.Publish(Work("change", "m"), kBrokerTimeout).ok());
  auto none = session.Next(milliseconds(500));
  REQUIRE(none.ok());
  CHECK(!none->has_value());

  auto got = session.Get(work);
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  CHECK((*got)->message.body == "m");
  auto empty = session.Get(work);
  REQUIRE(empty.ok());
  CHECK(!empty->has_value());
  // Never returned: RabbitMQ 3.10's basic.get says 0, 4.0 leaves the header out.
  CHECK((*got)->message.headers.value("x-delivery-count", 0) == 0);
  REQUIRE(session.Nack((*got)->delivery_tag, true).ok());
  CHECK(WaitForDepth(session, work, 1));

  CHECK(session.Consume("no-such-queue", 1).status().code() == Code::kNotFound);
  CHECK(session.Get("no-such-queue").status().code() == Code::kNotFound);
  CHECK(session.connected());
}

TEST_CASE(
    "a new publishing channel, or one the broker closed, leaves the consumer its deliveries") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("publish-channel"));
  REQUIRE(session.Connect().ok());
  REQUIRE(session.Declare(SyncbusTopology()).ok());
  const std::string work = WorkQueueName(Lane::kChange);
  REQUIRE(session.PublishAll({Work("change", "a"), Work("change", "b")}, kBrokerTimeout)[1].ok());
  REQUIRE(session.Consume(work, 2).ok());
  Delivery a = NextOrFail(session);
  Delivery b = NextOrFail(session);

  REQUIRE(session.RenewPublishChannel().ok());
  CHECK(session.Publish(Work("change", "c"), kBrokerTimeout).ok());  // confirmed on the new one
  Publication lost = Work("change", "x");
  lost.exchange = "no-such-exchange";
  CHECK(session.Publish(lost, kBrokerTimeout).code() == Code::kNotFound);  // closes that channel
  CHECK(session.Publish(Work("change", "d"), kBrokerTimeout).ok());

  // Both deliveries are still ours, on the channel that got them: acked, never redelivered.
  REQUIRE(session.Ack(a.delivery_tag).ok());
  REQUIRE(session.Ack(b.delivery_tag).ok());
  std::vector<std::string> bodies;
  for (int i = 0; i < 2; ++i) {
    Delivery d = NextOrFail(session);
    CHECK_FALSE(d.redelivered);
    bodies.push_back(d.message.body);
    REQUIRE(session.Ack(d.delivery_tag).ok());
  }
  CHECK(bodies == std::vector<std::string>{"c", "d"});
  CHECK(WaitForDepth(session, work, 0));
  CHECK(session.connected());
}

}  // namespace
}  // namespace syncbus::amqp
