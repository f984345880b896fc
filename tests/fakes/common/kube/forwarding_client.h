// ForwardingClient: a kube::Client that hands every call to another one, for test fakes that
// change a few calls of a real client (a conflict raced in, a write that times out) and leave the
// rest alone: derive, override those. Thread-safety is the wrapped client's; it must outlive this.
#pragma once

#include <memory>
#include <string>

#include "common/kube/client.h"

namespace syncbus::fakes {

class ForwardingClient : public kube::Client {
 public:
  explicit ForwardingClient(kube::Client& to) : to_(to) {}

  Result<Json> Get(const kube::ObjectRef& o) override { return to_.Get(o); }
  Result<kube::ObjectList> List(const kube::ObjectRef& c, const kube::ListOptions& o) override {
    return to_.List(c, o);
  }
  Result<std::unique_ptr<kube::WatchStream>> Watch(const kube::ObjectRef& c,
                                                   const kube::WatchOptions& o) override {
    return to_.Watch(c, o);
  }
  Result<Json> Create(const kube::ObjectRef& c, const Json& j,
                      const kube::WriteOptions& o) override {
    return to_.Create(c, j, o);
  }
  Result<Json> Update(const kube::ObjectRef& r, const Json& j) override { return to_.Update(r, j); }
  Result<Json> Apply(const kube::ObjectRef& r, const Json& j,
                     const kube::ApplyOptions& o) override {
    return to_.Apply(r, j, o);
  }
  Result<Json> Patch(const kube::ObjectRef& r, kube::PatchType t, const std::string& body,
                     const kube::WriteOptions& o) override {
    return to_.Patch(r, t, body, o);
  }
  Status Delete(const kube::ObjectRef& r, const kube::DeleteOptions& o) override {
    return to_.Delete(r, o);
  }
  Result<Json> GetPath(const std::string& p) override { return to_.GetPath(p); }

 protected:
  kube::Client& to_;
};

}  // namespace syncbus::fakes
