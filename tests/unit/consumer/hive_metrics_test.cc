#include "consumer/hive_metrics.h"

#include <limits>
#include <map>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <prometheus/registry.h>

#include "common/time_format.h"

namespace syncbus::consumer {
namespace {

const prometheus::MetricFamily* Family(const std::vector<prometheus::MetricFamily>& all,
                                       const std::string& name) {
  for (const auto& f : all) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// The series of `family` with exactly these labels (null if none).
const prometheus::ClientMetric* Series(const std::vector<prometheus::MetricFamily>& all,
                                       const std::string& family,
                                       const std::map<std::string, std::string>& labels) {
  const prometheus::MetricFamily* f = Family(all, family);
  if (f == nullptr) return nullptr;
  for (const auto& m : f->metric) {
    std::map<std::string, std::string> got;
    for (const auto& l : m.label) got[l.name] = l.value;
    if (got == labels) return &m;
  }
  return nullptr;
}

std::vector<double> Bounds(const prometheus::ClientMetric& m) {
  std::vector<double> out;
  for (const auto& b : m.histogram.bucket) out.push_back(b.upper_bound);
  return out;
}

std::vector<double> WithInf(std::vector<double> v) {
  v.push_back(std::numeric_limits<double>::infinity());
  return v;
}

WallTime At(const char* text) {
  return *ParseRfc3339(text);
}

hive::ClusterDeployment RunningCd() {
  hive::ClusterDeployment cd;
  cd.meta.name = "c";
  cd.meta.ns = "c";
  cd.installed_timestamp = "2024-01-01T00:10:00Z";
  hive::Condition unreachable;
  unreachable.type = "Unreachable";
  unreachable.status = "False";
  unreachable.last_transition_time = "2024-01-01T00:20:00Z";
  cd.conditions.push_back(unreachable);
  return cd;
}

TEST_CASE("Hive's metrics: names, labels and buckets of Hive's clustersync") {
  prometheus::Registry registry;
  HiveMetrics metrics(registry);
  metrics.ResourceApplied(HiveMetrics::ApplyType::kApply, true, 0.2);
  metrics.ResourceApplied(HiveMetrics::ApplyType::kCreateOnly, false, 4);
  metrics.Reconciled("full-sync", 0.5);

  hive::ObjectMeta ss;
  ss.name = "s";
  ss.ns = "c";
  ss.creation_timestamp = "2024-01-01T00:00:00Z";
  // From the latest of the set's creation, the install and the Unreachable transition.
  metrics.SetFirstSuccess(ss, RunningCd(), false, At("2024-01-01T00:21:40Z"));
  ss.annotations[hive::kSyncSetMetricsGroupAnnotation] = "platform";
  ss.creation_timestamp = "2024-01-01T00:30:00Z";
  metrics.SetFirstSuccess(ss, RunningCd(), true, At("2024-01-01T00:30:07Z"));
  hive::ObjectMeta sss;
  sss.name = "everywhere";
  metrics.SetFirstSuccess(sss, RunningCd(), false, At("2024-01-01T00:20:30Z"));
  metrics.SetFirstSuccess(sss, RunningCd(), true,
                          At("2024-01-01T00:20:30Z"));  // after the cluster's first success: not
  metrics.ClusterFirstSuccess(RunningCd(), At("2024-01-01T00:15:00Z"));

  auto all = registry.Collect();
  const auto* applied = Series(all, "hive_syncsetinstance_resources_applied_total",
                               {{"type", "apply"}, {"result", "success"}});
  REQUIRE(applied != nullptr);
  CHECK(applied->counter.value == 1);
  REQUIRE(Series(all, "hive_syncsetinstance_resources_applied_total",
                 {{"type", "createOnly"}, {"result", "error"}}) != nullptr);
  const auto* apply_seconds = Series(all, "hive_syncsetinstance_apply_duration_seconds",
                                     {{"type", "createOnly"}, {"result", "error"}});
  REQUIRE(apply_seconds != nullptr);
  CHECK(Bounds(*apply_seconds) == WithInf({0.5, 1, 3, 5, 10, 20, 30}));
  CHECK(apply_seconds->histogram.sample_sum == 4);

  const auto* none = Series(all, "hive_syncset_apply_duration_seconds", {{"group", "none"}});
  REQUIRE(none != nullptr);
  CHECK(Bounds(*none) == WithInf({5, 10, 30, 60, 300, 600, 1800, 3600}));
  CHECK(none->histogram.sample_sum == 100);  // from the Unreachable transition at 00:20:00
  const auto* grouped = Series(all, "hive_syncset_apply_duration_seconds", {{"group", "platform"}});
  REQUIRE(grouped != nullptr);
  CHECK(grouped->histogram.sample_sum == 7);  // from the set's creation at 00:30:00

  const auto* selector =
      Series(all, "hive_selectorsyncset_apply_duration_seconds", {{"name", "everywhere"}});
  REQUIRE(selector != nullptr);
  CHECK(selector->histogram.sample_count == 1);
  CHECK(selector->histogram.sample_sum == 30);
  CHECK(Bounds(*selector) == WithInf({5, 10, 30, 60, 300, 600, 1800, 3600}));

  const auto* first = Series(all, "hive_clustersync_first_success_duration_seconds", {});
  REQUIRE(first != nullptr);
  CHECK(first->histogram.sample_sum == 300);  // from installedTimestamp
  CHECK(Bounds(*first) == WithInf({60, 300, 600, 1200, 1800, 2400, 3000, 3600}));

  const auto* reconcile = Series(all, "hive_controller_reconcile_seconds",
                                 {{"controller", "clustersync"}, {"outcome", "full-sync"}});
  REQUIRE(reconcile != nullptr);
  CHECK(Bounds(*reconcile) == WithInf({0.001, 0.01, 0.1, 1, 10, 30, 60, 120}));
}

}  // namespace
}  // namespace syncbus::consumer
