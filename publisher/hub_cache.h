// HubCache: the publisher's in-memory view of the hub (ClusterDeployments, SyncSets,
// SelectorSyncSets, ClusterSyncs, ClusterSyncLeases, and the versions of Secrets), fed by one
// reflector per resource, and the set of clusters whose decision may have changed ("dirty"),
// with which kind of edit made them dirty (a single edit or a bulk one, see DirtyEdits).
// Thread-safe: reflector threads write, the decision loop takes a HubSnapshot of the clusters it
// looks at (hub_snapshot.h) under the same lock and decides without it. Objects are kept as
// shared immutable values, so a snapshot copies pointers, never objects. A list's pages are
// parsed as they arrive (HubCache::Listing), so a collection is never held as JSON all at once,
// and of each object the cache keeps what the decision reads: not a set's resources, of a
// ClusterSync its SyncReport, not a ClusterDeployment's other conditions (hub_cache.cc).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
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
  template <typename T>
  using Shared = std::shared_ptr<const T>;
  // A ClusterSyncLease's spec.renewTime in 8 bytes: WallTime::min() (no clock reads it) for none.
  struct RenewTime {
    WallTime at = WallTime::min();
    explicit operator bool() const { return at != WallTime::min(); }
  };
  // One cluster's objects, by its key ("ns/name": a ClusterSync and its lease are named as their
  // cluster), kept together so that the fleet's name appears once per cluster.
  struct ClusterObjects {
    Shared<hive::ClusterDeployment> cd;
    std::optional<SyncReport> status;  // of its ClusterSync: a value sharing its entries' block
    // Of a ClusterSyncLease the decision reads only spec.renewTime, as a time (a lease without a
    // valid one counts as none, there as here).
    RenewTime lease_renewal;
    bool empty() const { return !cd && !status && !lease_renewal; }
  };
  using Clusters = std::map<std::string, ClusterObjects>;
  // The parsed objects of every kind, by key ("ns/name"; a SelectorSyncSet by name). A cluster
  // is in `clusters` while any of its objects exists; one without its ClusterDeployment does
  // not exist for the decision.
  struct Objects {
    Clusters clusters;
    std::map<std::string, Shared<hive::SyncSet>> syncsets;
    std::map<std::string, Shared<hive::SelectorSyncSet>> selector_syncsets;
    SecretMetas secrets;  // only metadata: never the data
  };

 public:
  // One list of one kind as its pages arrive: each page parsed at once, without the cache's
  // lock, and the JSON dropped; Replace(Listing) swaps the objects in once the list completes.
  // Thread-compatible: one reflector's thread.
  class Listing {
   public:
    explicit Listing(HubKind kind) : kind_(kind) {}
    // Parses the page's objects and takes them out of `items`; invalid ones are counted and
    // logged, and left out.
    void AddPage(std::vector<Json>& items);

   private:
    friend class HubCache;
    HubKind kind_;
    Objects objects_;  // of kind_ only
    uint64_t invalid_ = 0;
  };

  // `bulk_edit_clusters`: publisher.bulkEditClusters (see DirtyEdits).
  explicit HubCache(size_t bulk_edit_clusters) : bulk_edit_clusters_(bulk_edit_clusters) {}

  // Reflector callbacks. Replace() is a full relist: objects absent from the list are gone, and
  // every cluster is dirty. Objects that fail to parse are skipped and counted
  // (invalid_objects()).
  void Replace(Listing listing);
  // The same with the whole list at once.
  void Replace(HubKind kind, std::vector<Json> items);
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
  // copy pointers (and a few Secret versions and lease renew times); the views are computed from
  // the snapshot later.
  HubSnapshot Snapshot(const std::vector<std::string>& cluster_keys) const;

  // A set with syncbus.io/rollout (common/bus/rollout.h) and the clusters it applies to now, with
  // their ClusterSyncs: what the rollout keeper judges (rollout_decision.h).
  struct RolloutInputs {
    std::shared_ptr<const hive::SyncSet> sync_set;  // one of the two
    std::shared_ptr<const hive::SelectorSyncSet> selector_sync_set;
    std::vector<
        std::pair<std::shared_ptr<const hive::ClusterDeployment>, std::optional<SyncReport>>>
        clusters;  // left empty for a set `with_clusters` does not want
  };
  // Every gated set; the clusters only of those for which `with_clusters` says yes (the lock is
  // held meanwhile: it must be quick).
  std::vector<RolloutInputs> Rollouts(
      const std::function<bool(const hive::ObjectMeta&)>& with_clusters) const;

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
  // Drops the object `field` selects of cluster `key`, and the cluster once it has none.
  template <typename Field>
  void EraseFromClusterLocked(const std::string& key, Field field);
  // Parses `object` of `kind` into its map of `into`.
  static Status Parse(HubKind kind, const Json& object, Objects& into);

  // The Secrets of `objects_.secrets` that these mappings read, added to `out`.
  void FindSecretsLocked(const std::vector<hive::SecretMapping>& mappings,
                         const std::string& set_ns, SecretMetas& out) const;

  mutable std::mutex mu_;
  std::condition_variable dirty_cv_;
  Objects objects_;
  const size_t bulk_edit_clusters_;
  std::set<std::string> dirty_;
  DirtyEdits edits_;  // of the dirty clusters
  bool woken_ = false;
  bool listed_[kHubKinds] = {};
  std::string versions_[kHubKinds];  // the last list's or event's resourceVersion
  uint64_t invalid_ = 0;
};

}  // namespace syncbus::publisher
