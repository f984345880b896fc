#include "ctl/fleet_progress.h"

#include <doctest/doctest.h>

#include "ctl/metrics_scrape.h"
#include "tests/fakes/common/kube/simulated_hub.h"

using namespace syncbus;
using namespace syncbus::ctl;

namespace {
Json Cd(const std::string& name, bool installed = true) {
  return {
      {"metadata", {{"name", name}, {"namespace", name}, {"labels", {{"fleet", "a"}}}}},
      {"spec", {{"installed", installed}}},
      // Reachable, as Hive's unreachable controller marks a running cluster (no condition:
      // skipped).
      {"status", {{"conditions", Json::array({{{"type", "Unreachable"}, {"status", "False"}}})}}}};
}
Json Sss(const std::string& name, int gen) {
  return {{"metadata", {{"name", name}, {"generation", gen}}},
          {"spec", {{"clusterDeploymentSelector", {{"matchLabels", {{"fleet", "a"}}}}}}}};
}
Json Cs(const std::string& name, int gen, const char* result) {
  return {
      {"metadata", {{"name", name}, {"namespace", name}}},
      {"status",
       {{"selectorSyncSets", Json::array({{{"name", "s"},
                                           {"observedGeneration", gen},
                                           {"result", result},
                                           {"lastTransitionTime", "2026-01-01T00:00:00Z"}}})}}}};
}
}  // namespace

TEST_CASE("fleet progress counts synced, failing, pending and skipped clusters") {
  auto p = ComputeProgress({Cd("a"), Cd("b"), Cd("c"), Cd("d"), Cd("e", false)}, {}, {Sss("s", 2)},
                           {Cs("a", 2, "Success"), Cs("b", 2, "Failure"), Cs("c", 1, "Success")});
  CHECK(p.clusters == 4);
  CHECK(p.synced == 1);
  CHECK(p.failing == 1);
  CHECK(p.pending == 2);  // c is at an old generation, d has no status
  CHECK(p.skipped == 1);
  CHECK(p.failing_clusters == std::vector<std::string>{"b/b"});
  CHECK_FALSE(p.done());
  auto all = ComputeProgress({Cd("a")}, {}, {Sss("s", 2)}, {Cs("a", 2, "Success")});
  CHECK(all.done());
}

TEST_CASE("fleet progress read from the hub counts the clusters of every list page") {
  // 1,201 clusters: three pages of ClusterDeployments and of SyncSets (500 a page).
  fakes::SimulatedHub simulated({.clusters = 1201, .syncsets = 1, .resources = 1});
  auto p = ReadProgress(*simulated.hub, "");
  REQUIRE(p.ok());
  CHECK(p->clusters == 1201);
  CHECK(p->pending == 1201);  // nothing synced: each one's SyncSet has no status yet
  CHECK(p->states.size() == 1201);
  CHECK(p->states.back().detail == "SyncSet cluster-1200-ss-00 not yet at generation 1");
}

TEST_CASE("metric sums filter by name and labels") {
  const char* page =
      "# HELP syncbus_consumer_resources_applied_total x\n"
      "syncbus_consumer_resources_applied_total{result=\"success\"} 120\n"
      "syncbus_consumer_resources_applied_total{result=\"failure\"} 3\n"
      "syncbus_consumer_resources_applied_total_extra{result=\"success\"} 1000\n";
  CHECK(SumMetric(page, "syncbus_consumer_resources_applied_total", "result=\"success\"") == 120);
  CHECK(SumMetric(page, "syncbus_consumer_resources_applied_total", "") == 123);
  CHECK(SumMetric(page, "missing", "") == 0);
}
