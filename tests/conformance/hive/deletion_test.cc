// Hive's clustersync tests about resourceApplyMode and deletion: SyncSetRenamed, SyncSetDeleted,
// ResourceRemovedFromSyncSet, ErrorDeleting, DeleteErrorDoesNotBlockOtherDeletes,
// ResourcesToDeleteAreOrdered, SyncToUpsertResourceApplyMode, UpsertToSyncResourceApplyMode.
// Where Hive's mocks fail a deletion, the object on the target carries a label that a webhook
// refuses deletions of (Rig::FailLabelledDeletes).
#include <algorithm>

#include <doctest/doctest.h>

#include "common/base64.h"
#include "common/time_format.h"
#include "common/yaml_json.h"
#include "tests/conformance/hive/rig.h"
#include "tests/support/child_process.h"
#include "tests/support/files.h"
#include "tests/support/wait.h"

namespace syncbus::conformance::hive {
namespace {

namespace res = kube::resources;
using namespace std::chrono_literals;

// A ConfigMap on the target whose deletion fails.
void CreateUndeletable(Rig& rig, const std::string& ns, const std::string& name) {
  Json cm = ConfigMap(ns, name);
  cm["metadata"]["labels"] = {{kFailDeleteLabel, "true"}};
  rig.CreateTargetObject(res::kConfigMaps, cm);
}

// What deleting an undeletable object says, as a failure message of Hive's.
std::string DeleteFailure(Rig& rig, const std::string& ns, const std::string& name) {
  static std::string why;
  if (why.empty()) {
    const std::string probe_ns = rig.T("delete-probe");
    rig.CreateTargetNamespace(probe_ns);
    CreateUndeletable(rig, probe_ns, "probe");
    Status s = rig.target().Delete(kube::Object(res::kConfigMaps, probe_ns, "probe"), {});
    REQUIRE_FALSE(s.ok());
    why = s.message();
  }
  return "failed to delete v1, Kind=ConfigMap " + ns + "/" + name +
         ": could not delete resource: " + why;
}

TEST_CASE("TestReconcileClusterSync_SyncSetRenamed") {
  Rig rig;
  rig.CreateCd();
  const std::string ns = rig.T("dest-namespace");
  rig.CreateTargetNamespace(ns);
  rig.CreateTargetObject(res::kConfigMaps, ConfigMap(ns, "dest-name"));
  const std::string uid = rig.TargetGet(res::kConfigMaps, ns, "dest-name")["metadata"]["uid"];
  rig.CreateClusterSync({SyncStatus("test-syncset")
                             .TransitionInThePast()
                             .FirstSuccessInThePast()
                             .ResourcesToDelete({ConfigMapRef(ns, "dest-name")})});
  rig.CreateSyncSet(
      "renamed-test-syncset",
      {{"resourceApplyMode", "Sync"}, {"resources", Resources({ConfigMap(ns, "dest-name")})}}, 2);
  rig.CreateLease(Now() - 1h);
  Reconciled r = rig.Reconcile();
  rig.Check(
      r,
      Expect()
          .SyncSets(std::vector<SyncStatus>{SyncStatus("renamed-test-syncset")
                                                .ResourcesToDelete({ConfigMapRef(ns, "dest-name")})
                                                .Generation(2)})
          .LeaseUnchanged());
  Json cm = rig.TargetGet(res::kConfigMaps, ns, "dest-name");
  REQUIRE_FALSE(cm.is_null());
  // Deliberately different: Hive deletes the object and applies it again (a new object, gone in
  // between); the renamed set lists it, so syncbus leaves it where it is.
  CHECK(cm["metadata"]["uid"] == uid);
}

TEST_CASE("TestReconcileClusterSync_SyncSetDeleted") {
  Rig rig;
  const bool sync = ApplyModeSubcases("upsert", "sync");
  rig.CreateCd();
  const std::string ns = rig.T("dest-namespace");
  rig.CreateTargetNamespace(ns);
  rig.CreateTargetObject(res::kConfigMaps, ConfigMap(ns, "dest-name"));
  SyncStatus existing = SyncStatus("test-syncset").TransitionInThePast().FirstSuccessInThePast();
  if (sync) existing.ResourcesToDelete({ConfigMapRef(ns, "dest-name")});
  rig.CreateClusterSync({existing});
  rig.CreateLease(Now() - 1h);
  rig.Check(rig.Reconcile(), Expect().LeaseUnchanged());
  CHECK(rig.TargetGet(res::kConfigMaps, ns, "dest-name").is_null() == sync);
}

TEST_CASE("TestReconcileClusterSync_ResourceRemovedFromSyncSet") {
  Rig rig;
  const bool sync = ApplyModeSubcases("upsert", "sync");
  rig.CreateCd();
  const std::string ns = rig.T("dest-namespace"), other = rig.T("another-namespace");
  rig.CreateTargetNamespace(ns);
  rig.CreateTargetNamespace(other);
  rig.CreateTargetObject(res::kConfigMaps, ConfigMap(ns, "deleted-resource"));
  const char* mode = sync ? "Sync" : "Upsert";
  rig.CreateSyncSet(
      "test-syncset",
      {{"resourceApplyMode", mode}, {"resources", Resources({ConfigMap(ns, "retained-resource")})}},
      2);
  rig.CreateSyncSet("test-syncset2",
                    {{"resourceApplyMode", mode},
                     {"resources", Resources({ConfigMap(other, "another-resource")})}},
                    2);
  SyncStatus existing = SyncStatus("test-syncset").TransitionInThePast().FirstSuccessInThePast();
  SyncStatus existing2 = SyncStatus("test-syncset2").TransitionInThePast().FirstSuccessInThePast();
  SyncStatus expected = SyncStatus("test-syncset").Generation(2).FirstSuccessInThePast();
  SyncStatus expected2 = SyncStatus("test-syncset2").Generation(2).FirstSuccessInThePast();
  if (sync) {
    existing.ResourcesToDelete(
        {ConfigMapRef(ns, "deleted-resource"), ConfigMapRef(ns, "retained-resource")});
    existing2.ResourcesToDelete({ConfigMapRef(other, "another-resource")});
    expected.ResourcesToDelete({ConfigMapRef(ns, "retained-resource")});
    expected2.ResourcesToDelete({ConfigMapRef(other, "another-resource")});
  }
  rig.CreateClusterSync({existing, existing2});
  rig.CreateLease(Now() - 1h);
  rig.Check(rig.Reconcile(),
            Expect().SyncSets(std::vector<SyncStatus>{expected, expected2}).LeaseUnchanged());
  CHECK_FALSE(rig.TargetGet(res::kConfigMaps, ns, "retained-resource").is_null());
  CHECK_FALSE(rig.TargetGet(res::kConfigMaps, other, "another-resource").is_null());
  CHECK(rig.TargetGet(res::kConfigMaps, ns, "deleted-resource").is_null() == sync);
}

TEST_CASE("TestReconcileClusterSync_ErrorDeleting") {
  Rig rig;
  rig.FailLabelledDeletes();
  rig.CreateCd();
  const std::string ns = rig.T("dest-namespace");
  rig.CreateTargetNamespace(ns);
  CreateUndeletable(rig, ns, "dest-name");
  rig.CreateClusterSync({SyncStatus("test-syncset")
                             .ResourcesToDelete({ConfigMapRef(ns, "dest-name")})
                             .TransitionInThePast()
                             .FirstSuccessInThePast()});
  rig.CreateLease(Now() - 1h);
  Reconciled r = rig.Reconcile();
  rig.Check(
      r,
      Expect()
          .Failed("SyncSet test-syncset is failing")
          .SyncSets(std::vector<SyncStatus>{SyncStatus("test-syncset")
                                                .Generation(0)
                                                .Failure(DeleteFailure(rig, ns, "dest-name"))
                                                .ResourcesToDelete({ConfigMapRef(ns, "dest-name")})
                                                .FirstSuccessInThePast()})
          .LeaseUnchanged()
          .Requeue());
}

TEST_CASE("TestReconcileClusterSync_DeleteErrorDoesNotBlockOtherDeletes") {
  Rig rig;
  bool set_removed = false;
  SUBCASE("removed syncset") {
    set_removed = true;
  }
  SUBCASE("removed resource") {}
  rig.FailLabelledDeletes();
  rig.CreateCd();
  const std::string ns = rig.T("dest-namespace");
  rig.CreateTargetNamespace(ns);
  CreateUndeletable(rig, ns, "failing-resource");
  rig.CreateTargetObject(res::kConfigMaps, ConfigMap(ns, "successful-resource"));
  rig.CreateClusterSync({SyncStatus("test-syncset")
                             .ResourcesToDelete({ConfigMapRef(ns, "failing-resource"),
                                                 ConfigMapRef(ns, "successful-resource")})
                             .TransitionInThePast()
                             .FirstSuccessInThePast()});
  rig.CreateLease(Now() - 1h);
  if (!set_removed) rig.CreateSyncSet("test-syncset", {{"resourceApplyMode", "Sync"}}, 2);
  Reconciled r = rig.Reconcile();
  rig.Check(r, Expect()
                   .Failed("SyncSet test-syncset is failing")
                   .SyncSets(std::vector<SyncStatus>{
                       SyncStatus("test-syncset")
                           .Failure(DeleteFailure(rig, ns, "failing-resource"))
                           .ResourcesToDelete({ConfigMapRef(ns, "failing-resource")})
                           .FirstSuccessInThePast()
                           .Generation(set_removed ? 0 : 2)})
                   .LeaseUnchanged()
                   .Requeue());
  CHECK(rig.TargetGet(res::kConfigMaps, ns, "successful-resource").is_null());
}

// Calls `visit` with every permutation of `items`.
template <typename T, typename F>
void Permute(std::vector<T> items, F visit) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  do {
    std::vector<T> permuted;
    for (size_t i : order) permuted.push_back(items[i]);
    visit(permuted);
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST_CASE("TestReconcileClusterSync_ResourcesToDeleteAreOrdered") {
  // Hive's names, lower-cased: a real API server refuses capitals in them (the order is the same).
  Rig rig;
  rig.FailLabelledDeletes();
  const std::string a = rig.T("namespace-a"), b = rig.T("namespace-b");
  rig.CreateTargetNamespace(a);
  rig.CreateTargetNamespace(b);
  // Hive's objects, made whole for a real API server: a Service needs a port, and a
  // ClusterDeployment its CRD on the target and its required fields.
  Result<Json> crd = YamlToJson(testing::ReadFile(
      testing::SourceDir() + "/tests/kubesim/crds/hive.openshift.io_clusterdeployments.yaml"));
  REQUIRE(crd.ok());
  const kube::Resource crds{"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                            "CustomResourceDefinition", false};
  REQUIRE(rig.target()
              .Apply(kube::Object(crds, "", "clusterdeployments.hive.openshift.io"), *crd,
                     {"hive-conformance", true})
              .ok());
  // A real API server serves the kind once the CRD is established (the simulator at once).
  const kube::Resource target_cds{"hive.openshift.io", "v1", "clusterdeployments",
                                  "ClusterDeployment", true};
  REQUIRE_MESSAGE(
      testing::WaitFor([&] { return rig.target().List(kube::Collection(target_cds, a), {}).ok(); },
                       30s, 100ms),
      "the ClusterDeployment CRD is not served on the target");
  Json service = {{"apiVersion", "v1"},
                  {"kind", "Service"},
                  {"metadata", {{"namespace", a}, {"name", "name-a"}}},
                  {"spec", {{"ports", Json::array({{{"port", 80}}})}}}};
  Json cd = {{"apiVersion", "hive.openshift.io/v1"},
             {"kind", "ClusterDeployment"},
             {"metadata", {{"namespace", a}, {"name", "name-a"}}},
             {"spec",
              {{"baseDomain", "example.com"},
               {"clusterName", "name-a"},
               {"platform", {{"none", Json::object()}}}}}};
  std::vector<Json> resources = {ConfigMap(a, "name-a"), ConfigMap(a, "name-b"),
                                 ConfigMap(b, "name-a"), service, cd};
  std::vector<Json> mappings = {SecretMapping("test-secret", a, "name-a"),
                                SecretMapping("test-secret", a, "name-b"),
                                SecretMapping("test-secret", b, "name-a")};
  for (const char* name : {"resource-failing-to-delete-a", "resource-failing-to-delete-b"})
    CreateUndeletable(rig, a, name);
  CreateUndeletable(rig, b, "resource-failing-to-delete-a");
  const std::vector<Json> failing = {ConfigMapRef(a, "resource-failing-to-delete-a"),
                                     ConfigMapRef(a, "resource-failing-to-delete-b"),
                                     ConfigMapRef(b, "resource-failing-to-delete-a")};
  const std::string message = "[" + DeleteFailure(rig, a, "resource-failing-to-delete-a") + ", " +
                              DeleteFailure(rig, a, "resource-failing-to-delete-b") + ", " +
                              DeleteFailure(rig, b, "resource-failing-to-delete-a") + "]";
  const std::vector<Json> ordered = {
      {{"apiVersion", "hive.openshift.io/v1"},
       {"kind", "ClusterDeployment"},
       {"namespace", a},
       {"name", "name-a"}},
      ConfigMapRef(a, "name-a"),
      ConfigMapRef(a, "name-b"),
      ConfigMapRef(a, "resource-failing-to-delete-a"),
      ConfigMapRef(a, "resource-failing-to-delete-b"),
      ConfigMapRef(b, "name-a"),
      ConfigMapRef(b, "resource-failing-to-delete-a"),
      SecretRef(a, "name-a"),
      SecretRef(a, "name-b"),
      SecretRef(b, "name-a"),
      {{"apiVersion", "v1"}, {"kind", "Service"}, {"namespace", a}, {"name", "name-a"}}};
  // One cluster for every permutation (5! x 3!, as Hive's test): each one rewrites the set and
  // resets the status. On a real API server (four round trips through etcd per permutation, and
  // a refused deletion) every order of each list, the other list as given: 120 + 6 - 1.
  const bool sample = rig.real_apiserver();
  const int expected = sample ? 125 : 720;
  const std::vector<Json> given_resources = resources, given_mappings = mappings;
  rig.CreateCd();
  rig.CreateHubSecret(rig.ns(), "test-secret", {{"test-key", EncodeBase64("test-data")}});
  rig.CreateClusterSync();
  rig.CreateSyncSet("test-syncset", {{"resourceApplyMode", "Sync"}}, 1);
  int permutation = 0;
  Permute(resources, [&](const std::vector<Json>& r) {
    Permute(mappings, [&](const std::vector<Json>& m) {
      if (sample && r != given_resources && m != given_mappings) return;
      INFO("permutation " << permutation);
      Json ss =
          Ok(rig.hub().Get(kube::Object(res::kSyncSets, rig.ns(), "test-syncset")), "SyncSet");
      ss["spec"]["resources"] = r;
      ss["spec"]["secretMappings"] = m;
      ss = Ok(rig.hub().Update(kube::Object(res::kSyncSets, rig.ns(), "test-syncset"), ss),
              "SyncSet");
      const int64_t generation = ss["metadata"]["generation"];
      Json cs = rig.GetClusterSync();
      cs["status"] = {{"syncSets", Json::array({SyncStatus("test-syncset")
                                                    .ResourcesToDelete(failing)
                                                    .TransitionInThePast()
                                                    .FirstSuccessInThePast()
                                                    .ToJson()})}};
      REQUIRE(rig.hub().Update(kube::StatusOf(res::kClusterSyncs, rig.ns(), kCdName), cs).ok());
      Reconciled rec = rig.Reconcile();
      rig.Check(rec, Expect()
                         .Failed("SyncSet test-syncset is failing")
                         .SyncSets(std::vector<SyncStatus>{SyncStatus("test-syncset")
                                                               .Generation(generation)
                                                               .Failure(message)
                                                               .FirstSuccessInThePast()
                                                               .ResourcesToDelete(ordered)})
                         .LeaseUnchanged(permutation > 0)
                         .Requeue());
      ++permutation;
    });
  });
  CHECK(permutation == expected);
}

TEST_CASE("TestReconcileClusterSync_SyncToUpsertResourceApplyMode") {
  Rig rig;
  rig.CreateCd();
  const std::string ns = rig.T("dest-namespace"), deleted = rig.T("deleted-namespace");
  rig.CreateTargetNamespace(ns);
  rig.CreateTargetNamespace(deleted);
  rig.CreateTargetObject(res::kConfigMaps, ConfigMap(deleted, "deleted-name"));
  rig.CreateSyncSet(
      "test-syncset",
      {{"resourceApplyMode", "Upsert"}, {"resources", Resources({ConfigMap(ns, "dest-name")})}}, 2);
  rig.CreateClusterSync({SyncStatus("test-syncset")
                             .TransitionInThePast()
                             .FirstSuccessInThePast()
                             .ResourcesToDelete({ConfigMapRef(ns, "dest-name"),
                                                 ConfigMapRef(deleted, "deleted-name")})});
  rig.CreateLease(Now() - 1h);
  rig.Check(rig.Reconcile(),
            Expect()
                .SyncSets(std::vector<SyncStatus>{
                    SyncStatus("test-syncset").FirstSuccessInThePast().Generation(2)})
                .LeaseUnchanged());
  // Tracking dropped, nothing deleted.
  CHECK_FALSE(rig.TargetGet(res::kConfigMaps, deleted, "deleted-name").is_null());
}

TEST_CASE("TestReconcileClusterSync_UpsertToSyncResourceApplyMode") {
  Rig rig;
  rig.CreateCd();
  const std::string ns = rig.T("dest-namespace");
  rig.CreateTargetNamespace(ns);
  rig.CreateSyncSet(
      "test-syncset",
      {{"resourceApplyMode", "Sync"}, {"resources", Resources({ConfigMap(ns, "dest-name")})}}, 2);
  rig.CreateClusterSync({SyncStatus("test-syncset").TransitionInThePast().FirstSuccessInThePast()});
  rig.CreateLease(Now() - 1h);
  rig.Check(rig.Reconcile(), Expect()
                                 .SyncSets(std::vector<SyncStatus>{
                                     SyncStatus("test-syncset")
                                         .FirstSuccessInThePast()
                                         .Generation(2)
                                         .ResourcesToDelete({ConfigMapRef(ns, "dest-name")})})
                                 .LeaseUnchanged());
}

}  // namespace
}  // namespace syncbus::conformance::hive
