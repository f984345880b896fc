// Tests for the fleet generator: names, counts, and that every object passed the API's validation
// with the fields the pipeline relies on intact.
#include "tests/kubesim/fleet.h"

#include <set>

#include <doctest/doctest.h>

#include "common/base64.h"
#include "tests/kubesim/sim_simulation.h"
#include "tests/unit/kubesim/api_test_util.h"

namespace syncbus::kubesim {
namespace {

Json List(ApiServer& api, const std::string& path, const std::string& query = {}) {
  ApiResponse response = api.Call("GET", path, nullptr, "application/json", query);
  REQUIRE(response.status == 200);
  return Json::parse(response.body);
}

using testing::MakeSimulation;

TEST_CASE("Fleet names are zero-padded and stable") {
  CHECK(FleetClusterName(7, 12) == "cluster-0007");
  CHECK(FleetClusterName(999, 1000) == "cluster-0999");
  CHECK(FleetClusterName(42, 20000) == "cluster-00042");
  auto names = FleetClusterNames(3);
  CHECK(names == std::vector<std::string>{"cluster-0000", "cluster-0001", "cluster-0002"});
  FleetSpec spec;
  CHECK(FleetResourceNamespace(spec, 5) == "default");
  spec.namespaces_per_cluster = 3;
  CHECK(FleetResourceNamespace(spec, 5) == "sim-ns-02");
}

TEST_CASE("Fleet generation writes valid hub objects and seeds the targets") {
  FleetSpec fleet{.clusters = 3,
                  .syncsets = 2,
                  .selector_syncsets = 2,
                  .resources = 3,
                  .namespaces_per_cluster = 2};
  auto sim = MakeSimulation(fleet, "s3cret");
  auto summary = sim->GenerateFleet("http://sim.test:1234");
  REQUIRE_MESSAGE(summary.ok(), summary.status().ToString());
  CHECK(summary->clusters == 3);
  CHECK(summary->hub_objects == 2 + 3 * (3 + 2) + 2);  // syncbus's namespaces first
  CHECK(summary->target_namespaces == 3 * 2);
  CHECK(sim->hub().Call("GET", "/api/v1/namespaces/syncbus").status == 200);
  CHECK(sim->hub().Call("GET", "/api/v1/namespaces/syncbus-liveness").status == 200);
  CHECK(summary->ToString(fleet).find("3 clusters") != std::string::npos);

  ApiServer& hub = sim->hub();
  Json cds = List(hub, "/apis/hive.openshift.io/v1/clusterdeployments",
                  "labelSelector=syncbus.io%2Ffleet%3Dsim");
  REQUIRE(cds["items"].size() == 3);
  std::set<std::string> regions, tiers;
  for (const Json& cd : cds["items"]) {
    const std::string name = cd["metadata"]["name"];
    CHECK(cd["metadata"]["namespace"] == name);
    CHECK(cd["spec"]["installed"] == true);
    CHECK(cd["spec"]["clusterName"] == name);
    CHECK(cd["spec"]["baseDomain"] == "sim.syncbus.io");
    CHECK(cd["spec"]["platform"].contains("none"));
    const Json& meta = cd["spec"]["clusterMetadata"];
    CHECK(meta["adminKubeconfigSecretRef"]["name"] == name + "-admin-kubeconfig");
    CHECK_FALSE(meta["clusterID"].get<std::string>().empty());
    CHECK_FALSE(meta["infraID"].get<std::string>().empty());
    regions.insert(cd["metadata"]["labels"]["region"].get<std::string>());
    tiers.insert(cd["metadata"]["labels"]["tier"].get<std::string>());
    CHECK(cd["metadata"]["labels"].contains("cluster-index"));

    // The admin kubeconfig points at this cluster below the base URL, with the token.
    ApiResponse secret =
        hub.Call("GET", "/api/v1/namespaces/" + name + "/secrets/" + name + "-admin-kubeconfig");
    REQUIRE(secret.status == 200);
    auto kubeconfig =
        DecodeBase64(Json::parse(secret.body)["data"]["kubeconfig"].get<std::string>());
    REQUIRE(kubeconfig.has_value());
    CHECK(kubeconfig->find("server: \"http://sim.test:1234/clusters/" + name + "\"") !=
          std::string::npos);
    CHECK(kubeconfig->find("token: \"s3cret\"") != std::string::npos);

    // SyncSets reference their cluster and carry the resources.
    Json syncsets = List(hub, "/apis/hive.openshift.io/v1/namespaces/" + name + "/syncsets");
    REQUIRE(syncsets["items"].size() == 2);
    for (const Json& ss : syncsets["items"]) {
      CHECK(ss["metadata"]["name"].get<std::string>().rfind(name + "-ss-", 0) == 0);
      CHECK(ss["spec"]["clusterDeploymentRefs"][0]["name"] == name);
      REQUIRE(ss["spec"]["resources"].size() == 3);
      const Json& cm = ss["spec"]["resources"][1];
      CHECK(cm["kind"] == "ConfigMap");
      CHECK(cm["metadata"]["namespace"] == "sim-ns-01");
      CHECK(cm["data"].size() >= 3);
    }

    ApiServer* target = sim->cluster(name);
    REQUIRE(target != nullptr);
    std::set<std::string> namespaces;
    Json target_namespaces = List(*target, "/api/v1/namespaces");
    for (const Json& ns : target_namespaces["items"]) {
      namespaces.insert(ns["metadata"]["name"].get<std::string>());
    }
    for (const char* ns : {"default", "kube-system", "kube-public", "sim-ns-00", "sim-ns-01"}) {
      CHECK(namespaces.count(ns) == 1);
    }
  }
  CHECK(regions.size() == 3);

  Json selector_syncsets = List(hub, "/apis/hive.openshift.io/v1/selectorsyncsets");
  REQUIRE(selector_syncsets["items"].size() == 2);
  const Json& sss = selector_syncsets["items"][0];
  CHECK(sss["metadata"]["name"] == "fleet-sss-00");
  CHECK(sss["spec"]["clusterDeploymentSelector"]["matchLabels"]["syncbus.io/fleet"] == "sim");
  CHECK(sss["spec"]["resources"].size() == 3);
  CHECK(sss["spec"]["resources"][0]["metadata"]["name"] == "sss-00-cm-00");
}

TEST_CASE("Fleet generation reports the API's error when an object is refused") {
  FleetSpec fleet{.clusters = 2, .syncsets = 0, .selector_syncsets = 1, .resources = 1};
  auto sim = MakeSimulation(fleet);
  REQUIRE(sim->GenerateFleet("http://sim.test").ok());
  auto again = PopulateHub(sim->hub(), fleet, "http://sim.test", ClientAuth{});
  REQUIRE_FALSE(again.ok());
  CHECK(again.status().http_status() == 409);
  CHECK(again.status().message().find("cluster-0000") != std::string::npos);
  FleetSpec negative;
  negative.clusters = -1;
  CHECK(PopulateHub(sim->hub(), negative, "", ClientAuth{}).status().code() ==
        Code::kInvalidArgument);
}

TEST_CASE("Fleet generation with a host per cluster points each kubeconfig at <name>.localhost") {
  FleetSpec fleet{.clusters = 2, .syncsets = 0, .selector_syncsets = 0, .resources = 0};
  fleet.host_per_cluster = true;
  auto sim = MakeSimulation(fleet);
  REQUIRE(sim->GenerateFleet("http://127.0.0.1:4321").ok());
  ApiResponse secret = sim->hub().Call(
      "GET", "/api/v1/namespaces/cluster-0001/secrets/cluster-0001-admin-kubeconfig");
  REQUIRE(secret.status == 200);
  auto kubeconfig = DecodeBase64(Json::parse(secret.body)["data"]["kubeconfig"].get<std::string>());
  REQUIRE(kubeconfig.has_value());
  CHECK(kubeconfig->find("server: \"http://cluster-0001.localhost:4321/clusters/cluster-0001\"") !=
        std::string::npos);

  auto tls = MakeSimulation(fleet);
  auto refused = tls->GenerateFleet("https://127.0.0.1:4321");
  CHECK(refused.status().code() == Code::kInvalidArgument);
}

TEST_CASE("Fleet generation of 1000 clusters with 60 SelectorSyncSets") {
  FleetSpec fleet{.clusters = 1000, .syncsets = 0, .selector_syncsets = 60, .resources = 10};
  auto sim = MakeSimulation(fleet);
  auto summary = sim->GenerateFleet("http://127.0.0.1:1");
  REQUIRE(summary.ok());
  CHECK(summary->hub_objects == 2 + 1000 * 3 + 60);
  CHECK(sim->cluster_names().size() == 1000);
  CHECK(List(sim->hub(), "/apis/hive.openshift.io/v1/clusterdeployments")["items"].size() == 1000);
}

}  // namespace
}  // namespace syncbus::kubesim
