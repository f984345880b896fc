// HubSnapshot: what the decision needs of some clusters, taken out of the HubCache under its lock
// (HubCache::Snapshot) and read without it. The hub objects are shared, immutable and reference
// counted: taking a snapshot copies a few pointers per cluster, and the cache may replace or drop
// an object meanwhile without touching the snapshot's. View() computes a cluster's desired state
// from the snapshot, outside any lock. A snapshot is immutable once taken: any number of threads
// may read it; it owns (shares) everything its views point into.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/bus/sync_message.h"
#include "common/clock.h"
#include "common/hive/desired_state.h"
#include "common/hive/types.h"
#include "publisher/sync_report.h"

namespace syncbus::publisher {

// A Secret as the publisher knows it: metadata only, never its data.
struct SecretMeta {
  std::string resource_version;
  std::optional<WallTime> written_at;  // creation or a managedFields entry, the latest; the hub's
};
using SecretMetas = std::map<std::string, SecretMeta>;  // "ns/name"

// One cluster's hub objects as the snapshot was taken.
struct ClusterInputs {
  std::string key;                                    // "namespace/name"
  std::shared_ptr<const hive::ClusterDeployment> cd;  // null: the cluster no longer exists
  std::optional<SyncReport> status;                   // of its ClusterSync
  std::optional<WallTime>
      lease_renewal;  // its ClusterSyncLease's renewTime (none: no lease, or none)
  // The SyncSets of the cluster's namespace, by name (whether they apply is View()'s business).
  std::vector<std::shared_ptr<const hive::SyncSet>> sync_sets;
  // The Secrets their secretMappings read, those that exist.
  SecretMetas sync_set_secrets;
  // The resourceVersion of the admin kubeconfig Secret ("" when unknown or absent).
  std::string kubeconfig_version;
};

// What the decision sees of one cluster; it points into the snapshot it came from and is valid
// while that lives.
struct ClusterView {
  const hive::ClusterDeployment* cd = nullptr;  // null: the cluster no longer exists
  const SyncReport* status = nullptr;           // of its ClusterSync
  std::optional<WallTime> lease_renewal;        // its ClusterSyncLease's renewTime
  // The desired state; its revision covers the versions of the Secrets its sets' secretMappings
  // read, so a changed source Secret changes the revision.
  hive::DesiredState desired;
  // Those Secrets, "ns/name" -> resourceVersion ("" for a missing one), sorted.
  hive::SecretVersions secrets;
  // The latest time any of them was written (creation or a managedFields entry), if known.
  std::optional<WallTime> secrets_written_at;
  // The resourceVersion of the cluster's admin kubeconfig Secret ("" when unknown: Secrets not
  // watched, or no such Secret).
  std::string kubeconfig_version;
  // How far the cache had got (list or last event per collection): requests carry it, and
  // consumers apply only from a mirror at least this new.
  HubVersions seen;
};

struct HubSnapshot {
  // How far the cache had got when the snapshot was taken.
  HubVersions seen;
  // Every SelectorSyncSet, by name, and the Secrets their secretMappings read (those that exist).
  std::vector<std::shared_ptr<const hive::SelectorSyncSet>> selector_sync_sets;
  SecretMetas selector_secrets;
  // The clusters asked for, in the order asked.
  std::vector<ClusterInputs> clusters;

  // The cluster's view: which sets apply, the Secrets they read, the desired state. Computed on
  // each call; `cluster` must be one of `clusters`.
  ClusterView View(const ClusterInputs& cluster) const;
};

// The Secret a secretMapping reads: a SyncSet's sourceRef defaults to the SyncSet's namespace
// (`set_ns`; "" for a SelectorSyncSet).
std::string SourceSecretKey(const hive::SecretMapping& mapping, const std::string& set_ns);

}  // namespace syncbus::publisher
