// Hive's clustersync tests about secretMappings: ApplySecretForSelectorSyncSet,
// MissingSecretNamespaceForSelectorSyncSet, ValidSecretNamespaceForSyncSet,
// InvalidSecretNamespaceForSyncSet, MissingSourceSecret.
#include <doctest/doctest.h>

#include "common/base64.h"
#include "tests/conformance/hive/rig.h"

namespace syncbus::conformance::hive {
namespace {

namespace res = kube::resources;

Json Mapping(const std::string& source_ns, const std::string& source_name,
             const std::string& target_ns, const std::string& target_name) {
  return {{"sourceRef", {{"namespace", source_ns}, {"name", source_name}}},
          {"targetRef", {{"namespace", target_ns}, {"name", target_name}}}};
}

// A hub namespace other than the cluster's, holding Secret "src-name"; its name.
std::string SourceElsewhere(Rig& rig) {
  const std::string source_ns = rig.U("src-namespace");
  rig.CreateHubNamespace(source_ns);
  rig.CreateHubSecret(source_ns, "src-name", {{"test-key", EncodeBase64("test-data")}});
  return source_ns;
}

Json Selector(Rig& rig) {
  return {{"matchLabels", {{"test-label-key", rig.U("test-label-value")}}}};
}

TEST_CASE("TestReconcileClusterSync_ApplySecretForSelectorSyncSet") {
  Rig rig;
  rig.CreateCd(Rig::Cd().Labels({{"test-label-key", rig.U("test-label-value")}}));
  rig.CreateClusterSync();
  const std::string source_ns = SourceElsewhere(rig);
  const std::string ns = rig.T("dest-namespace");
  rig.CreateTargetNamespace(ns);
  rig.CreateSelectorSyncSet(
      rig.U("test-selectorsyncset"),
      {{"clusterDeploymentSelector", Selector(rig)},
       {"secretMappings", Json::array({Mapping(source_ns, "src-name", ns, "dest-name")})}});
  rig.Check(rig.Reconcile(), Expect().SelectorSyncSets(std::vector<SyncStatus>{
                                 SyncStatus(rig.U("test-selectorsyncset"))}));
  Json secret = rig.TargetGet(res::kSecrets, ns, "dest-name");
  REQUIRE_FALSE(secret.is_null());
  CHECK(secret["data"] == Json({{"test-key", EncodeBase64("test-data")}}));
}

TEST_CASE("TestReconcileClusterSync_MissingSecretNamespaceForSelectorSyncSet") {
  Rig rig;
  rig.CreateCd(Rig::Cd().Labels({{"test-label-key", rig.U("test-label-value")}}));
  rig.CreateClusterSync();
  rig.CreateHubSecret(rig.ns(), "test-secret", {{"test-key", EncodeBase64("test-data")}});
  rig.CreateSelectorSyncSet(
      rig.U("test-selectorsyncset"),
      {{"clusterDeploymentSelector", Selector(rig)},
       {"secretMappings",
        Json::array({SecretMapping("test-secret", rig.T("dest-namespace"), "dest-name")})}});
  rig.Check(rig.Reconcile(),
            Expect()
                .Failed("SelectorSyncSet " + rig.U("test-selectorsyncset") + " is failing")
                .SelectorSyncSets(
                    std::vector<SyncStatus>{SyncStatus(rig.U("test-selectorsyncset"))
                                                .Failure("source namespace missing for secret 0")
                                                .NoFirstSuccess()}));
}

TEST_CASE("TestReconcileClusterSync_ValidSecretNamespaceForSyncSet") {
  Rig rig;
  rig.CreateCd();
  rig.CreateClusterSync();
  rig.CreateHubSecret(rig.ns(), "test-secret", {{"test-key", EncodeBase64("test-data")}});
  const std::string ns = rig.T("dest-namespace");
  rig.CreateTargetNamespace(ns);
  rig.CreateSyncSet(
      "test-syncset",
      {{"secretMappings", Json::array({Mapping(rig.ns(), "test-secret", ns, "dest-name")})}});
  rig.Check(rig.Reconcile(),
            Expect().SyncSets(std::vector<SyncStatus>{SyncStatus("test-syncset")}));
  CHECK_FALSE(rig.TargetGet(res::kSecrets, ns, "dest-name").is_null());
}

TEST_CASE("TestReconcileClusterSync_InvalidSecretNamespaceForSyncSet") {
  Rig rig;
  rig.CreateCd();
  rig.CreateClusterSync();
  const std::string source_ns = SourceElsewhere(rig);
  const std::string ns = rig.T("dest-namespace");
  rig.CreateTargetNamespace(ns);
  rig.CreateSyncSet(
      "test-syncset",
      {{"secretMappings", Json::array({Mapping(source_ns, "src-name", ns, "dest-name")})}});
  rig.Check(rig.Reconcile(),
            Expect::FailingSyncSet("test-syncset", "source in wrong namespace for secret 0"));
  // The other namespace's Secret never reaches the cluster.
  CHECK(rig.TargetGet(res::kSecrets, ns, "dest-name").is_null());
}

TEST_CASE("TestReconcileClusterSync_MissingSourceSecret") {
  Rig rig;
  rig.CreateCd();
  rig.CreateClusterSync();
  rig.CreateSyncSet(
      "test-syncset",
      {{"secretMappings",
        Json::array({SecretMapping("test-secret", rig.T("dest-namespace"), "dest-name")})}});
  // Hive's controller reads through its cache, whose NotFound says `Secret "test-secret"`; its
  // Go test's fake client words it `secrets "test-secret"`.
  rig.Check(rig.Reconcile(),
            Expect::FailingSyncSet("test-syncset",
                                   "failed to read secret 0: Secret \"test-secret\" not found")
                .Requeue());
}

}  // namespace
}  // namespace syncbus::conformance::hive
