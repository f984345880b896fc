// HubMirror: the consumer's watch-fed copy of what its syncs read of the hub — ClusterDeployments,
// SyncSets, SelectorSyncSets, ClusterSyncs and ClusterSyncLeases (the clusters' claims) — fed by
// one kube::Reflector per collection (handler()), and how far each collection has caught up: the
// resourceVersion of its list, last event or bookmark. A collection that has not listed yet, or
// that a 410 made stale until its relist, is fresh at no version. Objects are parsed once, when
// they arrive, and shared read-only with the syncs. Thread-safe: reflector threads feed, syncs
// read.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/bus/sync_message.h"
#include "common/json.h"
#include "common/kube/reflector.h"
#include "consumer/cluster_state.h"

namespace syncbus::consumer {

enum class HubCollection {
  kClusterDeployments,
  kSyncSets,
  kSelectorSyncSets,
  kClusterSyncs,
  kClusterSyncLeases
};
inline constexpr int kHubCollections = 5;

class HubMirror {
 public:
  HubMirror();
  ~HubMirror();
  HubMirror(const HubMirror&) = delete;
  HubMirror& operator=(const HubMirror&) = delete;

  // The reflector handler that feeds `collection`; lives as long as the mirror.
  kube::ReflectorHandler& handler(HubCollection collection);

  // True when every collection has listed and none is stale.
  bool synced() const;
  // True when the collections `want` names are fresh at (at least) its versions. An empty
  // version asks nothing of its collection beyond having listed.
  bool FreshAt(const HubVersions& want) const;
  // Waits up to `timeout` of real time for FreshAt(want); returns whether it came.
  bool WaitFresh(const HubVersions& want, std::chrono::milliseconds timeout) const;

  // The cluster's state as the mirror holds it now (see cluster_state.h).
  ClusterState Read(const std::string& ns, const std::string& name) const;
  // The cluster's ClusterSyncLease, if the mirror holds it.
  std::optional<Json> ClusterSyncLease(const std::string& ns, const std::string& name) const;
  // The resourceVersion of the cluster's ClusterSync ("" if none).
  std::string StatusVersion(const std::string& ns, const std::string& name) const;
  // The cluster's ClusterSync as the mirror holds it now (null if none).
  std::shared_ptr<const hive::ClusterSync> Status(const std::string& ns,
                                                  const std::string& name) const;

  // Takes in an object this process just wrote (a ClusterSync or a ClusterSyncLease), so the next
  // read sees it before its watch event arrives; an entry with a newer resourceVersion is kept
  // instead.
  void NoteWritten(HubCollection collection, const Json& object);

  // The ClusterDeployments held now: the size of the fleet.
  size_t clusters() const;

  // The collection's resourceVersion ("" before its first list); objects that failed to parse.
  std::string version(HubCollection collection) const;
  uint64_t invalid_objects() const;

 private:
  class Feed;
  struct Progress {
    std::string version;
    bool listed = false;
    bool stale = false;
  };

  // A Lease as the hub sent it, kept as its compact JSON text (a parsed tree takes several times
  // the memory, and there is one per cluster); parsed again when read.
  struct LeaseText {
    std::string resource_version;
    std::string json;
  };
  // The parsed objects: the mirror's own, and a list's pages as they arrive (Feed) until the
  // list completes and they replace the collection's.
  struct Maps {
    std::map<std::string, std::shared_ptr<const hive::ClusterDeployment>> cds;  // "ns/name"
    std::map<std::string, std::map<std::string, std::shared_ptr<const hive::SyncSet>>>
        syncsets;  // ns -> name
    std::map<std::string, std::shared_ptr<const hive::SelectorSyncSet>> selector_syncsets;  // name
    std::map<std::string, std::shared_ptr<const hive::ClusterSync>> statuses;  // "ns/name"
    std::map<std::string, LeaseText> leases;  // ClusterSyncLeases, "ns/name"
  };

  // Replaces collection `c` with `staged`'s (a completed list's objects); `invalid` of the list's
  // objects failed to parse.
  void Replace(HubCollection c, Maps& staged, uint64_t invalid);
  void Upsert(HubCollection c, const Json& object, bool only_if_newer);
  void Delete(HubCollection c, const Json& object);
  void Checkpoint(HubCollection c, const std::string& version);
  void MarkStale(HubCollection c);
  // Parses `object` into `maps` (unless the entry held is as new, with only_if_newer); false when
  // it is invalid (its older version, if any, is dropped).
  static bool Store(Maps& maps, HubCollection c, const Json& object, bool only_if_newer);
  bool FreshAtLocked(const HubVersions& want) const;

  std::unique_ptr<Feed> feeds_[kHubCollections];
  mutable std::mutex mu_;
  mutable std::condition_variable progress_cv_;
  Progress progress_[kHubCollections];
  Maps live_;
  uint64_t invalid_ = 0;
};

}  // namespace syncbus::consumer
