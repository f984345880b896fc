// Where a cluster's syncbus Lease lives on the hub (consumers hold it while they sync the
// cluster; syncbusctl reads it): its name, label and annotation. Pure.
#pragma once

#include <string>

namespace syncbus {

// The label on every cluster Lease (and the selector of the consumer mirror's Lease reflector).
inline constexpr char kClusterLeaseSelector[] = "app.kubernetes.io/managed-by=syncbus";
// The annotation naming the cluster of a Lease: "ns/name".
inline constexpr char kClusterLeaseAnnotation[] = "syncbus.io/cluster";

// The name of the Lease of cluster ns/name: "<ns>.<name>", which no two clusters share (a
// namespace name has no dot). Where that is longer than an object name may be (253), the
// lower-case hex SHA-256 of "ns/name": 64 characters and no dot, so never another cluster's
// "<ns>.<name>" either.
std::string ClusterLeaseName(const std::string& ns, const std::string& name);

}  // namespace syncbus
