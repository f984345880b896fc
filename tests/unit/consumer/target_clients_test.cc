#include "consumer/target_clients.h"

#include <doctest/doctest.h>

#include "tests/unit/consumer/apply_test_fixture.h"

using namespace syncbus;
using namespace syncbus::consumer;

namespace {

std::string Kubeconfig(const std::string& server) {
  return "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
         "clusters: [{name: c, cluster: {server: '" +
         server +
         "'}}]\n"
         "users: [{name: u, user: {token: t}}]\n"
         "contexts: [{name: c, context: {cluster: c, user: u}}]\n";
}

}  // namespace

TEST_CASE(
    "target clients: cached per cluster, rebuilt on a new kubeconfig, least recently used "
    "dropped") {
  consumer::testing::ApplyFixture f;
  TargetClients targets(f.transport, 0, /*capacity=*/2);
  auto a = targets.Get("ns/a", "kubeconfig", Kubeconfig("https://a.example:6443"));
  REQUIRE(a.ok());
  auto again = targets.Get("ns/a", "kubeconfig", Kubeconfig("https://a.example:6443"));
  REQUIRE(again.ok());
  CHECK(again->client == a->client);
  CHECK(again->mapper == a->mapper);

  auto moved = targets.Get("ns/a", "kubeconfig", Kubeconfig("https://a2.example:6443"));
  REQUIRE(moved.ok());
  CHECK(moved->client != a->client);  // the Secret changed: a new client

  auto b = targets.Get("ns/b", "kubeconfig", Kubeconfig("https://b.example:6443"));
  REQUIRE(b.ok());
  CHECK(targets.Get("ns/a", "kubeconfig", Kubeconfig("https://a2.example:6443"))->client ==
        moved->client);
  // a was used last, so c's arrival drops b.
  REQUIRE(targets.Get("ns/c", "kubeconfig", Kubeconfig("https://c.example:6443")).ok());
  CHECK(targets.size() == 2);
  CHECK(targets.Get("ns/a", "kubeconfig", Kubeconfig("https://a2.example:6443"))->client ==
        moved->client);
  CHECK(targets.Get("ns/b", "kubeconfig", Kubeconfig("https://b.example:6443"))->client !=
        b->client);
  CHECK(b->client != nullptr);  // a caller's references outlive the eviction

  CHECK(targets.Get("ns/d", "kubeconfig", "not: [a kubeconfig").status().code() ==
        Code::kInvalidArgument);
}

TEST_CASE("a kept client is trusted for its Secret until a sync fails or the Secret changes") {
  consumer::testing::ApplyFixture f;
  TargetClients targets(f.transport, 0);
  CHECK_FALSE(targets.Trusted("ns/a", "kubeconfig").has_value());  // never built
  auto a = targets.Get("ns/a", "kubeconfig", Kubeconfig("https://a.example:6443"));
  REQUIRE(a.ok());
  auto kept = targets.Trusted("ns/a", "kubeconfig");
  REQUIRE(kept.has_value());
  CHECK(kept->client == a->client);
  CHECK_FALSE(targets.Trusted("ns/a", "other-secret").has_value());  // the CD names another one
  targets.Distrust("ns/a");
  CHECK_FALSE(targets.Trusted("ns/a", "kubeconfig").has_value());
  CHECK(targets.KubeconfigSecret("ns/a") == "kubeconfig");  // still remembered: read it early
  // Reading the Secret again (same kubeconfig) keeps the client and trusts it again.
  auto again = targets.Get("ns/a", "kubeconfig", Kubeconfig("https://a.example:6443"));
  REQUIRE(again.ok());
  CHECK(again->client == a->client);
  CHECK(targets.Trusted("ns/a", "kubeconfig").has_value());
  targets.Distrust("ns/unknown");  // harmless
}

TEST_CASE("a kept client is not trusted once the request knows a newer version of its Secret") {
  consumer::testing::ApplyFixture f;
  TargetClients targets(f.transport, 0, /*capacity=*/1);
  auto a = targets.Get("ns/a", "kubeconfig", Kubeconfig("https://a.example:6443"),
                       std::chrono::seconds(30), {}, "100");
  REQUIRE(a.ok());
  CHECK(targets.Trusted("ns/a", "kubeconfig", std::chrono::seconds(30), {}, "")
            .has_value());  // unknown
  CHECK(targets.Trusted("ns/a", "kubeconfig", std::chrono::seconds(30), {}, "99")
            .has_value());  // older
  CHECK(targets.Trusted("ns/a", "kubeconfig", std::chrono::seconds(30), {}, "100").has_value());
  CHECK_FALSE(
      targets.Trusted("ns/a", "kubeconfig", std::chrono::seconds(30), {}, "101").has_value());
  // Read again at the new version: trusted for it.
  REQUIRE(targets
              .Get("ns/a", "kubeconfig", Kubeconfig("https://a2.example:6443"),
                   std::chrono::seconds(30), {}, "101")
              .ok());
  auto now = targets.Trusted("ns/a", "kubeconfig", std::chrono::seconds(30), {}, "101");
  REQUIRE(now.has_value());
  CHECK(now->client->config().server == "https://a2.example:6443");

  // A kubeconfig read without a version is not trusted against a known one.
  REQUIRE(targets.Get("ns/b", "kubeconfig", Kubeconfig("https://b.example:6443"))
              .ok());  // drops a, kept
  CHECK_FALSE(targets.Trusted("ns/b", "kubeconfig", std::chrono::seconds(30), {}, "5").has_value());
  // A dropped cluster's kept kubeconfig: the same rule.
  CHECK(targets.kept_kubeconfigs() == 1);
  CHECK_FALSE(
      targets.Trusted("ns/a", "kubeconfig", std::chrono::seconds(30), {}, "102").has_value());
  auto rebuilt = targets.Trusted("ns/a", "kubeconfig", std::chrono::seconds(30), {}, "101");
  REQUIRE(rebuilt.has_value());
  CHECK(rebuilt->client->config().server == "https://a2.example:6443");
}

TEST_CASE(
    "a dropped cluster's trusted kubeconfig is kept: its client is rebuilt without the Secret") {
  consumer::testing::ApplyFixture f;
  TargetClients targets(f.transport, 0, /*capacity=*/1);
  auto a = targets.Get("ns/a", "kubeconfig", Kubeconfig("https://a.example:6443"));
  REQUIRE(a.ok());
  REQUIRE(targets.Get("ns/b", "kubeconfig", Kubeconfig("https://b.example:6443")).ok());  // drops a
  CHECK(targets.size() == 1);
  CHECK(targets.kept_kubeconfigs() == 1);
  CHECK_FALSE(targets.Trusted("ns/a", "other-secret").has_value());  // the CD names another one
  auto rebuilt = targets.Trusted("ns/a", "kubeconfig");
  REQUIRE(rebuilt.has_value());
  CHECK(rebuilt->client != a->client);  // a new client (and discovery) ...
  CHECK(rebuilt->client->config().server ==
        "https://a.example:6443");         // ... from the kept kubeconfig
  CHECK(targets.kept_kubeconfigs() == 1);  // a is live again; b was dropped and kept
  CHECK(targets.Trusted("ns/b", "kubeconfig").has_value());

  // A distrusted cluster's kubeconfig is not kept: its next sync reads the Secret.
  targets.Distrust("ns/a");
  REQUIRE(targets.Get("ns/c", "kubeconfig", Kubeconfig("https://c.example:6443")).ok());  // drops b
  targets.Distrust("ns/b");
  CHECK_FALSE(targets.Trusted("ns/b", "kubeconfig").has_value());
}

TEST_CASE("kept kubeconfigs are bounded: ten times the client capacity") {
  consumer::testing::ApplyFixture f;
  TargetClients targets(f.transport, 0, /*capacity=*/1);
  for (int i = 0; i < 15; ++i) {
    REQUIRE(
        targets.Get("ns/c" + std::to_string(i), "kubeconfig", Kubeconfig("https://c.example:6443"))
            .ok());
  }
  CHECK(targets.size() == 1);
  CHECK(targets.kept_kubeconfigs() == 10);
  CHECK_FALSE(targets.Trusted("ns/c0", "kubeconfig").has_value());  // the oldest went first
  CHECK(targets.Trusted("ns/c13", "kubeconfig").has_value());
}
