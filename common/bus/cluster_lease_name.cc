#include "common/bus/cluster_lease_name.h"

#include "common/digest.h"

namespace syncbus {

std::string ClusterLeaseName(const std::string& ns, const std::string& name) {
  constexpr size_t kMaxName = 253;
  if (ns.size() + 1 + name.size() <= kMaxName) return ns + "." + name;
  return Sha256Hex(ns + "/" + name);
}

}  // namespace syncbus
