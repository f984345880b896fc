#include "common/kube/resource.h"

#include <doctest/doctest.h>

namespace syncbus::kube {
namespace {

TEST_CASE("resource paths: core group under /api, others under /apis") {
  CHECK(Object(resources::kSecrets, "ns", "s").Path() == "/api/v1/namespaces/ns/secrets/s");
  CHECK(Object(resources::kSyncSets, "hive", "a").Path() ==
        "/apis/hive.openshift.io/v1/namespaces/hive/syncsets/a");
  CHECK(Object(resources::kLeases, "kube-system", "l").Path() ==
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l");
  CHECK(Collection(resources::kClusterSyncs, "c1").Path() ==
        "/apis/hiveinternal.openshift.io/v1alpha1/namespaces/c1/clustersyncs");
}

TEST_CASE("resource paths: all namespaces, cluster-scoped and subresources") {
  CHECK(Collection(resources::kConfigMaps).Path() == "/api/v1/configmaps");
  CHECK(Collection(resources::kClusterDeployments).Path() ==
        "/apis/hive.openshift.io/v1/clusterdeployments");
  // Cluster-scoped resources ignore a namespace.
  CHECK(Object(resources::kSelectorSyncSets, "ignored", "sss").Path() ==
        "/apis/hive.openshift.io/v1/selectorsyncsets/sss");
  CHECK(Object(resources::kNamespaces, "", "hive").Path() == "/api/v1/namespaces/hive");
  CHECK(StatusOf(resources::kClusterSyncs, "c1", "c1").Path() ==
        "/apis/hiveinternal.openshift.io/v1alpha1/namespaces/c1/clustersyncs/c1/status");
}

TEST_CASE("resource identities") {
  CHECK(resources::kClusterSyncLeases.ApiVersion() == "hiveinternal.openshift.io/v1alpha1");
  CHECK(resources::kConfigMaps.ApiVersion() == "v1");
  CHECK(resources::kSelectorSyncSets.kind == "SelectorSyncSet");
  CHECK_FALSE(resources::kSelectorSyncSets.namespaced);
  CHECK_FALSE(resources::kNamespaces.namespaced);
  CHECK(resources::kClusterDeployments.namespaced);
  CHECK(resources::kSyncSets != resources::kSelectorSyncSets);
}

TEST_CASE("resource descriptions for logs") {
  CHECK(Object(resources::kSyncSets, "ns", "a").Describe() == "ns/a");
  CHECK(Object(resources::kSelectorSyncSets, "ns", "a").Describe() == "a");
  CHECK(Collection(resources::kSyncSets, "ns").Describe() == "syncsets in ns");
  CHECK(Collection(resources::kClusterDeployments).Describe() == "clusterdeployments");
}

}  // namespace
}  // namespace syncbus::kube
