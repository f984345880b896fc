// ObjectStore: the objects of one simulated API server and its resourceVersion counter, with
// the storage-level semantics a kube-apiserver gets from etcd and its controllers: optimistic
// commits (a write names the state it was computed from and is refused as stale otherwise),
// namespace existence, deletion with finalizers (deletionTimestamp), namespace termination
// (contents deleted, the namespace removed once empty), owner-reference garbage collection, and
// list snapshots at an older resourceVersion rebuilt from the watch history.
// Thread-safe; one mutex per server; every change is appended to the WatchHub in order.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tests/kubesim/resource_registry.h"
#include "tests/kubesim/status_error.h"
#include "tests/kubesim/stored_object.h"
#include "tests/kubesim/watch_hub.h"

namespace syncbus::kubesim {

enum class Propagation { kBackground, kForeground, kOrphan };

class ObjectStore {
 public:
  // `now` formats the current wall time (deletionTimestamp).
  ObjectStore(WatchHub* hub, TypePtr namespaces, std::function<std::string()> now);

  uint64_t CurrentRv() const;
  size_t Count() const;
  ObjectPtr Get(const ResourceType& type, const std::string& ns, const std::string& name) const;

  struct Page {
    std::vector<ObjectPtr> items;
    uint64_t rv = 0;        // the snapshot's resourceVersion
    uint64_t cache_rv = 0;  // WatchHub::CacheRv of the type at the snapshot
    std::string last_key;   // set when more matching items follow
    size_t remaining = 0;   // matching items after this page
  };
  // Matching objects of `type` in `ns` (all namespaces when empty) with keys after `after_key`,
  // at `at_rv` (0 = now); at most `limit` (0 = all). 410 Expired when `at_rv` is older than the
  // history.
  Outcome<Page> List(const TypePtr& type, const std::string& ns,
                     const std::function<bool(const StoredObject&)>& match, size_t limit,
                     const std::string& after_key, uint64_t at_rv) const;

  enum class Code { kOk, kStale, kExists, kNoNamespace, kNamespaceTerminating };
  struct Committed {
    Code code = Code::kOk;
    ObjectPtr object;      // the stored (or, when removed, the last) state
    bool removed = false;  // the write removed the object (finalizers cleared)
  };
  // Told the state a write committed (for a removal, the last state) while the store still
  // holds its lock, so it sees one object's writes in the order they were applied; not told
  // when the write changed nothing. Must be quick and must not call the store.
  using OnCommit = std::function<void(const ObjectPtr& object)>;
  Committed Create(const TypePtr& type, const PreparedObject& object,
                   const OnCommit& on_commit = nullptr);
  // What Create would answer now (kOk, kExists, kNoNamespace, kNamespaceTerminating), storing
  // nothing: a dry run is refused as the create would be.
  Code CheckCreate(const TypePtr& type, const PreparedObject& object) const;
  // Replaces `expected` (the current state the write was computed from). An object being
  // deleted whose finalizers are now gone is removed instead.
  Committed Update(const TypePtr& type, const ObjectPtr& expected, const PreparedObject& object,
                   const OnCommit& on_commit = nullptr);
  // A DELETE: objects with finalizers (and namespaces, which first empty themselves) get a
  // deletionTimestamp; others are removed, their dependents collected per `policy`.
  Committed Delete(const TypePtr& type, const ObjectPtr& expected, Propagation policy,
                   const OnCommit& on_commit = nullptr);
  // Removes every object of `type` (its CRD went away).
  void RemoveAll(const TypePtr& type);
  // `type` is served anew from now on (its CRD was written): watches resume only from here.
  void StartWatchWindow(const TypePtr& type);

  // Registers a watch atomically with the store state: from now (ADDED for every current
  // object) when `from_rv` is empty, else replaying the history after it (a future one waits
  // for it).
  uint64_t StartWatch(WatchHub::Spec spec, std::shared_ptr<WatchSink> sink,
                      std::optional<uint64_t> from_rv);
  // Everything seen so far becomes too old to resume from (open watches get 410).
  void ExpireHistory();

  // What DELETE does to an object with finalizers: deletionTimestamp, grace period 0, and a
  // generation bump for types that track it.
  static void MarkDeleting(const ResourceType& type, Json& object, const std::string& now);

 private:
  struct Bucket {
    TypePtr type;
    std::map<std::string, ObjectPtr> objects;
  };
  struct Ref {
    std::string type;  // ResourceType::key
    std::string key;   // the object's key in its bucket
    bool operator==(const Ref&) const = default;
  };
  struct RefHash {
    size_t operator()(const Ref& r) const {
      return std::hash<std::string>()(r.type) * 31 + std::hash<std::string>()(r.key);
    }
  };

  Bucket& BucketFor(const TypePtr& type);  // caller holds mu_
  const Bucket* FindBucket(const ResourceType& type) const;
  Code CheckNamespace(const ResourceType& type, const std::string& ns) const;
  void StoreLocked(Bucket& bucket, ObjectPtr object, const ObjectPtr& prev);
  ObjectPtr RemoveLocked(Bucket& bucket, const ObjectPtr& object, Propagation policy);
  void DeleteLocked(Bucket& bucket, const ObjectPtr& object, Propagation policy);
  ObjectPtr RewriteLocked(Bucket& bucket, const ObjectPtr& object,
                          const std::function<void(Json&)>& change);
  void CollectDependentsLocked(const std::string& owner_uid, Propagation policy);
  void EmptyNamespaceLocked(const std::string& ns);
  void FinishNamespaceLocked(const std::string& ns);
  void IndexLocked(const ResourceType& type, const ObjectPtr& object, bool add);

  WatchHub* hub_;
  TypePtr namespaces_;
  std::function<std::string()> now_;
  mutable std::mutex mu_;
  uint64_t rv_ = 0;
  size_t count_ = 0;
  std::unordered_map<std::string, Bucket> buckets_;  // by ResourceType::key
  std::unordered_map<std::string, Ref> by_uid_;
  std::unordered_map<std::string, std::unordered_set<Ref, RefHash>> dependents_;
};

}  // namespace syncbus::kubesim
