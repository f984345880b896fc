// Forwarding a request to the consumer that holds its cluster, on each RabbitMQ version: the
// forward exchange routes on x-syncbus-to and x-syncbus-lane only to that consumer's own queue of
// the request's lane (all-with-x), so a forwarded change is delivered ahead of a backlog of
// forwarded resyncs; a forward to a consumer without a queue comes back (mandatory), and what the
// holder leaves in its queue returns to its lane after the TTL with syncbus's headers as they
// were.
// What both versions showed: a binding with plain x-match "all" ignores the x-syncbus-to key and
// takes every forward, also one to an identity without a queue (so all-with-x); an expired forward
// is back in its lane ~1.0 s after a 1 s TTL, from exchange syncbus.work on its lane, with x-death
// naming syncbus.forward and the holder's queue (4.0 adds x-last-death-*), and without the
// queue's x-delivery-count; one given back unsettled is back at once (delivery limit 0), its
// x-death reason delivery_limit; one whose holder's connection ended holding it too, but 4.0
// then delivers it in its lane as redelivered with x-delivery-count 1 (the holder's queue's
// count) and x-last-death-*, a second count of the same delivery that syncbus counts once (a
// consumer of the lane dying holding it then leaves that count at 1 on 4.0; 3.10 counts 1 more
// beside the x-death entry); an expiring queue is deleted with what it holds, nothing
// dead-lettered.
#include <thread>

#include <doctest/doctest.h>

#include "common/amqp/session_impl.h"
#include "common/bus/retry_policy.h"
#include "common/bus/topology.h"
#include "tests/support/session_helpers.h"
#include "tests/support/test_broker.h"
#include "tests/support/wait.h"

namespace syncbus::amqp {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using namespace syncbus::testing;

// A request as a consumer received it from `lane`, with its history.
Delivery Received(const std::string& lane, const std::string& body) {
  Delivery d;
  d.exchange = kWorkExchange;
  d.routing_key = lane;
  d.message.body = body;
  d.message.message_id = body;
  d.message.headers = Json{{kClusterHeader, "ns/" + body},
                           {kLaneHeader, lane},
                           {kAttemptHeader, 1},
                           {kUnsettledHeader, 1},
                           {kDeliveryCountHeader, 1}};
  return d;
}

// How many messages each of the four own queues of consumer-a and consumer-b holds.
std::vector<int64_t> OwnQueueDepths(Session& session) {
  std::vector<int64_t> depths;
  for (const char* identity : {"consumer-a", "consumer-b"}) {
    for (Lane lane : {Lane::kChange, Lane::kResync})
      depths.push_back(ReadyMessages(session, ConsumerQueueName(identity, lane)));
  }
  return depths;
}

TEST_CASE(
    "a forward reaches only its holder's queue of its lane, and one to a consumer without a queue "
    "is returned") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("forward-route"));
  REQUIRE(session.Connect().ok());
  REQUIRE(vhost.SetUpSyncbus(session).ok());
  for (const char* identity : {"consumer-a", "consumer-b"})
    REQUIRE(session.Declare(ConsumerTopology(identity)).ok());

  Status sent = session.Publish(Forwarded(Received("change", "c1"), "consumer-a"), kBrokerTimeout);
  REQUIRE_MESSAGE(sent.ok(), sent.ToString());
  CHECK(OwnQueueDepths(session) == std::vector<int64_t>{1, 0, 0, 0});
  CHECK(ReadyMessages(session, WorkQueueName(Lane::kChange)) == 0);
  sent = session.Publish(Forwarded(Received("resync", "c3"), "consumer-b"), kBrokerTimeout);
  REQUIRE_MESSAGE(sent.ok(), sent.ToString());
  CHECK(OwnQueueDepths(session) == std::vector<int64_t>{1, 0, 0, 1});

  // No queue for that identity: basic.return, and no copy anywhere.
  Status returned =
      session.Publish(Forwarded(Received("change", "c2"), "consumer-gone"), kBrokerTimeout);
  CHECK(returned.code() == Code::kNotFound);
  CHECK(OwnQueueDepths(session) == std::vector<int64_t>{1, 0, 0, 1});

  Delivery got = *session.Get(ConsumerQueueName("consumer-a", Lane::kChange)).value();
  CHECK(got.message.body == "c1");
  CHECK(got.exchange == kForwardExchange);
  CHECK(got.routing_key == "change");
  CHECK(got.message.headers[kForwardToHeader] == "consumer-a");
  CHECK(HopsOf(got.message) == 1);
  CHECK(UnsettledDeliveries(got.message) == 2);
  REQUIRE(session.Ack(got.delivery_tag).ok());
}

TEST_CASE(
    "a forwarded change is delivered ahead of the holder's backlog of forwarded resyncs, both "
    "lanes consumed with the same prefetch") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("forward-lanes"));
  REQUIRE(session.Connect().ok());
  REQUIRE(vhost.SetUpSyncbus(session).ok());
  REQUIRE(session.Declare(ConsumerTopology("consumer-a")).ok());
  // A full resync forwarded 200 requests to consumer-a before an edit's change arrived.
  constexpr int kBacklog = 200;
  for (int i = 0; i < kBacklog; ++i) {
    REQUIRE(session
                .Publish(Forwarded(Received("resync", "r" + std::to_string(i)), "consumer-a"),
                         kBrokerTimeout)
                .ok());
  }
  REQUIRE(
      session.Publish(Forwarded(Received("change", "edit"), "consumer-a"), kBrokerTimeout).ok());

  // consumer-a takes its own queues as DeliveryLoop does, 20 unacked per queue.
  RabbitmqSession holder(vhost.Options("forward-lanes-holder"));
  REQUIRE(holder.Connect().ok());
  constexpr uint16_t kPrefetch = 20;
  for (Lane lane : {Lane::kChange, Lane::kResync})
    REQUIRE(holder.Consume(ConsumerQueueName("consumer-a", lane), kPrefetch).ok());
  int position = 0;
  for (int i = 1; i <= kPrefetch + 1 && position == 0; ++i) {
    Delivery d = NextOrFail(holder);
    if (d.message.body == "edit") position = i;
  }
  MESSAGE("the change came as delivery ", position, " of a backlog of ", kBacklog + 1);
  CHECK(position >= 1);  // with one queue per consumer it would be delivery 201
  CHECK(position <= kPrefetch + 1);
  holder.Close();
}

TEST_CASE(
    "a forward comes back to its lane, at once and counted when its holder gives it back "
    "unsettled, after the TTL when the holder never takes it, headers kept") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("forward-ttl"));
  REQUIRE(session.Connect().ok());
  TopologyOptions options;
  options.forward_ttl = seconds(1);
  REQUIRE(vhost.SetUpSyncbus(session, options).ok());
  REQUIRE(session.Declare(ConsumerTopology("consumer-a", options)).ok());

  for (Lane lane : {Lane::kChange, Lane::kResync}) {
    const std::string name = LaneName(lane);
    const std::string queue = ConsumerQueueName("consumer-a", lane);
    // change: the holder takes it and gives it back unsettled (it died holding it);
    // resync: the holder never takes it (it is gone).
    const bool returned = lane == Lane::kChange;
    CAPTURE(name);
    REQUIRE(
        session.Publish(Forwarded(Received(name, "c-" + name), "consumer-a"), kBrokerTimeout).ok());
    if (returned) {
      auto held = session.Get(queue);
      REQUIRE(held.ok());
      REQUIRE(held->has_value());
      REQUIRE(session.Nack((*held)->delivery_tag, true).ok());
    }

    const auto sent = std::chrono::steady_clock::now();
    std::string tag = *session.Consume(WorkQueueName(lane), 1);
    Delivery back = NextOrFail(session, milliseconds(15000));
    const double delay =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
    MESSAGE(name, ": back in its lane after ", delay, " s");
    CHECK(delay <= (returned ? 0.9 : 5.0));
    REQUIRE(session.Cancel(tag).ok());
    CHECK(back.message.body == "c-" + name);
    // Dead-lettered on its own routing key, the lane.
    CHECK(back.exchange == kWorkExchange);
    CHECK(back.routing_key == name);
    CHECK(back.message.headers[kForwardToHeader] == "consumer-a");
    CHECK(HopsOf(back.message) == 1);
    CHECK(AttemptOf(back.message) == 1);
    CHECK(back.message.headers[kClusterHeader] == "ns/c-" + name);
    CHECK(back.message.headers[kUnsettledHeader] == 2);
    const Json& deaths = back.message.headers[kDeathHeader];
    REQUIRE(deaths.is_array());
    CHECK(deaths[0]["reason"] == (returned ? "delivery_limit" : "expired"));
    CHECK(deaths[0]["queue"] == queue);
    CHECK(deaths[0]["routing-keys"] == Json::array({name}));
    // The holder's queue's own count of the unsettled delivery does not travel with the dead
    // letter on either version; its x-death entry (delivery limit 0: at the first return) does,
    // and counts as one unsettled delivery more.
    MESSAGE(name, ": headers back in the lane: ", back.message.headers.dump());
    CHECK_FALSE(back.message.headers.contains(kDeliveryCountHeader));
    CHECK(UnsettledDeliveries(back.message) == (returned ? 3 : 2));
    REQUIRE(session.Ack(back.delivery_tag).ok());
    CHECK(ReadyMessages(session, queue) == 0);
  }
}

TEST_CASE(
    "a forward whose holder's connection ends holding it comes back once in x-death and is "
    "counted once on both versions") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("forward-died"));
  REQUIRE(session.Connect().ok());
  REQUIRE(vhost.SetUpSyncbus(session).ok());
  REQUIRE(session.Declare(ConsumerTopology("consumer-a")).ok());
  const std::string queue = ConsumerQueueName("consumer-a", Lane::kChange);
  Delivery fresh = Received("change", "c1");
  fresh.message.headers = Json{{kClusterHeader, "ns/c1"}, {kLaneHeader, "change"}};
  REQUIRE(session.Publish(Forwarded(fresh, "consumer-a"), kBrokerTimeout).ok());
  {
    // The holder takes it and its connection ends, as when it crashes (no nack).
    RabbitmqSession holder(vhost.Options("forward-holder"));
    REQUIRE(holder.Connect().ok());
    REQUIRE(holder.Consume(queue, 10).ok());
    (void)NextOrFail(holder);
    holder.Close();
  }
  REQUIRE(session.Consume(WorkQueueName(Lane::kChange), 1).ok());
  Delivery back = NextOrFail(session, milliseconds(15000));
  MESSAGE("headers back in the lane: ", back.message.headers.dump());
  const Json& deaths = back.message.headers[kDeathHeader];
  REQUIRE(deaths.size() == 1);
  CHECK(deaths[0]["reason"] == "delivery_limit");
  CHECK(deaths[0]["queue"] == queue);
  CHECK(deaths[0]["count"] == 1);
  CHECK(ReturnsFromConsumers(back.message) == 1);
  // RabbitMQ 4.0 delivers it, the first time in its lane, as redelivered with the holder's
  // queue's count and x-last-death-* (3.10 and a nack above carry no count): one unsettled
  // delivery, which syncbus counts once.
  const bool four = vhost.env().version != "3.10";
  CHECK(back.redelivered == four);
  CHECK(back.message.headers.contains(kDeliveryCountHeader) == four);
  CHECK(back.message.headers.contains(kLastDeathQueueHeader) == four);
  CHECK(UnsettledDeliveries(back.message) == 1);
  // This consumer of the lane dies holding it as well (its connection ends, no ack): two
  // unsettled deliveries. 3.10 counts them (its lane's count, 1, and the entry). 4.0 shows its
  // lane's own count in place of the one the copy brought, 1 either way, so that the headers
  // tell only one. syncbus never lets it come to that: a request back from a holder's queue is
  // held back at its first delivery, before anything runs it, and the hold-back carries its
  // count on in x-syncbus-unsettled (route.cc).
  session.Close();
  REQUIRE(session.Connect().ok());
  REQUIRE(session.Consume(WorkQueueName(Lane::kChange), 1).ok());
  Delivery again = NextOrFail(session, milliseconds(15000));
  MESSAGE("headers after a consumer of the lane died holding it: ", again.message.headers.dump());
  CHECK(again.message.headers.value(kDeliveryCountHeader, 0) == 1);
  CHECK(UnsettledDeliveries(again.message) == (four ? 1 : 2));
  REQUIRE(session.Ack(again.delivery_tag).ok());
}

TEST_CASE("a holder's queue of forwards that expires drops what it still holds") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("forward-expiry"));
  REQUIRE(session.Connect().ok());
  // Inverted on purpose (syncbus keeps the expiry far longer than the TTL): the queue expires
  // while the message is still in it.
  TopologyOptions options;
  options.forward_ttl = seconds(60);
  options.consumer_queue_expiry = seconds(2);
  REQUIRE(vhost.SetUpSyncbus(session, options).ok());
  REQUIRE(session.Declare(ConsumerTopology("consumer-a", options)).ok());
  const std::string queue = ConsumerQueueName("consumer-a", Lane::kChange);
  REQUIRE(session.Publish(Forwarded(Received("change", "c1"), "consumer-a"), kBrokerTimeout).ok());
  CHECK(ReadyMessages(session, queue) == 1);

  // Polled through the management API: a passive declare does not count as a use of the queue,
  // but keeping it away from every AMQP touch is what a gone consumer does.
  CHECK(WaitFor([&] { return vhost.QueueStats(queue).status().code() == Code::kNotFound; },
                milliseconds(30000), milliseconds(250)));
  REQUIRE(session.Consume(WorkQueueName(Lane::kChange), 1).ok());
  auto more = session.Next(milliseconds(3000));
  REQUIRE(more.ok());
  CHECK_FALSE(more->has_value());  // dropped, not dead-lettered, on 3.10 and 4.0 alike
  CHECK(ReadyMessages(session, kDeadQueue) == 0);
  // A forward to it now is returned, as to a consumer that never had a queue.
  CHECK(session.Publish(Forwarded(Received("change", "c2"), "consumer-a"), kBrokerTimeout).code() ==
        Code::kNotFound);
}

}  // namespace
}  // namespace syncbus::amqp
