#include "tests/kubesim/object_store.h"

#include <algorithm>

namespace syncbus::kubesim {
namespace {

bool InRange(const std::string& key, const std::string& prefix) {
  return key.compare(0, prefix.size(), prefix) == 0;
}

StatusError ContinueExpired() {
  StatusError e = Expired(
      "The provided continue parameter is too old to display a consistent list result. You can "
      "start a new list without the continue parameter, or use the continue token in this "
      "response to retrieve the remainder of the results. Continuing with the provided token "
      "results in an inconsistent list - objects that were created, modified, or deleted between "
      "the time the first chunk was returned and now may show up in the list.");
  return e;
}

}  // namespace

ObjectStore::ObjectStore(WatchHub* hub, TypePtr namespaces, std::function<std::string()> now)
    : hub_(hub), namespaces_(std::move(namespaces)), now_(std::move(now)) {}

uint64_t ObjectStore::CurrentRv() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rv_;
}

size_t ObjectStore::Count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

const ObjectStore::Bucket* ObjectStore::FindBucket(const ResourceType& type) const {
  auto it = buckets_.find(type.key);
  return it == buckets_.end() ? nullptr : &it->second;
}

ObjectStore::Bucket& ObjectStore::BucketFor(const TypePtr& type) {
  Bucket& b = buckets_[type->key];
  b.type = type;  // the latest registration (a CRD may have been updated)
  return b;
}

ObjectPtr ObjectStore::Get(const ResourceType& type, const std::string& ns,
                           const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Bucket* b = FindBucket(type);
  if (b == nullptr) return nullptr;
  auto it = b->objects.find(type.namespaced ? ns + "/" + name : name);
  return it == b->objects.end() ? nullptr : it->second;
}

Outcome<ObjectStore::Page> ObjectStore::List(const TypePtr& type, const std::string& ns,
                                             const std::function<bool(const StoredObject&)>& match,
                                             size_t limit, const std::string& after_key,
                                             uint64_t at_rv) const {
  std::lock_guard<std::mutex> lock(mu_);
  Page page;
  page.rv = at_rv == 0 ? rv_ : at_rv;
  page.cache_rv = hub_->CacheRv(type->key);
  std::string prefix = type->namespaced && !ns.empty() ? ns + "/" : "";
  const Bucket* b = FindBucket(*type);
  static const std::map<std::string, ObjectPtr> kNone;
  const std::map<std::string, ObjectPtr>& current = b != nullptr ? b->objects : kNone;

  std::map<std::string, ObjectPtr> snapshot;
  const std::map<std::string, ObjectPtr>* source = &current;
  if (at_rv != 0 && at_rv < rv_) {
    if (at_rv < hub_->ListFloor(type->key)) return ContinueExpired();
    for (auto it = current.lower_bound(prefix); it != current.end() && InRange(it->first, prefix);
         ++it) {
      snapshot.emplace(it->first, it->second);
    }
    std::map<std::string, ObjectPtr> before;
    for (const auto& e : hub_->EventsSince(at_rv, type->key)) {
      const std::string& key = e.object->index.key;
      if (!InRange(key, prefix)) continue;
      before.emplace(key, e.prev);  // the first event after at_rv holds the state at at_rv
    }
    for (auto& [key, obj] : before) {
      if (obj) {
        snapshot[key] = obj;
      } else {
        snapshot.erase(key);
      }
    }
    source = &snapshot;
  }
  auto it = after_key.empty() ? source->lower_bound(prefix) : source->upper_bound(after_key);
  for (; it != source->end() && InRange(it->first, prefix); ++it) {
    if (!match(*it->second)) continue;
    if (limit != 0 && page.items.size() >= limit) {
      ++page.remaining;
      continue;
    }
    page.items.push_back(it->second);
  }
  if (page.remaining > 0) page.last_key = page.items.back()->index.key;
  return page;
}

ObjectStore::Code ObjectStore::CheckNamespace(const ResourceType& type,
                                              const std::string& ns) const {
  if (!type.namespaced) return Code::kOk;
  const Bucket* b = FindBucket(*namespaces_);
  if (b == nullptr) return Code::kNoNamespace;
  auto it = b->objects.find(ns);
  if (it == b->objects.end()) return Code::kNoNamespace;
  if (it->second->index.deleting) return Code::kNamespaceTerminating;
  return Code::kOk;
}

void ObjectStore::IndexLocked(const ResourceType& type, const ObjectPtr& object, bool add) {
  Ref ref{type.key, object->index.key};
  if (add) {
    if (!object->index.uid.empty()) by_uid_[object->index.uid] = ref;
    for (const auto& owner : object->index.owner_uids) dependents_[owner].insert(ref);
  } else {
    auto it = by_uid_.find(object->index.uid);
    if (it != by_uid_.end() && it->second == ref) by_uid_.erase(it);
    for (const auto& owner : object->index.owner_uids) {
      auto deps = dependents_.find(owner);
      if (deps == dependents_.end()) continue;
      deps->second.erase(ref);
      if (deps->second.empty()) dependents_.erase(deps);
    }
  }
}

void ObjectStore::StoreLocked(Bucket& bucket, ObjectPtr object, const ObjectPtr& prev) {
  if (prev) {
    IndexLocked(*bucket.type, prev, false);
  } else {
    ++count_;
  }
  IndexLocked(*bucket.type, object, true);
  bucket.objects[object->index.key] = object;
  hub_->Append({object->rv, prev ? StoreEvent::Type::kModified : StoreEvent::Type::kAdded,
                bucket.type, object, prev});
}

ObjectPtr ObjectStore::RewriteLocked(Bucket& bucket, const ObjectPtr& object,
                                     const std::function<void(Json&)>& change) {
  Json parsed = Json::parse(object->body);
  change(parsed);
  ObjectPtr updated = Prepare(*bucket.type, parsed).Finish(++rv_);
  StoreLocked(bucket, updated, object);
  return updated;
}

ObjectPtr ObjectStore::RemoveLocked(Bucket& bucket, const ObjectPtr& object, Propagation policy) {
  TypePtr type = bucket.type;
  ObjectPtr last = WithResourceVersion(*type, *object, ++rv_);
  bucket.objects.erase(object->index.key);
  IndexLocked(*type, object, false);
  --count_;
  hub_->Append({last->rv, StoreEvent::Type::kDeleted, type, last, object});
  if (!object->index.uid.empty()) CollectDependentsLocked(object->index.uid, policy);
  if (type->key == namespaces_->key) EmptyNamespaceLocked(object->index.name);
  if (type->namespaced) FinishNamespaceLocked(object->index.ns);
  return last;
}

void ObjectStore::MarkDeleting(const ResourceType& type, Json& object, const std::string& now) {
  Json& meta = object["metadata"];
  meta["deletionTimestamp"] = now;
  meta["deletionGracePeriodSeconds"] = 0;
  if (type.tracks_generation) {
    long long generation = meta.contains("generation") && meta["generation"].is_number_integer()
                               ? meta["generation"].get<long long>()
                               : 0;
    meta["generation"] = generation + 1;
  }
}

void ObjectStore::DeleteLocked(Bucket& bucket, const ObjectPtr& object, Propagation policy) {
  if (object->index.deleting) return;
  if (object->index.has_finalizers) {
    std::string now = now_();
    const ResourceType& type = *bucket.type;
    RewriteLocked(bucket, object, [&](Json& j) { MarkDeleting(type, j, now); });
    return;
  }
  RemoveLocked(bucket, object, policy);
}

void ObjectStore::CollectDependentsLocked(const std::string& owner_uid, Propagation policy) {
  auto deps = dependents_.find(owner_uid);
  if (deps == dependents_.end()) return;
  std::vector<Ref> refs(deps->second.begin(), deps->second.end());
  auto drop_owner = [&](Json& j) {
    Json& owners = j["metadata"]["ownerReferences"];
    Json kept = Json::array();
    for (const auto& o : owners) {
      if (!o.is_object() || o.value("uid", "") != owner_uid) kept.push_back(o);
    }
    if (kept.empty()) {
      j["metadata"].erase("ownerReferences");
    } else {
      owners = std::move(kept);
    }
  };
  for (const auto& ref : refs) {
    auto bucket_it = buckets_.find(ref.type);
    if (bucket_it == buckets_.end()) continue;
    Bucket& bucket = bucket_it->second;
    auto obj_it = bucket.objects.find(ref.key);
    if (obj_it == bucket.objects.end()) continue;
    ObjectPtr dependent = obj_it->second;
    bool other_owner = false;
    for (const auto& uid : dependent->index.owner_uids) {
      if (uid != owner_uid && by_uid_.count(uid) > 0) other_owner = true;
    }
    if (policy == Propagation::kOrphan || other_owner) {
      RewriteLocked(bucket, dependent, drop_owner);
    } else {
      DeleteLocked(bucket, dependent, Propagation::kBackground);
    }
  }
}

void ObjectStore::EmptyNamespaceLocked(const std::string& ns) {
  std::string prefix = ns + "/";
  for (auto& [type_key, bucket] : buckets_) {
    if (!bucket.type->namespaced) continue;
    std::vector<ObjectPtr> contents;
    for (auto it = bucket.objects.lower_bound(prefix);
         it != bucket.objects.end() && InRange(it->first, prefix); ++it) {
      contents.push_back(it->second);
    }
    for (const auto& obj : contents) {
      auto current = bucket.objects.find(obj->index.key);
      if (current != bucket.objects.end() && current->second == obj) {
        DeleteLocked(bucket, obj, Propagation::kBackground);
      }
    }
  }
}

void ObjectStore::FinishNamespaceLocked(const std::string& ns) {
  auto nb = buckets_.find(namespaces_->key);
  if (nb == buckets_.end()) return;
  auto it = nb->second.objects.find(ns);
  if (it == nb->second.objects.end()) return;
  ObjectPtr namespace_object = it->second;
  if (!namespace_object->index.deleting || namespace_object->index.has_finalizers) return;
  std::string prefix = ns + "/";
  for (const auto& [type_key, bucket] : buckets_) {
    if (!bucket.type->namespaced) continue;
    auto first = bucket.objects.lower_bound(prefix);
    if (first != bucket.objects.end() && InRange(first->first, prefix)) return;
  }
  RemoveLocked(nb->second, namespace_object, Propagation::kBackground);
}

ObjectStore::Committed ObjectStore::Create(const TypePtr& type, const PreparedObject& object,
                                           const OnCommit& on_commit) {
  Committed out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out.code = CheckNamespace(*type, object.index.ns);
    if (out.code != Code::kOk) return out;
    Bucket& bucket = BucketFor(type);
    if (bucket.objects.count(object.index.key) > 0) {
      out.code = Code::kExists;
      return out;
    }
    out.object = object.Finish(++rv_);
    StoreLocked(bucket, out.object, nullptr);
    if (on_commit) on_commit(out.object);
  }
  hub_->Pump();
  return out;
}

ObjectStore::Code ObjectStore::CheckCreate(const TypePtr& type,
                                           const PreparedObject& object) const {
  std::lock_guard<std::mutex> lock(mu_);
  Code code = CheckNamespace(*type, object.index.ns);
  if (code != Code::kOk) return code;
  const Bucket* bucket = FindBucket(*type);
  if (bucket != nullptr && bucket->objects.count(object.index.key) > 0) return Code::kExists;
  return Code::kOk;
}

ObjectStore::Committed ObjectStore::Update(const TypePtr& type, const ObjectPtr& expected,
                                           const PreparedObject& object,
                                           const OnCommit& on_commit) {
  Committed out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Bucket& bucket = BucketFor(type);
    auto it = bucket.objects.find(expected->index.key);
    if (it == bucket.objects.end() || it->second != expected) {
      out.code = Code::kStale;
      return out;
    }
    if (object.index.deleting && !object.index.has_finalizers) {
      out.object = RemoveLocked(bucket, expected, Propagation::kBackground);
      out.removed = true;
    } else {
      out.object = object.Finish(++rv_);
      StoreLocked(bucket, out.object, expected);
    }
    if (on_commit) on_commit(out.object);
  }
  hub_->Pump();
  return out;
}

ObjectStore::Committed ObjectStore::Delete(const TypePtr& type, const ObjectPtr& expected,
                                           Propagation policy, const OnCommit& on_commit) {
  Committed out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Bucket& bucket = BucketFor(type);
    auto it = bucket.objects.find(expected->index.key);
    if (it == bucket.objects.end() || it->second != expected) {
      out.code = Code::kStale;
      return out;
    }
    if (type->key == namespaces_->key) {
      ObjectPtr terminating = expected;
      if (!expected->index.deleting) {
        std::string now = now_();
        terminating = RewriteLocked(bucket, expected, [&](Json& j) {
          MarkDeleting(*type, j, now);
          j["status"]["phase"] = "Terminating";
        });
      }
      EmptyNamespaceLocked(expected->index.name);
      FinishNamespaceLocked(expected->index.name);
      auto still = bucket.objects.find(expected->index.key);
      out.removed = still == bucket.objects.end();
      out.object = out.removed ? terminating : still->second;
    } else if (expected->index.has_finalizers) {
      out.object = expected;
      if (!expected->index.deleting) {
        std::string now = now_();
        out.object = RewriteLocked(bucket, expected, [&](Json& j) { MarkDeleting(*type, j, now); });
        if (policy == Propagation::kOrphan && !expected->index.uid.empty()) {
          CollectDependentsLocked(expected->index.uid, Propagation::kOrphan);
        }
      }
    } else {
      out.object = RemoveLocked(bucket, expected, policy);
      out.removed = true;
    }
    if (on_commit && (out.removed || out.object != expected)) on_commit(out.object);
  }
  hub_->Pump();
  return out;
}

void ObjectStore::RemoveAll(const TypePtr& type) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = buckets_.find(type->key);
    if (it == buckets_.end()) return;
    std::vector<ObjectPtr> all;
    for (const auto& [key, obj] : it->second.objects) all.push_back(obj);
    for (const auto& obj : all) RemoveLocked(it->second, obj, Propagation::kBackground);
  }
  hub_->Pump();
}

void ObjectStore::StartWatchWindow(const TypePtr& type) {
  std::lock_guard<std::mutex> lock(mu_);
  hub_->StartWindow(type->key, rv_);
}

uint64_t ObjectStore::StartWatch(WatchHub::Spec spec, std::shared_ptr<WatchSink> sink,
                                 std::optional<uint64_t> from_rv) {
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<ObjectPtr> initial;
    uint64_t cursor = from_rv.value_or(rv_);
    if (!from_rv) {
      const Bucket* b = FindBucket(*spec.type);
      if (b != nullptr) {
        std::string prefix = spec.type->namespaced && !spec.ns.empty() ? spec.ns + "/" : "";
        for (auto it = b->objects.lower_bound(prefix);
             it != b->objects.end() && InRange(it->first, prefix); ++it) {
          initial.push_back(it->second);
        }
      }
    }
    id = hub_->Register(std::move(spec), std::move(sink), std::move(initial), cursor);
  }
  hub_->Pump();
  return id;
}

void ObjectStore::ExpireHistory() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    hub_->Expire(++rv_);
  }
  hub_->Pump();
}

}  // namespace syncbus::kubesim
