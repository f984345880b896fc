// Publishing with confirms on a real RabbitMQ 3.10: properties, pipelining, returns, nacks.
#include <doctest/doctest.h>

#include "common/amqp/field_table.h"
#include "common/amqp/session_impl.h"
#include "common/bus/topology.h"
#include "tests/support/session_helpers.h"
#include "tests/support/test_broker.h"

namespace syncbus::amqp {
namespace {

using std::chrono::milliseconds;
using namespace syncbus::testing;

TEST_CASE("a confirmed publish arrives with every property and nested header intact") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("roundtrip"));
  REQUIRE(session.Connect().ok());
  REQUIRE(session.Declare(SyncbusTopology()).ok());

  Publication p = Work("change", std::string("{\"cluster\":\"ns/c1\"}\0binary\xff", 28));
  p.message.content_type = "application/json";
  p.message.message_id = "msg-1";
  p.message.app_id = "syncbus-publisher";
  p.message.type = "sync";
  p.message.timestamp = 1767225600;
  p.message.persistent = true;
  p.message.headers = {
      {"x-syncbus-generation", 42},
      {"trace", {{"parent", "abc"}, {"hops", Json::array({1, 2, {{"deep", true}}})}}},
      {"when", TimestampValue(1767225601)},
      {"ratio", 0.5},
      {"nothing", nullptr},
  };
  Status published = session.Publish(p, kBrokerTimeout);
  REQUIRE_MESSAGE(published.ok(), published.ToString());

  auto got = session.Get(WorkQueueName(Lane::kChange));
  REQUIRE_MESSAGE(got.ok(), got.status().ToString());
  REQUIRE(got->has_value());
  const Delivery& d = **got;
  CHECK(d.exchange == kWorkExchange);
  CHECK(d.routing_key == "change");
  CHECK(d.queue == WorkQueueName(Lane::kChange));
  CHECK(!d.redelivered);
  CHECK(d.message.body == p.message.body);
  CHECK(d.message.content_type == "application/json");
  CHECK(d.message.message_id == "msg-1");
  CHECK(d.message.app_id == "syncbus-publisher");
  CHECK(d.message.type == "sync");
  CHECK(d.message.timestamp == 1767225600);
  CHECK(d.message.persistent);
  Json headers = d.message.headers;
  // A first delivery: RabbitMQ 3.10's quorum queues say 0, 4.0 leaves the header out.
  CHECK(headers.value("x-delivery-count", 0) == 0);
  headers.erase("x-delivery-count");
  CHECK(headers == p.message.headers);
  CHECK(session.Ack(d.delivery_tag).ok());
  CHECK(session.Inspect(WorkQueueName(Lane::kChange))->messages == 0);
}

TEST_CASE("bodies larger than a frame and empty bodies arrive intact") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("sizes"));
  REQUIRE(session.Connect().ok());
  Topology t;
  t.queues = {{"sizes", true, Json{{"x-queue-type", "quorum"}}}};
  REQUIRE(session.Declare(t).ok());
  std::string big(1 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 4096);
  std::vector<Publication> batch(3, Publication{"", "sizes", Message{}});
  batch[0].message.body = big;
  batch[1].message.body = "";
  batch[2].message.body = big.substr(0, 131072 - 8);  // exactly one full frame of payload
  for (const auto& r : session.PublishAll(batch, kBrokerTimeout))
    REQUIRE_MESSAGE(r.ok(), r.ToString());
  REQUIRE(session.Consume("sizes", 0).ok());
  for (const auto& p : batch) {
    auto d = session.Next(kBrokerTimeout);
    REQUIRE(d.ok());
    REQUIRE(d->has_value());
    CHECK((*d)->message.body.size() == p.message.body.size());
    CHECK((*d)->message.body == p.message.body);
  }
}

TEST_CASE("PublishAll pipelines 10,000 messages and every one is confirmed") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("bulk"));
  REQUIRE(session.Connect().ok());
  REQUIRE(session.Declare(SyncbusTopology()).ok());
  std::vector<Publication> batch;
  for (int i = 0; i < 10000; ++i) {
    batch.push_back(Work(i % 2 ? "change" : "resync", "cluster-" + std::to_string(i)));
  }
  auto results = session.PublishAll(batch, milliseconds(60000));
  REQUIRE(results.size() == batch.size());
  size_t ok = 0;
  for (const auto& r : results) ok += r.ok();
  CHECK(ok == batch.size());
  if (ok != batch.size()) {
    for (const auto& r : results) {
      if (!r.ok()) FAIL_CHECK(r.ToString());
      break;
    }
  }
  CHECK(session.Inspect(WorkQueueName(Lane::kChange))->messages == 5000);
  CHECK(session.Inspect(WorkQueueName(Lane::kResync))->messages == 5000);
}

TEST_CASE("an unroutable mandatory message is NotFound, others in the batch still succeed") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("returns"));
  REQUIRE(session.Connect().ok());
  REQUIRE(session.Declare(SyncbusTopology()).ok());

  Status lost = session.Publish(Work("nowhere", "x"), kBrokerTimeout);
  CHECK(lost.code() == Code::kNotFound);
  CHECK(lost.message().find("nowhere") != std::string::npos);
  CHECK(lost.message().find("NO_ROUTE") != std::string::npos);

  auto results = session.PublishAll(
      {Work("change", "a"), Work("nowhere", "b"), Work("resync", "c"), Work("nowhere", "d")},
      kBrokerTimeout);
  REQUIRE(results.size() == 4);
  CHECK(results[0].ok());
  CHECK(results[1].code() == Code::kNotFound);
  CHECK(results[2].ok());
  CHECK(results[3].code() == Code::kNotFound);

  Publication relaxed = Work("nowhere", "e");
  relaxed.mandatory = false;
  CHECK(session.Publish(relaxed, kBrokerTimeout).ok());
}

TEST_CASE("publishing to a missing exchange is NotFound and the session carries on") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("no-exchange"));
  REQUIRE(session.Connect().ok());
  REQUIRE(session.Declare(SyncbusTopology()).ok());
  Publication p = Work("change", "x");
  p.exchange = "no-such-exchange";
  Status s = session.Publish(p, kBrokerTimeout);
  CHECK(s.code() == Code::kNotFound);
  CHECK(s.message().find("no-such-exchange") != std::string::npos);
  CHECK(session.connected());
  CHECK(session.Publish(Work("change", "y"), kBrokerTimeout).ok());
}

TEST_CASE("reject-publish overflow nacks: kUnavailable") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("overflow"));
  REQUIRE(session.Connect().ok());
  Topology t;
  t.queues = {{"tiny", true, Json{{"x-max-length", 1}, {"x-overflow", "reject-publish"}}}};
  REQUIRE(session.Declare(t).ok());
  Publication p{"", "tiny", Message{}};
  p.message.body = "first";
  CHECK(session.Publish(p, kBrokerTimeout).ok());
  p.message.body = "second";
  Status full = session.Publish(p, kBrokerTimeout);
  CHECK(full.code() == Code::kUnavailable);
  CHECK(full.message().find("nack") != std::string::npos);
  CHECK(session.Inspect("tiny")->messages == 1);

  // Quorum work queues (max-length of syncbus's policy, from TopologyOptions) notice the
  // overflow after the message that crosses the limit: max_length + 1 messages fit when published
  // one by one.
  TopologyOptions options;
  options.max_length = 2;
  REQUIRE(vhost.SetUpSyncbus(session, options).ok());
  for (int i = 0; i < 3; ++i) {
    Status st = session.Publish(Work("change", std::to_string(i)), kBrokerTimeout);
    CHECK_MESSAGE(st.ok(), st.ToString());
  }
  CHECK(session.Publish(Work("change", "3"), kBrokerTimeout).code() == Code::kUnavailable);
  CHECK(session.Inspect(WorkQueueName(Lane::kChange))->messages == 3);
}

}  // namespace
}  // namespace syncbus::amqp
