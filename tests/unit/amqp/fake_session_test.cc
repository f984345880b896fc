#include "tests/fakes/common/amqp/fake_session.h"

#include <thread>

#include <doctest/doctest.h>

#include "common/bus/topology.h"
#include "tests/fakes/common/fake_clock.h"

namespace syncbus::amqp {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr milliseconds kTimeout{1000};

Publication Pub(std::string exchange, std::string routing_key, std::string body,
                Json headers = Json::object()) {
  Publication p;
  p.exchange = std::move(exchange);
  p.routing_key = std::move(routing_key);
  p.message.body = std::move(body);
  p.message.message_id = p.message.body;
  p.message.headers = std::move(headers);
  return p;
}

struct Fixture {
  FakeClock clock;
  FakeBroker broker{clock};
  FakeSession session{broker, "test"};

  Fixture() { REQUIRE(session.Connect().ok()); }

  Delivery NextOrFail() {
    auto d = session.Next(kTimeout);
    REQUIRE(d.ok());
    REQUIRE(d->has_value());
    return **d;
  }
  size_t Ready(const std::string& queue) { return broker.ReadyMessages(queue).size(); }
};

Topology Simple() {
  Topology t;
  t.exchanges = {{"direct.x", "direct"},
                 {"fanout.x", "fanout"},
                 {"topic.x", "topic"},
                 {"headers.x", "headers"}};
  t.queues = {{"a"}, {"b"}, {"c"}};
  t.bindings = {
      {"direct.x", "a", "red"},
      {"direct.x", "b", "blue"},
      {"fanout.x", "a", ""},
      {"fanout.x", "b", "ignored"},
      {"topic.x", "a", "cluster.*.sync"},
      {"topic.x", "b", "cluster.#"},
      {"headers.x", "a", "", Json{{"x-match", "all"}, {"tier", "5s"}, {"lane", "change"}}},
      {"headers.x", "b", "", Json{{"x-match", "any"}, {"tier", "5s"}, {"lane", "change"}}},
      {"headers.x", "c", "", Json{{"x-match", "all-with-x"}, {"x-tier", "30s"}}},
  };
  return t;
}

TEST_CASE("exchanges route like RabbitMQ: direct, fanout, topic, headers, default") {
  Fixture f;
  REQUIRE(f.session.Declare(Simple()).ok());

  CHECK(f.session.Publish(Pub("direct.x", "red", "1"), kTimeout).ok());
  CHECK(f.Ready("a") == 1);
  CHECK(f.Ready("b") == 0);

  CHECK(f.session.Publish(Pub("fanout.x", "anything", "2"), kTimeout).ok());
  CHECK(f.Ready("a") == 2);
  CHECK(f.Ready("b") == 1);

  CHECK(f.session.Publish(Pub("topic.x", "cluster.c1.sync", "3"), kTimeout).ok());
  CHECK(f.Ready("a") == 3);
  CHECK(f.Ready("b") == 2);
  CHECK(f.session.Publish(Pub("topic.x", "cluster", "4"), kTimeout).ok());  // '#' matches none
  CHECK(f.Ready("a") == 3);
  CHECK(f.Ready("b") == 3);

  // all: both keys; any: one of them.
  CHECK(f.session.Publish(Pub("headers.x", "", "5", {{"tier", "5s"}, {"lane", "change"}}), kTimeout)
            .ok());
  CHECK(f.Ready("a") == 4);
  CHECK(f.Ready("b") == 4);
  CHECK(f.session.Publish(Pub("headers.x", "", "6", {{"tier", "5s"}}), kTimeout).ok());
  CHECK(f.Ready("a") == 4);
  CHECK(f.Ready("b") == 5);

  // all-with-x compares x- keys; a mismatch does not route.
  CHECK(f.session.Publish(Pub("headers.x", "", "7", {{"x-tier", "30s"}}), kTimeout).ok());
  CHECK(f.Ready("c") == 1);
  CHECK(f.session.Publish(Pub("headers.x", "", "8", {{"x-tier", "5s"}}), kTimeout).code() ==
        Code::kNotFound);
  CHECK(f.Ready("c") == 1);

  // The default exchange routes by queue name.
  CHECK(f.session.Publish(Pub("", "c", "9"), kTimeout).ok());
  CHECK(f.Ready("c") == 2);
}

TEST_CASE("headers exchange with x-match all ignores x- keys, as RabbitMQ 3.10 does") {
  Fixture f;
  Topology t;
  t.exchanges = {{"h", "headers"}};
  t.queues = {{"q"}};
  t.bindings = {{"h", "q", "", Json{{"x-match", "all"}, {"x-tier", "5s"}}}};
  REQUIRE(f.session.Declare(t).ok());
  CHECK(f.session.Publish(Pub("h", "", "1", {{"x-tier", "6m"}}), kTimeout).ok());
  CHECK(f.Ready("q") == 1);
}

TEST_CASE("unroutable and missing-exchange publishes fail like confirms would") {
  Fixture f;
  REQUIRE(f.session.Declare(Simple()).ok());
  Publication p = Pub("direct.x", "green", "x");
  CHECK(f.session.Publish(p, kTimeout).code() == Code::kNotFound);
  p.mandatory = false;
  CHECK(f.session.Publish(p, kTimeout).ok());
  CHECK(f.session.Publish(Pub("nope", "red", "x"), kTimeout).code() == Code::kNotFound);

  auto results = f.session.PublishAll(
      {Pub("direct.x", "red", "1"), Pub("direct.x", "green", "2"), Pub("direct.x", "blue", "3")},
      kTimeout);
  REQUIRE(results.size() == 3);
  CHECK(results[0].ok());
  CHECK(results[1].code() == Code::kNotFound);
  CHECK(results[2].ok());
}

TEST_CASE("declarations are idempotent and a clash is a conflict naming the argument") {
  Fixture f;
  Topology t = SyncbusTopology();
  REQUIRE(f.session.Declare(t).ok());
  REQUIRE(f.session.Declare(t).ok());

  Topology clash;
  clash.queues = {t.queues[0]};
  clash.queues[0].arguments["x-max-length"] = 5;
  Status s = f.session.Declare(clash);
  CHECK(s.code() == Code::kConflict);
  CHECK(s.message().find(clash.queues[0].name) != std::string::npos);
  CHECK(s.message().find("x-max-length") != std::string::npos);

  Topology exchange_clash;
  exchange_clash.exchanges = {{kWorkExchange, "fanout"}};
  s = f.session.Declare(exchange_clash);
  CHECK(s.code() == Code::kConflict);
  CHECK(s.message().find("type") != std::string::npos);

  Topology dangling;
  dangling.bindings = {{kWorkExchange, "missing", "x"}};
  CHECK(f.session.Declare(dangling).code() == Code::kNotFound);
}

TEST_CASE("retry tiers wait out their TTL on the clock and come back with x-death") {
  Fixture f;
  TopologyOptions options;
  options.retry_tiers = {seconds(5), seconds(30)};
  REQUIRE(f.session.Declare(SyncbusTopology(options)).ok());
  const std::string work = WorkQueueName(Lane::kResync);

  Publication p = Pub(kRetryExchange, "resync", "cluster-1", {{kRetryTierHeader, "5s"}});
  REQUIRE(f.session.Publish(p, kTimeout).ok());
  CHECK(f.Ready(RetryQueueName(seconds(5))) == 1);
  CHECK(f.Ready(RetryQueueName(seconds(30))) == 0);  // the tier header selects one queue

  f.clock.Advance(milliseconds(4999));
  CHECK(f.Ready(work) == 0);
  f.clock.Advance(milliseconds(1));
  REQUIRE(f.Ready(work) == 1);

  REQUIRE(f.session.Consume(work, 10).ok());
  Delivery d = f.NextOrFail();
  CHECK(d.routing_key == "resync");
  CHECK(d.exchange == kWorkExchange);  // republished through the dead-letter exchange
  CHECK(d.message.body == "cluster-1");
  const Json& death = d.message.headers["x-death"];
  REQUIRE(death.size() == 1);
  CHECK(death[0]["count"] == 1);
  CHECK(death[0]["reason"] == "expired");
  CHECK(death[0]["queue"] == RetryQueueName(seconds(5)));
  CHECK(death[0]["routing-keys"] == Json::array({"resync"}));
  CHECK(death[0]["time"].contains("$timestamp"));
  CHECK(d.message.headers["x-first-death-queue"] == RetryQueueName(seconds(5)));

  // A second round through the same tier counts up.
  Publication again = Pub(kRetryExchange, "resync", "cluster-1", d.message.headers);
  REQUIRE(f.session.Publish(again, kTimeout).ok());
  REQUIRE(f.session.Ack(d.delivery_tag).ok());
  f.clock.Advance(seconds(5));
  Delivery d2 = f.NextOrFail();
  CHECK(d2.message.headers["x-death"].size() == 1);
  CHECK(d2.message.headers["x-death"][0]["count"] == 2);
}

TEST_CASE("quorum delivery limit (syncbus's policy) parks a poison message in syncbus.dead") {
  Fixture f;
  TopologyOptions options;
  options.delivery_limit = 2;
  REQUIRE(f.session.Declare(SyncbusTopology(options)).ok());
  f.broker.SetPolicies(SyncbusTopology(options).policies);
  const std::string work = WorkQueueName(Lane::kChange);
  REQUIRE(f.session.Publish(Pub(kWorkExchange, "change", "poison"), kTimeout).ok());
  REQUIRE(f.session.Consume(work, 1).ok());

  for (int delivery = 1; delivery <= 3; ++delivery) {
    Delivery d = f.NextOrFail();
    CHECK(d.redelivered == (delivery > 1));
    if (delivery > 1) CHECK(d.message.headers["x-delivery-count"] == delivery - 1);
    REQUIRE(f.session.Nack(d.delivery_tag, true).ok());
  }
  auto none = f.session.Next(kTimeout);
  REQUIRE(none.ok());
  CHECK(!none->has_value());
  auto dead = f.broker.ReadyMessages(kDeadQueue);
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].body == "poison");
  CHECK(dead[0].headers["x-death"][0]["reason"] == "delivery_limit");
  CHECK(dead[0].headers["x-death"][0]["queue"] == work);
  CHECK(dead[0].headers["x-first-death-reason"] == "delivery_limit");
}

TEST_CASE("nack without requeue dead-letters as rejected, ack removes") {
  Fixture f;
  REQUIRE(f.session.Declare(SyncbusTopology()).ok());
  const std::string work = WorkQueueName(Lane::kChange);
  REQUIRE(f.session.Publish(Pub(kWorkExchange, "change", "1"), kTimeout).ok());
  REQUIRE(f.session.Publish(Pub(kWorkExchange, "change", "2"), kTimeout).ok());
  REQUIRE(f.session.Consume(work, 0).ok());
  Delivery d1 = f.NextOrFail();
  Delivery d2 = f.NextOrFail();
  CHECK(d1.message.body == "1");
  CHECK(d2.message.body == "2");
  CHECK(d1.queue == work);
  CHECK(f.broker.UnackedCount(work) == 2);
  REQUIRE(f.session.Reject(d1.delivery_tag, false).ok());
  REQUIRE(f.session.Ack(d2.delivery_tag).ok());
  CHECK(f.broker.UnackedCount(work) == 0);
  auto dead = f.broker.ReadyMessages(kDeadQueue);
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].headers["x-death"][0]["reason"] == "rejected");
  CHECK(f.session.Ack(d2.delivery_tag).code() == Code::kInvalidArgument);
}

TEST_CASE("prefetch bounds unacked deliveries per consumer") {
  Fixture f;
  REQUIRE(f.session.Declare(SyncbusTopology()).ok());
  const std::string work = WorkQueueName(Lane::kResync);
  for (int i = 0; i < 5; ++i) {
    REQUIRE(f.session.Publish(Pub(kWorkExchange, "resync", std::to_string(i)), kTimeout).ok());
  }
  REQUIRE(f.session.Consume(work, 2).ok());
  Delivery a = f.NextOrFail();
  f.NextOrFail();
  auto third = f.session.Next(kTimeout);
  REQUIRE(third.ok());
  CHECK(!third->has_value());
  REQUIRE(f.session.Ack(a.delivery_tag).ok());
  CHECK(f.NextOrFail().message.body == "2");
  auto info = f.session.Inspect(work);
  REQUIRE(info.ok());
  CHECK(info->messages == 2);
  CHECK(info->consumers == 1);
}

TEST_CASE("requeued messages return to their place, flagged redelivered") {
  Fixture f;
  REQUIRE(f.session.Declare(SyncbusTopology()).ok());
  const std::string work = WorkQueueName(Lane::kResync);
  for (int i = 0; i < 3; ++i) {
    REQUIRE(f.session.Publish(Pub(kWorkExchange, "resync", std::to_string(i)), kTimeout).ok());
  }
  REQUIRE(f.session.Consume(work, 0).ok());
  Delivery first = f.NextOrFail();
  CHECK(!first.redelivered);
  REQUIRE(f.session.Nack(first.delivery_tag, true).ok());
  Delivery again = f.NextOrFail();
  CHECK(again.message.body == "0");
  CHECK(again.redelivered);
}

TEST_CASE("reject-publish overflow (max-length of syncbus's policy) nacks the publish") {
  Fixture f;
  TopologyOptions options;
  options.max_length = 1;
  REQUIRE(f.session.Declare(SyncbusTopology(options)).ok());
  f.broker.SetPolicies(SyncbusTopology(options).policies);
  // Quorum queues take one message past the limit before refusing.
  CHECK(f.session.Publish(Pub(kWorkExchange, "change", "1"), kTimeout).ok());
  CHECK(f.session.Publish(Pub(kWorkExchange, "change", "2"), kTimeout).ok());
  Status full = f.session.Publish(Pub(kWorkExchange, "change", "3"), kTimeout);
  CHECK(full.code() == Code::kUnavailable);
  CHECK(full.message().find("syncbus.work.change") != std::string::npos);
  CHECK(f.Ready(WorkQueueName(Lane::kChange)) == 2);

  // Classic queues refuse at the limit.
  Topology classic;
  classic.queues = {{"tiny", true, Json{{"x-max-length", 1}, {"x-overflow", "reject-publish"}}}};
  REQUIRE(f.session.Declare(classic).ok());
  CHECK(f.session.Publish(Pub("", "tiny", "1"), kTimeout).ok());
  CHECK(f.session.Publish(Pub("", "tiny", "2"), kTimeout).code() == Code::kUnavailable);
}

TEST_CASE("classic queue drop-head overflow dead-letters the oldest as maxlen") {
  Fixture f;
  Topology t;
  t.exchanges = {{"dlx", "fanout"}};
  t.queues = {{"small", true, Json{{"x-max-length", 1}, {"x-dead-letter-exchange", "dlx"}}},
              {"parking"}};
  t.bindings = {{"dlx", "parking", ""}};
  REQUIRE(f.session.Declare(t).ok());
  REQUIRE(f.session.Publish(Pub("", "small", "old"), kTimeout).ok());
  REQUIRE(f.session.Publish(Pub("", "small", "new"), kTimeout).ok());
  REQUIRE(f.Ready("small") == 1);
  CHECK(f.broker.ReadyMessages("small")[0].body == "new");
  auto parked = f.broker.ReadyMessages("parking");
  REQUIRE(parked.size() == 1);
  CHECK(parked[0].headers["x-death"][0]["reason"] == "maxlen");
}

TEST_CASE("per-message expiration is honoured and recorded as original-expiration") {
  Fixture f;
  Topology t;
  t.exchanges = {{"dlx", "fanout"}};
  t.queues = {{"q", true, Json{{"x-dead-letter-exchange", "dlx"}}}, {"parking"}};
  t.bindings = {{"dlx", "parking", ""}};
  REQUIRE(f.session.Declare(t).ok());
  Publication p = Pub("", "q", "m");
  p.message.expiration = "1500";
  REQUIRE(f.session.Publish(p, kTimeout).ok());
  f.clock.Advance(milliseconds(1499));
  CHECK(f.Ready("parking") == 0);
  f.clock.Advance(milliseconds(1));
  auto parked = f.broker.ReadyMessages("parking");
  REQUIRE(parked.size() == 1);
  CHECK(parked[0].expiration.empty());
  CHECK(parked[0].headers["x-death"][0]["original-expiration"] == "1500");
}

TEST_CASE("a dropped connection requeues unacked messages and stale tags are refused") {
  Fixture f;
  REQUIRE(f.session.Declare(SyncbusTopology()).ok());
  const std::string work = WorkQueueName(Lane::kChange);
  REQUIRE(f.session.Publish(Pub(kWorkExchange, "change", "m"), kTimeout).ok());
  REQUIRE(f.session.Consume(work, 1).ok());
  Delivery d = f.NextOrFail();

  f.broker.DropConnections();
  CHECK(!f.session.connected());
  auto next = f.session.Next(kTimeout);
  CHECK(next.status().code() == Code::kUnavailable);
  CHECK(f.session.Publish(Pub(kWorkExchange, "change", "x"), kTimeout).code() ==
        Code::kUnavailable);

  REQUIRE(f.session.Connect().ok());
  CHECK(f.session.Ack(d.delivery_tag).code() == Code::kUnavailable);
  REQUIRE(f.session.Consume(work, 1).ok());
  Delivery again = f.NextOrFail();
  CHECK(again.message.body == "m");
  CHECK(again.redelivered);
  CHECK(again.delivery_tag != d.delivery_tag);
  CHECK(f.session.Ack(again.delivery_tag).ok());
}

TEST_CASE("an unavailable broker refuses connections until it is back") {
  Fixture f;
  f.broker.SetAvailable(false);
  CHECK(!f.session.connected());
  CHECK(f.session.Connect().code() == Code::kUnavailable);
  CHECK(f.broker.LiveConnections() == 0);
  f.broker.SetAvailable(true);
  CHECK(f.session.Connect().ok());
  CHECK(f.broker.LiveConnections() == 1);
  f.session.Close();
  CHECK(f.broker.LiveConnections() == 0);
}

TEST_CASE("deleting a consumed queue cancels the consumer and ends the session") {
  Fixture f;
  REQUIRE(f.session.Declare(SyncbusTopology()).ok());
  const std::string work = WorkQueueName(Lane::kResync);
  REQUIRE(f.session.Consume(work, 1).ok());
  f.broker.DeleteQueue(work);
  auto next = f.session.Next(kTimeout);
  CHECK(next.status().code() == Code::kUnavailable);
  CHECK(next.status().message().find(work) != std::string::npos);
  CHECK(!f.session.connected());
  CHECK(!f.broker.HasQueue(work));
}

TEST_CASE("a blocked connection times out publishes") {
  Fixture f;
  REQUIRE(f.session.Declare(SyncbusTopology()).ok());
  f.broker.SetBlocked(true);
  CHECK(f.session.Publish(Pub(kWorkExchange, "change", "m"), kTimeout).code() == Code::kTimeout);
  f.broker.SetBlocked(false);
  CHECK(f.session.Publish(Pub(kWorkExchange, "change", "m"), kTimeout).ok());
}

TEST_CASE("a stale publishing channel is refused until renewed, its deliveries staying") {
  Fixture f;
  REQUIRE(f.session.Declare(Simple()).ok());
  REQUIRE(f.session.Publish(Pub("direct.x", "red", "held"), kTimeout).ok());
  REQUIRE(f.session.Consume("a", 1).ok());
  Delivery held = f.NextOrFail();
  FakeSession other(f.broker, "other");
  f.broker.StalePublishChannels("b");
  REQUIRE(other.Connect().ok());  // opened after: served
  CHECK(other.Publish(Pub("direct.x", "blue", "fresh"), kTimeout).ok());
  for (int i = 0; i < 3; ++i) {
    CHECK(f.session.Publish(Pub("direct.x", "blue", "refused"), kTimeout).code() ==
          Code::kUnavailable);
  }
  CHECK(f.session.Publish(Pub("direct.x", "red", "other queue"), kTimeout).ok());
  REQUIRE(f.session.RenewPublishChannel().ok());
  CHECK(f.session.Publish(Pub("direct.x", "blue", "taken"), kTimeout).ok());
  CHECK(f.Ready("b") == 2);
  CHECK(f.broker.UnackedCount("a") == 1);  // the delivery stayed with the session
  CHECK(f.session.Ack(held.delivery_tag).ok());
  CHECK(f.broker.UnackedCount("a") == 0);
}

TEST_CASE("basic.get and inspect see exact counts, missing queues are NotFound") {
  Fixture f;
  REQUIRE(f.session.Declare(SyncbusTopology()).ok());
  const std::string work = WorkQueueName(Lane::kChange);
  REQUIRE(f.session.Publish(Pub(kWorkExchange, "change", "m"), kTimeout).ok());
  auto got = f.session.Get(work);
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  CHECK((*got)->message.body == "m");
  CHECK((*got)->queue == work);
  CHECK((*got)->message.headers["x-delivery-count"] == 0);  // basic.get on a quorum queue
  auto empty = f.session.Get(work);
  REQUIRE(empty.ok());
  CHECK(!empty->has_value());
  CHECK(f.session.Inspect(work)->messages == 0);
  REQUIRE(f.session.Nack((*got)->delivery_tag, true).ok());
  CHECK(f.session.Inspect(work)->messages == 1);
  CHECK(f.session.Inspect("missing").status().code() == Code::kNotFound);
  CHECK(f.session.Get("missing").status().code() == Code::kNotFound);
  CHECK(f.session.Consume("missing", 1).status().code() == Code::kNotFound);
  CHECK(f.session.connected());
}

TEST_CASE("two sessions share one broker, a consumer thread wakes on another's publish") {
  FakeClock clock;
  FakeBroker broker(clock, FakeBroker::Options{.wait_in_real_time = true});
  FakeSession publisher(broker, "publisher");
  FakeSession consumer(broker, "consumer");
  REQUIRE(publisher.Connect().ok());
  REQUIRE(consumer.Connect().ok());
  REQUIRE(publisher.Declare(SyncbusTopology()).ok());
  REQUIRE(consumer.Consume(WorkQueueName(Lane::kChange), 1).ok());

  Result<std::optional<Delivery>> received = std::optional<Delivery>();
  std::thread t([&] { received = consumer.Next(std::chrono::seconds(30)); });
  REQUIRE(publisher.Publish(Pub(kWorkExchange, "change", "hello"), kTimeout).ok());
  t.join();
  REQUIRE(received.ok());
  REQUIRE(received->has_value());
  CHECK((*received)->message.body == "hello");
  CHECK(consumer.Ack((*received)->delivery_tag).ok());
  CHECK(publisher.Ack((*received)->delivery_tag).code() == Code::kInvalidArgument);
}

}  // namespace
}  // namespace syncbus::amqp

namespace syncbus::amqp {

TEST_CASE("a reply queue is named by the broker and reached through the default exchange") {
  FakeClock clock;
  FakeBroker broker{clock};
  FakeSession session{broker, "test"};
  REQUIRE(session.Connect().ok());
  auto first = session.DeclareReplyQueue();
  auto second = session.DeclareReplyQueue();
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  CHECK(*first != *second);
  Publication p;
  p.routing_key = *first;
  p.message.body = "answer";
  p.message.reply_to = "elsewhere";
  p.message.correlation_id = "pv-1";
  REQUIRE(session.Publish(p, std::chrono::seconds(1)).ok());
  auto got = session.Get(*first);
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  CHECK((*got)->message.correlation_id == "pv-1");
  CHECK((*got)->message.reply_to == "elsewhere");
}

}  // namespace syncbus::amqp
