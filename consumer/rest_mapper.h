// RestMapper: maps an object's apiVersion + kind to its REST resource (plural, namespaced) on one
// target cluster through the discovery API, caching each group-version and refreshing it once
// when a kind is unknown (a CRD installed since). Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "common/kube/client.h"
#include "common/status.h"

namespace syncbus::consumer {

// Whether a failed request was answered by the server: any HTTP status (a 5xx too), or a failure
// that is none of a refused connection, a timeout or a cancel.
bool Answered(const Status& failure);

class RestMapper {
 public:
  explicit RestMapper(kube::Client& client) : client_(client) {}

  // kNotFound when the cluster serves no such kind (after one refresh).
  Result<kube::Resource> Map(const std::string& api_version, const std::string& kind);
  // As kubectl reads a resource argument (Hive's patches name their kind through one): the kind,
  // else, whatever its case, the kind, the resource's plural or singular name or a short name.
  Result<kube::Resource> MapLeniently(const std::string& api_version,
                                      const std::string& kind_or_resource);

  // Discovers every group-version of `api_versions` not cached yet, all at once (one round trip
  // instead of one per group-version when planning). Blocking; failures are left for Map to
  // retry and report. Whether the cluster answered any of it (an error status is an answer; a
  // connection failure or a timeout is not); nullopt when everything was cached (nothing asked).
  std::optional<bool> Prefetch(const std::set<std::string>& api_versions);

 private:
  struct Kinds {
    std::map<std::string, kube::Resource> by_kind;
    std::map<std::string, std::string>
        aliases;  // lower-case kind, plural, singular, short name -> kind
  };
  Result<Kinds> Discover(const std::string& api_version);
  // The cached group-version's resource for `kind` (`lenient`: or one of its aliases).
  std::optional<kube::Resource> Find(const std::string& api_version, const std::string& kind,
                                     bool lenient);
  Result<kube::Resource> MapWith(const std::string& api_version, const std::string& kind,
                                 bool lenient);

  kube::Client& client_;
  std::mutex mu_;
  std::map<std::string, Kinds> cache_;  // apiVersion -> kinds
};

}  // namespace syncbus::consumer
