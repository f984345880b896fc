#include "common/kube/resource.h"

namespace syncbus::kube {

namespace resources {
const Resource kClusterDeployments{"hive.openshift.io", "v1", "clusterdeployments",
                                   "ClusterDeployment", true};
const Resource kSyncSets{"hive.openshift.io", "v1", "syncsets", "SyncSet", true};
const Resource kSelectorSyncSets{"hive.openshift.io", "v1", "selectorsyncsets", "SelectorSyncSet",
                                 false};
const Resource kClusterSyncs{"hiveinternal.openshift.io", "v1alpha1", "clustersyncs", "ClusterSync",
                             true};
const Resource kClusterSyncLeases{"hiveinternal.openshift.io", "v1alpha1", "clustersyncleases",
                                  "ClusterSyncLease", true};
const Resource kSecrets{"", "v1", "secrets", "Secret", true};
const Resource kConfigMaps{"", "v1", "configmaps", "ConfigMap", true};
const Resource kNamespaces{"", "v1", "namespaces", "Namespace", false};
const Resource kLeases{"coordination.k8s.io", "v1", "leases", "Lease", true};
const Resource kEvents{"", "v1", "events", "Event", true};
const Resource kHiveConfigs{"hive.openshift.io", "v1", "hiveconfigs", "HiveConfig", false};
}  // namespace resources

std::string ObjectRef::Path() const {
  std::string path = resource.group.empty() ? "/api/" + resource.version
                                            : "/apis/" + resource.group + "/" + resource.version;
  if (resource.namespaced && !ns.empty()) path += "/namespaces/" + ns;
  path += "/" + resource.resource;
  if (!name.empty()) {
    path += "/" + name;
    if (!subresource.empty()) path += "/" + subresource;
  }
  return path;
}

std::string ObjectRef::Describe() const {
  bool scoped = resource.namespaced && !ns.empty();
  if (name.empty()) return scoped ? resource.resource + " in " + ns : resource.resource;
  return scoped ? ns + "/" + name : name;
}

}  // namespace syncbus::kube
