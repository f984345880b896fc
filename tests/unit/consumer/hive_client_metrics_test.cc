#include "consumer/hive_client_metrics.h"

#include <limits>
#include <map>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <prometheus/registry.h>

#include "common/http/curl_transport.h"
#include "common/http/server.h"
#include "tests/support/metric_sample.h"

namespace syncbus::consumer {
namespace {

size_t Series(prometheus::Registry& registry, const std::string& family) {
  for (const auto& f : registry.Collect()) {
    if (f.name == family) return f.metric.size();
  }
  return 0;
}

TEST_CASE(
    "Hive's client metrics: the path reduced to group/version/resource as Hive's parsePath does") {
  CHECK(HiveClientResource("https://h:6443/api/v1/namespaces") == "core/v1/namespaces");
  CHECK(HiveClientResource("https://h:6443/api/v1/namespaces/ns") == "core/v1/namespaces");
  CHECK(HiveClientResource("https://h:6443/api/v1/namespaces/ns/configmaps") ==
        "core/v1/configmaps");
  CHECK(HiveClientResource("https://h:6443/api/v1/namespaces/ns/configmaps/x?fieldManager=y") ==
        "core/v1/configmaps");
  CHECK(HiveClientResource("https://h/apis/apps/v1/namespaces/ns/deployments/d/status") ==
        "apps/v1/deployments");
  CHECK(HiveClientResource("https://h/apis/apiextensions.k8s.io/v1/customresourcedefinitions/c") ==
        "apiextensions.k8s.io/v1/customresourcedefinitions");
  CHECK(HiveClientResource("https://h/apis/rbac.authorization.k8s.io/v1/clusterroles") ==
        "rbac.authorization.k8s.io/v1/clusterroles");
  // Discovery, and a server URL with a path of its own, do not reduce: Hive records nothing.
  CHECK_FALSE(HiveClientResource("https://h/api").has_value());
  CHECK_FALSE(HiveClientResource("https://h/api/v1").has_value());
  CHECK_FALSE(HiveClientResource("https://h/apis/apps/v1").has_value());
  CHECK_FALSE(
      HiveClientResource("https://h/clusters/c1/api/v1/namespaces/ns/configmaps").has_value());
  CHECK_FALSE(HiveClientResource("https://h").has_value());
}

TEST_CASE("Hive's client metrics: Go's status line") {
  CHECK(GoStatusLine(200) == "200 OK");
  CHECK(GoStatusLine(201) == "201 Created");
  CHECK(GoStatusLine(404) == "404 Not Found");
  CHECK(GoStatusLine(409) == "409 Conflict");
  CHECK(GoStatusLine(422) == "422 Unprocessable Entity");
  CHECK(GoStatusLine(429) == "429 Too Many Requests");
  CHECK(GoStatusLine(599) == "599 ");
}

TEST_CASE(
    "Hive's client metrics: each answered request by method, resource and status, with Hive's "
    "buckets") {
  auto server = http::Server::Start(
      {}, [](const http::ServerRequest& request, std::shared_ptr<http::ResponseWriter> w) {
        if (request.path.find("/missing") != std::string::npos) {
          w->Respond(404, {}, "{}");
        } else {
          w->Respond(200, {}, "{}");
        }
      });
  REQUIRE(server.ok());
  auto curl = http::CurlTransport::Create({});
  REQUIRE(curl.ok());
  std::shared_ptr<http::CurlTransport> inner = std::move(*curl);
  prometheus::Registry registry;
  HiveClientMetrics metered(inner, registry);
  const std::string base = "http://127.0.0.1:" + std::to_string((*server)->port());

  http::Request get;
  get.url = base + "/api/v1/namespaces/ns/configmaps/a";
  for (int i = 0; i < 2; ++i) REQUIRE(metered.Call(get).ok());
  http::Request patch;
  patch.method = "PATCH";
  patch.url = base + "/apis/apps/v1/namespaces/ns/deployments/missing";
  REQUIRE(metered.Call(patch).ok());
  http::Request discovery;
  discovery.url = base + "/apis/apps/v1";
  REQUIRE(metered.Call(discovery).ok());
  http::Request unanswered;
  unanswered.url = "http://127.0.0.1:1/api/v1/namespaces/ns/configmaps/a";
  CHECK_FALSE(metered.Call(unanswered).ok());

  const std::map<std::string, std::string> ok_get = {{"controller", "clustersync"},
                                                     {"method", "GET"},
                                                     {"resource", "core/v1/configmaps"},
                                                     {"remote", "true"},
                                                     {"status", "200 OK"}};
  const std::map<std::string, std::string> missing = {{"controller", "clustersync"},
                                                      {"method", "PATCH"},
                                                      {"resource", "apps/v1/deployments"},
                                                      {"remote", "true"},
                                                      {"status", "404 Not Found"}};
  CHECK(syncbus::testing::MetricSample(registry, "hive_kube_client_requests_total", ok_get) == 2);
  CHECK(syncbus::testing::MetricSample(registry, "hive_kube_client_request_seconds", ok_get) == 2);
  CHECK(syncbus::testing::MetricSample(registry, "hive_kube_client_requests_total", missing) == 1);
  CHECK(Series(registry, "hive_kube_client_requests_total") ==
        2);  // discovery and no answer: nothing
  for (const auto& f : registry.Collect()) {
    if (f.name != "hive_kube_client_request_seconds") continue;
    std::vector<double> bounds;
    for (const auto& b : f.metric.at(0).histogram.bucket) bounds.push_back(b.upper_bound);
    CHECK(bounds == std::vector<double>{0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 120,
                                        std::numeric_limits<double>::infinity()});
  }
}

}  // namespace
}  // namespace syncbus::consumer
