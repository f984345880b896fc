// FakeObjectStore: a hand-written kube::Client keeping objects in memory by path, with
// resourceVersion preconditions (409 on mismatch), AlreadyExists on a second create and an
// injectable outage — enough for the per-cluster leases. Thread-safe.
#pragma once

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
    return Store(ref, object);
  }
  Result<Json> Update(const kube::ObjectRef& ref, const Json& object) override {
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

  Result<kube::ObjectList> List(const kube::ObjectRef&, const kube::ListOptions&) override {
    return Unsupported();
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
  Status Delete(const kube::ObjectRef&, const kube::DeleteOptions&) override {
    return Unsupported();
  }
  Result<Json> GetPath(const std::string&) override { return Unsupported(); }

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
