// RequestTally: requests an API server received, counted by the verb kube-apiserver's audit log
// and apiserver_request_total use (get, list, watch, create, update, patch, apply, delete,
// deletecollection) and by resource, with its subresource ("clustersyncs/status"). What the
// benchmarks read to count a sync's cost to the hub. Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "common/json.h"
#include "tests/kubesim/request_target.h"

namespace syncbus::kubesim {

// The verb of a request to `target` ("" for discovery, /version and health checks).
std::string RequestVerb(std::string_view method, const RequestTarget& target,
                        const QueryParams& query, std::string_view content_type);
// "plural" or "plural/subresource".
std::string RequestResource(const RequestTarget& target);

class RequestTally {
 public:
  void Count(const std::string& verb, const std::string& resource);
  // Adds every count of `other` (a sum over API servers).
  void AddTo(std::map<std::pair<std::string, std::string>, uint64_t>& sum) const;
  // {"<verb>": {"<resource>": n}}
  Json ToJson() const;
  static Json ToJson(const std::map<std::pair<std::string, std::string>, uint64_t>& counts);

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, uint64_t> counts_;
};

}  // namespace syncbus::kubesim
