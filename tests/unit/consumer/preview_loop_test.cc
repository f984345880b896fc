// PreviewLoop on the in-memory broker: a request's clusters are previewed and answered, one reply
// per cluster, to the request's reply queue with its correlation id, and the request is acked
// after; a request nothing could answer is dropped, and a preview that throws becomes that
// cluster's error.
#include "consumer/preview_loop.h"

#include <mutex>
#include <set>
#include <stdexcept>

#include <doctest/doctest.h>

#include "common/bus/topology.h"
#include "tests/fakes/common/amqp/fake_session.h"
#include "tests/fakes/common/fake_clock.h"
#include "tests/support/metric_sample.h"

using namespace syncbus;
using namespace syncbus::consumer;
using namespace std::chrono_literals;

namespace {

struct PreviewHarness {
  FakeClock clock;
  amqp::FakeBroker broker{clock};
  amqp::FakeSession caller{broker, "syncbusctl"};
  amqp::FakeSession session{broker, "consumer-1/preview"};
  prometheus::Registry registry;
  std::mutex mu;
  std::set<std::string> previewed;  // clusters asked for, across the worker threads

  PreviewHarness() {
    REQUIRE(caller.Connect().ok());
    amqp::Topology topology = amqp::SyncbusTopology();
    topology.queues.push_back({"reply-1", false, Json::object()});
    REQUIRE(caller.Declare(topology).ok());
    REQUIRE(session.Connect().ok());
  }

  PreviewReply Preview(const std::string& id, const Json& set, const PreviewCluster& cluster) {
    {
      std::lock_guard lock(mu);
      previewed.insert(cluster.Key());
    }
    if (cluster.name == "explodes") throw std::runtime_error("type_error.302: bad set");
    PreviewReply reply;
    reply.preview_id = id;
    reply.cluster = cluster;
    ObjectPreview o;
    o.api_version = "v1";
    o.kind = "ConfigMap";
    o.ns = "default";
    o.name = set["metadata"]["name"].get<std::string>();
    o.outcome = ObjectOutcome::kCreated;
    reply.objects.push_back(o);
    return reply;
  }

  void Ask(const PreviewRequest& request, const std::string& reply_to = "reply-1") {
    amqp::Publication p;
    p.exchange = amqp::kWorkExchange;
    p.routing_key = "preview";
    p.message.body = EncodePreviewRequest(request);
    p.message.reply_to = reply_to;
    p.message.correlation_id = request.preview_id;
    REQUIRE(caller.Publish(p, 1s).ok());
  }
};

PreviewRequest PreviewOf(std::vector<std::string> clusters) {
  PreviewRequest r;
  r.preview_id = "preview-1";
  r.set = {{"apiVersion", "hive.openshift.io/v1"},
           {"kind", "SelectorSyncSet"},
           {"metadata", {{"name", "fleet"}}},
           {"spec", Json::object()}};
  for (const auto& c : clusters) r.clusters.push_back({c, c});
  return r;
}

}  // namespace

TEST_CASE(
    "every cluster of a request is answered on its reply queue, then the request is acked "
    "[concurrent]") {
  PreviewHarness h;
  PreviewLoop loop(
      {3}, h.session, [&](auto&&... a) { return h.Preview(a...); }, h.registry);
  REQUIRE(loop.Subscribe().ok());
  h.Ask(PreviewOf({"c1", "c2", "c3", "c4", "explodes"}));
  REQUIRE(loop.Step(1s).ok());
  CHECK(h.previewed ==
        std::set<std::string>{"c1/c1", "c2/c2", "c3/c3", "c4/c4", "explodes/explodes"});
  std::vector<amqp::Message> replies = h.broker.ReadyMessages("reply-1");
  REQUIRE(replies.size() == 5);
  std::vector<std::string> answered;
  for (const amqp::Message& m : replies) {
    CHECK(m.correlation_id == "preview-1");
    auto reply = DecodePreviewReply(m.body);
    REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
    answered.push_back(reply->cluster.name + (reply->error.empty() ? "" : ": " + reply->error));
  }
  // In the request's order; the preview that threw is its cluster's error, not a crash.
  CHECK(answered ==
        std::vector<std::string>{"c1", "c2", "c3", "c4",
                                 "explodes: the preview failed: type_error.302: bad set"});
  CHECK(h.broker.ReadyMessages(amqp::kPreviewQueue).empty());
  CHECK(h.broker.UnackedCount(amqp::kPreviewQueue) == 0);
  CHECK(syncbus::testing::MetricSample(h.registry, "syncbus_consumer_preview_clusters_total",
                                       {{"result", "previewed"}}) == 4);
  CHECK(syncbus::testing::MetricSample(h.registry, "syncbus_consumer_preview_clusters_total",
                                       {{"result", "error"}}) == 1);
}

TEST_CASE("a request nothing could answer is dropped, counted, and never previewed") {
  PreviewHarness h;
  PreviewLoop loop(
      {2}, h.session, [&](auto&&... a) { return h.Preview(a...); }, h.registry);
  REQUIRE(loop.Subscribe().ok());
  SUBCASE("it does not decode") {
    amqp::Publication p;
    p.exchange = amqp::kWorkExchange;
    p.routing_key = "preview";
    p.message.body = "{\"version\": 1";
    p.message.reply_to = "reply-1";
    REQUIRE(h.caller.Publish(p, 1s).ok());
  }
  SUBCASE("it names no reply queue") {
    h.Ask(PreviewOf({"c1"}), "");
  }
  REQUIRE(loop.Step(1s).ok());
  CHECK(h.previewed.empty());
  CHECK(h.broker.ReadyMessages("reply-1").empty());
  CHECK(h.broker.UnackedCount(amqp::kPreviewQueue) == 0);
  CHECK(h.broker.ReadyMessages(amqp::kPreviewQueue).empty());
  CHECK(syncbus::testing::MetricSample(h.registry,
                                       "syncbus_consumer_preview_requests_dropped_total", {}) == 1);
}

TEST_CASE("replies to a caller that has gone are dropped by the broker, and the request is done") {
  PreviewHarness h;
  PreviewLoop loop(
      {2}, h.session, [&](auto&&... a) { return h.Preview(a...); }, h.registry);
  REQUIRE(loop.Subscribe().ok());
  h.Ask(PreviewOf({"c1"}), "reply-gone");
  REQUIRE(loop.Step(1s).ok());
  CHECK(h.previewed.size() == 1);
  CHECK(h.broker.UnackedCount(amqp::kPreviewQueue) == 0);
}
