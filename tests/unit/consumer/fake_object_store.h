// FakeObjectStore: a hand-written kube::Client keeping objects in memory by path, with
// resourceVersion preconditions (409 on mismatch), AlreadyExists on a second create, a uid per
// create, deletes with preconditions, lists by one "key=value" label and an injectable outage —
// enough for the per-cluster and the liveness leases. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "common/kube/client.h"

namespace syncbus::testing {

class FakeObjectStore final : public kube::Client {
 public:
  Result<Json> Get(const kube::ObjectRef& ref) override {
    std::lock_guard lock(mu_);
    ++gets_;
    if (!outage_.ok()) return outage_;
    auto it = objects_.find(ref.Path());
    if (it == objects_.end()) return Status(Code::kNotFound, ref.Describe() + " not found");
    return it->second;
  }
  Result<Json> Create(const kube::ObjectRef& collection, const Json& object,
                      const kube::WriteOptions& options = {}) override {
    std::lock_guard lock(mu_);
    if (!outage_.ok()) return outage_;
    kube::ObjectRef ref =
        kube::Object(collection.resource, collection.ns, object["metadata"]["name"]);
    if (objects_.count(ref.Path()))
      return Status(Code::kAlreadyExists, ref.Describe() + " already exists");
    if (options.dry_run) return object;
    Json created = object;
    created["metadata"]["uid"] = "uid-" + std::to_string(version_ + 1);
    return Store(ref, created);
  }
  Result<Json> Update(const kube::ObjectRef& ref, const Json& object) override {
    if (on_update) on_update();  // before the lock: it may advance a clock, or read the store
    std::lock_guard lock(mu_);
    if (!outage_.ok()) return outage_;
    auto it = objects_.find(ref.Path());
    if (it == objects_.end()) return Status(Code::kNotFound, ref.Describe() + " not found");
    std::string want = object["metadata"].value("resourceVersion", "");
    if (!want.empty() && want != it->second["metadata"].value("resourceVersion", "")) {
      return Status(Code::kConflict, "the object has been modified");
    }
    return Store(ref, object);
  }

  // The objects under the collection's path; only a "key=value" label selector.
  Result<kube::ObjectList> List(const kube::ObjectRef& collection,
                                const kube::ListOptions& options) override {
    std::lock_guard lock(mu_);
    if (!outage_.ok()) return outage_;
    const std::string prefix = collection.Path() + "/";
    const size_t equals = options.label_selector.find('=');
    kube::ObjectList list;
    list.resource_version = std::to_string(version_);
    for (auto it = objects_.lower_bound(prefix); it != objects_.end(); ++it) {
      if (it->first.compare(0, prefix.size(), prefix) != 0) break;
      if (equals != std::string::npos) {
        const Json labels = it->second["metadata"].value("labels", Json::object());
        if (labels.value(options.label_selector.substr(0, equals), "") !=
            options.label_selector.substr(equals + 1))
          continue;
      }
      list.items.push_back(it->second);
    }
    return list;
  }
  Result<std::unique_ptr<kube::WatchStream>> Watch(const kube::ObjectRef&,
                                                   const kube::WatchOptions&) override {
    return Unsupported();
  }
  Result<Json> Apply(const kube::ObjectRef&, const Json&, const kube::ApplyOptions&) override {
    return Unsupported();
  }
  Result<Json> Patch(const kube::ObjectRef&, kube::PatchType, const std::string&,
                     const kube::WriteOptions& = {}) override {
    return Unsupported();
  }
  Status Delete(const kube::ObjectRef& ref, const kube::DeleteOptions& options) override {
    std::lock_guard lock(mu_);
    if (!outage_.ok()) return outage_;
    auto it = objects_.find(ref.Path());
    if (it == objects_.end()) return Status(Code::kNotFound, ref.Describe() + " not found");
    const Json& metadata = it->second["metadata"];
    if ((!options.precondition_uid.empty() &&
         options.precondition_uid != metadata.value("uid", "")) ||
        (!options.precondition_resource_version.empty() &&
         options.precondition_resource_version != metadata.value("resourceVersion", ""))) {
      return Status(Code::kConflict, "precondition failed");
    }
    objects_.erase(it);
    ++writes_;
    return Status::Ok();
  }
  Result<Json> GetPath(const std::string&) override { return Unsupported(); }

  // Runs at the start of every Update (a slow hub, as a test makes it); set before use.
  std::function<void()> on_update;

  // Every call fails with `status` until SetOutage(Status::Ok()).
  void SetOutage(Status status) {
    std::lock_guard lock(mu_);
    outage_ = std::move(status);
  }
  // Overwrites an object as another writer would (bumps its resourceVersion).
  void Overwrite(const kube::ObjectRef& ref, const Json& object) {
    std::lock_guard lock(mu_);
    Store(ref, object);
  }
  int writes() const {
    std::lock_guard lock(mu_);
    return writes_;
  }
  // The stored object, as a test looks at it (not counted in gets()).
  Json Peek(const kube::ObjectRef& ref) const {
    std::lock_guard lock(mu_);
    auto it = objects_.find(ref.Path());
    return it == objects_.end() ? Json() : it->second;
  }
  int gets() const {
    std::lock_guard lock(mu_);
    return gets_;
  }

 private:
  static Status Unsupported() { return {Code::kUnsupported, "not in the fake"}; }
  Json Store(const kube::ObjectRef& ref, Json object) {
    object["metadata"]["resourceVersion"] = std::to_string(++version_);
    ++writes_;
    objects_[ref.Path()] = object;
    return object;
  }

  mutable std::mutex mu_;
  std::map<std::string, Json> objects_;
  Status outage_;
  int version_ = 0;
  int writes_ = 0;
  int gets_ = 0;
};

}  // namespace syncbus::testing
