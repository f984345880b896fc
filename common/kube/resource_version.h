// Ordering of resourceVersions. The API calls them opaque; every apiserver backed by etcd writes
// the etcd revision (a decimal uint64, global to one etcd), and the freshness rule between the
// publisher's and the consumers' caches relies on that, for Hive's resources, which share one
// etcd. A version that is not such a number is never "at least" anything: callers then take the
// safe path (a direct read). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace syncbus::kube {

// The etcd revision a resourceVersion carries; nullopt if it is not a decimal uint64.
std::optional<uint64_t> ParseResourceVersion(std::string_view version);
// True when both are revisions and `have` >= `want`. An empty `want` (nothing required) is met.
bool ResourceVersionAtLeast(std::string_view have, std::string_view want);

}  // namespace syncbus::kube
