// Hive's clustersync metrics, under Hive's names, labels and buckets, so that the dashboards and
// alerts of a Hive fleet keep working once syncbus applies its sets (beside syncbus's own
// syncbus_consumer_* metrics):
//   hive_syncset_apply_duration_seconds{group}: first success of a SyncSet on a cluster;
//   hive_selectorsyncset_apply_duration_seconds{name}: the same of a SelectorSyncSet, only before
//     the cluster's first full success;
//   hive_syncsetinstance_resources_applied_total{type,result} and
//     hive_syncsetinstance_apply_duration_seconds{type,result}: each resource or secretMapping;
//   hive_clustersync_first_success_duration_seconds: from install to every set applied;
//   hive_controller_reconcile_seconds{controller="clustersync",outcome}: each sync.
// Thread-safe.
#pragma once

#include <mutex>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "common/clock.h"
#include "common/hive/types.h"

namespace syncbus::consumer {

class HiveMetrics {
 public:
  explicit HiveMetrics(prometheus::Registry& registry);

  // Hive's applyBehavior label values ("apply", "createOrUpdate", "createOnly").
  enum class ApplyType { kApply, kCreateOrUpdate, kCreateOnly };
  void ResourceApplied(ApplyType type, bool ok, double seconds);
  // A set's first success on a cluster at `now`: measured from the latest of the set's creation,
  // the cluster's install and its Unreachable condition's last transition. A SelectorSyncSet
  // counts only while the cluster has not had its first full success.
  void SetFirstSuccess(const hive::ObjectMeta& set, const hive::ClusterDeployment& cd,
                       bool cluster_succeeded_before, WallTime now);
  // The cluster's first full success (status.firstSuccessTime) at `when`.
  void ClusterFirstSuccess(const hive::ClusterDeployment& cd, WallTime when);
  // One sync: "no-op" (skipped), "clustersync-created" or "full-sync", as Hive's reconciles.
  void Reconciled(const char* outcome, double seconds);

 private:
  // The series of one (type, result), made at its first use (as Hive's vectors: nothing is
  // exported before) and then kept, not looked up by labels on every apply.
  struct Applied {
    std::once_flag made;
    prometheus::Counter* count = nullptr;
    prometheus::Histogram* seconds = nullptr;
  };

  prometheus::Family<prometheus::Histogram>& syncset_apply_;
  prometheus::Family<prometheus::Histogram>& selector_syncset_apply_;
  prometheus::Family<prometheus::Counter>& resources_applied_;
  prometheus::Family<prometheus::Histogram>& resource_apply_;
  prometheus::Histogram& first_success_;
  prometheus::Family<prometheus::Histogram>& reconcile_;
  Applied applied_[3][2];  // [ApplyType][ok]
};

}  // namespace syncbus::consumer
