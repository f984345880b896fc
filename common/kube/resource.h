// Resource identities and REST paths for the Kubernetes API. Value types; thread-compatible.
#pragma once

#include <string>

namespace syncbus::kube {

// A resource type as the REST API names it: group ("" for core), version, plural resource.
struct Resource {
  std::string group;
  std::string version;
  std::string resource;  // plural, lower case: "syncsets"
  std::string kind;      // "SyncSet"
  bool namespaced = true;

  std::string ApiVersion() const { return group.empty() ? version : group + "/" + version; }
  bool operator==(const Resource&) const = default;
};

// Well-known resources used by syncbus.
namespace resources {
extern const Resource kClusterDeployments;  // hive.openshift.io/v1 clusterdeployments
extern const Resource kSyncSets;            // hive.openshift.io/v1 syncsets
extern const Resource kSelectorSyncSets;    // hive.openshift.io/v1 selectorsyncsets (cluster)
extern const Resource kClusterSyncs;        // hiveinternal.openshift.io/v1alpha1 clustersyncs
extern const Resource kClusterSyncLeases;   // hiveinternal.openshift.io/v1alpha1 clustersyncleases
extern const Resource kSecrets;             // v1 secrets
extern const Resource kConfigMaps;          // v1 configmaps
extern const Resource kNamespaces;          // v1 namespaces (cluster)
extern const Resource kLeases;              // coordination.k8s.io/v1 leases
extern const Resource kEvents;              // v1 events (core: what kubectl describe lists)
extern const Resource kHiveConfigs;         // hive.openshift.io/v1 hiveconfigs (cluster)
}  // namespace resources

// An object or a collection of one resource. Empty name = collection; empty namespace on a
// namespaced resource = all namespaces (list/watch only).
struct ObjectRef {
  Resource resource;
  std::string ns;
  std::string name;
  std::string subresource;  // "status" or empty

  // "/apis/hive.openshift.io/v1/namespaces/ns/syncsets/name/status" (no server prefix, no query).
  std::string Path() const;
  // "ns/name" or "name" ("syncsets in ns" / "syncsets" for a collection), for logs and errors.
  std::string Describe() const;
};

inline ObjectRef Collection(const Resource& r, std::string ns = {}) {
  return {r, std::move(ns), {}, {}};
}
inline ObjectRef Object(const Resource& r, std::string ns, std::string name) {
  return {r, std::move(ns), std::move(name), {}};
}
inline ObjectRef StatusOf(const Resource& r, std::string ns, std::string name) {
  return {r, std::move(ns), std::move(name), "status"};
}

}  // namespace syncbus::kube
