#include "common/bus/sync_message.h"

#include <doctest/doctest.h>

#include "common/kube/resource_version.h"
#include "tests/fakes/common/fake_clock.h"

using namespace syncbus;

namespace {
SyncRequest Sample() {
  SyncRequest r;
  r.cluster_namespace = "cluster-0001";
  r.cluster_name = "cluster-0001";
  r.revision = "0123456789abcdef0123456789abcdef";
  r.lane = amqp::Lane::kResync;
  r.reason = "startup";
  r.full_reapply = true;
  r.enqueued_at = "2026-01-01T00:00:00.000Z";
  return r;
}
}  // namespace

TEST_CASE("sync request encodes and decodes losslessly") {
  SyncRequest r = Sample();
  auto decoded = DecodeSyncRequest(EncodeSyncRequest(r));
  REQUIRE(decoded.ok());
  CHECK(*decoded == r);
}

TEST_CASE("sync request decoding names what is wrong") {
  struct Case {
    const char* body;
    const char* expect;
  };
  Case cases[] = {
      {"not json", "not valid JSON"},
      {"[1]", "not a JSON object"},
      {R"({"cluster":{}})", "missing field \"version\""},
      {R"({"version":2})", "unsupported version 2"},
      {R"({"version":"1"})", "must be an integer"},
      {R"({"version":1})", "\"cluster\" must be an object"},
      {R"({"version":1,"cluster":{"namespace":"a"}})", "missing field \"name\""},
      {R"({"version":1,"cluster":{"namespace":"A_B","name":"x"}})", "not a valid namespace"},
      {R"({"version":1,"cluster":{"namespace":"a","name":"x/y"}})", "not a valid object name"},
      {R"({"version":1,"cluster":{"namespace":"a","name":"x"},"revision":"r","lane":"fast","reason":"x","enqueuedAt":"2026-01-01T00:00:00Z"})",
       "unknown lane"},
      {R"({"version":1,"cluster":{"namespace":"a","name":"x"},"revision":"r","lane":"change","reason":"x","enqueuedAt":"yesterday"})",
       "enqueuedAt"},
      {R"({"version":1,"cluster":{"namespace":"a","name":"x"},"revision":"r","lane":"change","reason":"x","fullReapply":"yes","enqueuedAt":"2026-01-01T00:00:00Z"})",
       "fullReapply"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.body);
    auto r = DecodeSyncRequest(c.body);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == Code::kInvalidArgument);
    CHECK(r.status().message().find(c.expect) != std::string::npos);
  }
  std::string huge(kMaxSyncRequestBytes + 1, ' ');
  CHECK(DecodeSyncRequest(huge).status().message().find("exceeds the limit") != std::string::npos);
}

TEST_CASE("AMQP message carries readable properties and headers") {
  FakeClock clock;
  amqp::Message m = ToAmqpMessage(Sample(), "syncbus-publisher", "id-1", clock.WallNow());
  CHECK(m.content_type == "application/json");
  CHECK(m.message_id == "id-1");
  CHECK(m.app_id == "syncbus-publisher");
  CHECK(m.persistent);
  CHECK(m.timestamp == 1767225600);
  CHECK(m.headers[kClusterHeader] == "cluster-0001/cluster-0001");
  CHECK(m.headers[kAttemptHeader] == 0);
  CHECK(m.headers[kLaneHeader] == "resync");
}

TEST_CASE("DNS name rules") {
  CHECK(IsDnsLabel("cluster-1"));
  CHECK_FALSE(IsDnsLabel("-a"));
  CHECK_FALSE(IsDnsLabel("a-"));
  CHECK_FALSE(IsDnsLabel("Upper"));
  CHECK_FALSE(IsDnsLabel(std::string(64, 'a')));
  CHECK(IsDnsSubdomain("a.b-c.d"));
  CHECK_FALSE(IsDnsSubdomain("a..b"));
  CHECK_FALSE(IsDnsSubdomain(""));
}

TEST_CASE("sync request carries what the publisher saw, and rejects a malformed one") {
  SyncRequest r = Sample();
  r.seen = {"101", "202", "303"};
  auto decoded = DecodeSyncRequest(EncodeSyncRequest(r));
  REQUIRE(decoded.ok());
  CHECK(decoded->seen == r.seen);

  // Absent (an older publisher): empty, not an error.
  CHECK(EncodeSyncRequest(Sample()).find("seen") == std::string::npos);
  auto without = DecodeSyncRequest(EncodeSyncRequest(Sample()));
  REQUIRE(without.ok());
  CHECK(without->seen.empty());

  Json body = Json::parse(EncodeSyncRequest(r));
  body["seen"] = {{"syncSets", "12a"}};
  auto bad = DecodeSyncRequest(body.dump());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("seen.syncSets") != std::string::npos);
  body["seen"] = "101";
  CHECK_FALSE(DecodeSyncRequest(body.dump()).ok());
  body["seen"] = {{"clusterDeployments", 101}};
  CHECK_FALSE(DecodeSyncRequest(body.dump()).ok());
  body["seen"] = {{"selectorSyncSets", "1"}};
  auto partial = DecodeSyncRequest(body.dump());
  REQUIRE(partial.ok());
  CHECK(partial->seen.selector_sync_sets == "1");
  CHECK(partial->seen.sync_sets.empty());
}

TEST_CASE("sync request carries the kubeconfig Secret's version when the publisher knows it") {
  SyncRequest r = Sample();
  r.kubeconfig_version = "4711";
  auto decoded = DecodeSyncRequest(EncodeSyncRequest(r));
  REQUIRE(decoded.ok());
  CHECK(decoded->kubeconfig_version == "4711");
  CHECK(EncodeSyncRequest(Sample()).find("kubeconfigVersion") == std::string::npos);
  auto without = DecodeSyncRequest(EncodeSyncRequest(Sample()));
  REQUIRE(without.ok());
  CHECK(without->kubeconfig_version.empty());

  Json body = Json::parse(EncodeSyncRequest(r));
  body["kubeconfigVersion"] = "v1";
  auto bad = DecodeSyncRequest(body.dump());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("kubeconfigVersion") != std::string::npos);
  body["kubeconfigVersion"] = 4711;
  CHECK_FALSE(DecodeSyncRequest(body.dump()).ok());
}

TEST_CASE(
    "resourceVersions compare as etcd revisions, and anything else never counts as new enough") {
  CHECK(kube::ResourceVersionAtLeast("10", "9"));
  CHECK(kube::ResourceVersionAtLeast("10", "10"));
  CHECK_FALSE(kube::ResourceVersionAtLeast("9", "10"));  // not string order
  CHECK(kube::ResourceVersionAtLeast("", ""));
  CHECK(kube::ResourceVersionAtLeast("5", ""));
  CHECK_FALSE(kube::ResourceVersionAtLeast("", "5"));
  CHECK_FALSE(kube::ResourceVersionAtLeast("abc", "5"));
  CHECK_FALSE(kube::ResourceVersionAtLeast("-5", "1"));
  CHECK_FALSE(kube::ResourceVersionAtLeast("99999999999999999999999", "1"));
}
