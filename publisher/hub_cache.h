// HubCache: the publisher's in-memory view of the hub (ClusterDeployments, SyncSets,
// SelectorSyncSets, ClusterSyncs, ClusterSyncLeases, and the versions of Secrets), fed by one
// reflector per resource, and the set of clusters whose decision may have changed ("dirty"),
// with which kind of edit made them dirty (a single edit or a bulk one, see DirtyEdits).
// Thread-safe: reflector threads write, the decision loop takes a HubSnapshot of the clusters it
// looks at (hub_snapshot.h) under the same lock and decides without it. Objects are kept as
// shared immutable values, so a snapshot copies pointers, never objects.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/bus/sync_message.h"
#include "common/clock.h"
#include "common/hive/desired_state.h"
#include "common/hive/types.h"
#include "common/json.h"
#include "publisher/hub_snapshot.h"

namespace syncbus::publisher {

enum class HubKind {
  kClusterDeployment,
  kSyncSet,
  kSelectorSyncSet,
  kClusterSync,
  kClusterSyncLease,
  kSecret
};
inline constexpr int kHubKinds = 6;
const char* HubKindName(HubKind kind);

// Which edits made the clusters of one TakeDirty() dirty. An edit of a SyncSet, a
// SelectorSyncSet or a source Secret that makes more clusters dirty than the cache's
// `bulk_edit_clusters` is a bulk edit (a fleet-wide rollout); any other edit of those, and every
// ClusterDeployment edit, is a single edit. Status and lease events and relists are neither.
struct DirtyEdits {
  std::set<std::string> bulk;    // made dirty by a bulk edit and by no single edit
  std::set<std::string> single;  // made dirty by a single edit (also by a bulk one, maybe)
};

class HubCache {
 public:
  // `bulk_edit_clusters`: publisher.bulkEditClusters (see DirtyEdits).
  explicit HubCache(size_t bulk_edit_clusters) : bulk_edit_clusters_(bulk_edit_clusters) {}

  // Reflector callbacks. Replace() is a full relist: objects absent from `items` are gone.
  // Objects that fail to parse are skipped and counted (invalid_objects()).
  void Replace(HubKind kind, const std::vector<Json>& items);
  void Upsert(HubKind kind, const Json& object);
  void Delete(HubKind kind, const Json& object);
  // The list behind the last Replace() of `kind` was at `resource_version` (bookmarks are not
  // reported: other watchers receive them at other times).
  void Listed(HubKind kind, const std::string& resource_version);

  // True once every kind has had its first Replace (the initial list).
  bool synced() const;

  // Waits until some cluster is dirty or `timeout` passes; returns the dirty keys (cleared), and
  // in `edits` (optional) which of them single and bulk edits made dirty.
  std::vector<std::string> TakeDirty(std::chrono::milliseconds timeout,
                                     DirtyEdits* edits = nullptr);
  void MarkDirty(const std::string& cluster_key);
  void MarkAllDirty();
  // Wakes TakeDirty without marking anything (shutdown).
  void Wake();

  // The hub objects the decision needs of these clusters, as they are now. Holds the lock only to
  // copy pointers (and a few Secret versions); the views are computed from the snapshot later.
  HubSnapshot Snapshot(const std::vector<std::string>& cluster_keys) const;

  size_t cluster_count() const;
  uint64_t invalid_objects() const;
  std::vector<std::string> AllClusterKeys() const;

 private:
  void MarkDirtyLocked(const std::string& key);
  void MarkAllDirtyLocked();
  // Marks the clusters one edit makes dirty, as a single or a bulk edit by their number.
  void MarkEditedLocked(const std::set<std::string>& keys);
  // The clusters an edit of these objects makes dirty, added to `out`.
  void DirtyForSyncSet(const hive::SyncSet& ss, std::set<std::string>& out) const;
  void DirtyForSelectorSyncSet(const hive::SelectorSyncSet& sss, std::set<std::string>& out) const;
  void DirtyForSecret(const std::string& secret_key, std::set<std::string>& out) const;
  Status ApplyUpsertLocked(HubKind kind, const Json& object);
  void ApplyDeleteLocked(HubKind kind, const Json& object);

  // The Secrets of `secrets_` that these mappings read, added to `out`.
  void FindSecretsLocked(const std::vector<hive::SecretMapping>& mappings,
                         const std::string& set_ns, SecretMetas& out) const;

  template <typename T>
  using Shared = std::shared_ptr<const T>;

  mutable std::mutex mu_;
  std::condition_variable dirty_cv_;
  std::map<std::string, Shared<hive::ClusterDeployment>> cds_;
  std::map<std::string, Shared<hive::SyncSet>> syncsets_;                   // "ns/name"
  std::map<std::string, Shared<hive::SelectorSyncSet>> selector_syncsets_;  // "name"
  std::map<std::string, Shared<hive::ClusterSync>> statuses_;
  std::map<std::string, Shared<hive::ClusterSyncLease>> leases_;
  SecretMetas secrets_;  // only metadata: never the data
  const size_t bulk_edit_clusters_;
  std::set<std::string> dirty_;
  DirtyEdits edits_;  // of the dirty clusters
  bool woken_ = false;
  bool replacing_ = false;  // inside Replace(): per-object dirty marking is skipped
  bool listed_[kHubKinds] = {};
  std::string versions_[kHubKinds];  // the last list's or event's resourceVersion
  uint64_t invalid_ = 0;
};

}  // namespace syncbus::publisher
