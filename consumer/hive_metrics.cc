#include "consumer/hive_metrics.h"

#include "common/time_format.h"

namespace syncbus::consumer {
namespace {

const prometheus::Histogram::BucketBoundaries kSetBuckets = {5, 10, 30, 60, 300, 600, 1800, 3600};
const prometheus::Histogram::BucketBoundaries kResourceBuckets = {0.5, 1, 3, 5, 10, 20, 30};
const prometheus::Histogram::BucketBoundaries kFirstSuccessBuckets = {60,   300,  600,  1200,
                                                                      1800, 2400, 3000, 3600};
const prometheus::Histogram::BucketBoundaries kReconcileBuckets = {0.001, 0.01, 0.1, 1,
                                                                   10,    30,   60,  120};

// The later of `t` and the time `text` names (RFC 3339; unparsable or empty: `t`).
WallTime Later(WallTime t, const std::string& text) {
  auto parsed = ParseRfc3339(text);
  return parsed.ok() && *parsed > t ? *parsed : t;
}

}  // namespace

HiveMetrics::HiveMetrics(prometheus::Registry& registry)
    : syncset_apply_(prometheus::BuildHistogram()
                         .Name("hive_syncset_apply_duration_seconds")
                         .Help("Time to first successfully apply syncset to a cluster")
                         .Register(registry)),
      selector_syncset_apply_(
          prometheus::BuildHistogram()
              .Name("hive_selectorsyncset_apply_duration_seconds")
              .Help("Time to first successfully apply each SelectorSyncSet to a new cluster. Does "
                    "not include results when cluster labels change post-install and new "
                    "syncsets match.")
              .Register(registry)),
      resources_applied_(
          prometheus::BuildCounter()
              .Name("hive_syncsetinstance_resources_applied_total")
              .Help("Counter incremented each time we sync a resource to a remote cluster, labeled "
                    "by type of apply and result.")
              .Register(registry)),
      resource_apply_(
          prometheus::BuildHistogram()
              .Name("hive_syncsetinstance_apply_duration_seconds")
              .Help("Time to apply individual resources in a syncset, labeled by type of apply and "
                    "result.")
              .Register(registry)),
      first_success_(prometheus::BuildHistogram()
                         .Name("hive_clustersync_first_success_duration_seconds")
                         .Help("Time between cluster install complete and all syncsets applied.")
                         .Register(registry)
                         .Add({}, kFirstSuccessBuckets)),
      reconcile_(
          prometheus::BuildHistogram()
              .Name("hive_controller_reconcile_seconds")
              .Help("Distribution of the length of time each controllers reconcile loop takes.")
              .Register(registry)) {}

void HiveMetrics::ResourceApplied(ApplyType type, bool ok, double seconds) {
  static constexpr const char* kTypes[] = {"apply", "createOrUpdate", "createOnly"};
  const auto t = static_cast<size_t>(type);
  Applied& series = applied_[t][ok ? 1 : 0];
  std::call_once(series.made, [&] {
    const prometheus::Labels labels = {{"type", kTypes[t]}, {"result", ok ? "success" : "error"}};
    series.count = &resources_applied_.Add(labels);
    series.seconds = &resource_apply_.Add(labels, kResourceBuckets);
  });
  series.count->Increment();
  series.seconds->Observe(seconds);
}

void HiveMetrics::SetFirstSuccess(const hive::ObjectMeta& set, const hive::ClusterDeployment& cd,
                                  bool cluster_succeeded_before, WallTime now) {
  WallTime start = Later(WallTime{}, set.creation_timestamp);
  start = Later(start, cd.installed_timestamp);
  if (const hive::Condition* c = cd.FindCondition("Unreachable"))
    start = Later(start, c->last_transition_time);
  double seconds = std::chrono::duration<double>(now - start).count();
  if (set.ns.empty()) {
    if (!cluster_succeeded_before)
      selector_syncset_apply_.Add({{"name", set.name}}, kSetBuckets).Observe(seconds);
    return;
  }
  auto group = set.annotations.find(hive::kSyncSetMetricsGroupAnnotation);
  std::string label =
      group != set.annotations.end() && !group->second.empty() ? group->second : "none";
  syncset_apply_.Add({{"group", label}}, kSetBuckets).Observe(seconds);
}

void HiveMetrics::ClusterFirstSuccess(const hive::ClusterDeployment& cd, WallTime when) {
  auto installed = ParseRfc3339(cd.installed_timestamp);
  if (!installed.ok()) return;
  first_success_.Observe(std::chrono::duration<double>(when - *installed).count());
}

void HiveMetrics::Reconciled(const char* outcome, double seconds) {
  reconcile_.Add({{"controller", "clustersync"}, {"outcome", outcome}}, kReconcileBuckets)
      .Observe(seconds);
}

}  // namespace syncbus::consumer
