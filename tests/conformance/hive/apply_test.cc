// Hive's clustersync tests about applying a set's resources, secretMappings and patches:
// ApplyResource, ApplySecret, ApplyPatch, ApplyAllTypes, ApplyBehavior, ErrorApplyingResource,
// ErrorDecodingResource, ErrorApplyingSecret, ErrorApplyingPatch, SkipAfterFailingResource,
// FailingSyncSetDoesNotBlockOtherSyncSets, FailureMessage, WithTemplates, ApiVersionChange.
// Where Hive's mocks return "test apply error", the case makes the real request fail the way a
// cluster makes it fail (a namespace or an object that is not there), and expects Hive's message
// around that error, as Hive's own controller writes it (tests/e2e/hive-differential compares).
#include <functional>

#include <doctest/doctest.h>

#include "common/base64.h"
#include "common/yaml_json.h"
#include "consumer/client_side_apply.h"
#include "consumer/set_applier.h"
#include "tests/conformance/hive/rig.h"
#include "tests/support/hive_objects.h"
#include "tests/support/wait.h"

namespace syncbus::conformance::hive {
namespace {

namespace res = kube::resources;

std::string MissingNamespace(const std::string& ns) {
  return "error when creating \"object\": namespaces \"" + ns + "\" not found";
}

// A merge patch of a target ConfigMap (Hive's tests pass made-up kinds and patch types to a mock).
Json Patch(const std::string& ns, const std::string& name, const std::string& key = "patched") {
  return {{"apiVersion", "v1"},   {"kind", "ConfigMap"},
          {"namespace", ns},      {"name", name},
          {"patchType", "merge"}, {"patch", Json({{"data", {{key, "true"}}}}).dump()}};
}

void CheckManaged(const Json& object) {
  REQUIRE_FALSE(object.is_null());
  CHECK(object["metadata"]["labels"].value("hive.openshift.io/managed", "") == "true");
}

int64_t Rv(const Json& object) {
  return std::stoll(object["metadata"]["resourceVersion"].get<std::string>());
}

TEST_CASE("TestReconcileClusterSync_ApplyResource") {
  Rig rig;
  const bool sync = ApplyModeSubcases();
  const std::string ns = rig.Start("dest-namespace");
  rig.CreateSyncSet("test-syncset", {{"resourceApplyMode", sync ? "Sync" : "Upsert"},
                                     {"resources", Resources({ConfigMap(ns, "dest-name")})}});
  Reconciled r = rig.Reconcile();
  SyncStatus expected("test-syncset");
  if (sync) expected.ResourcesToDelete({ConfigMapRef(ns, "dest-name")});
  rig.Check(r, Expect().SyncSets(std::vector<SyncStatus>{expected}));
  CheckManaged(rig.TargetGet(res::kConfigMaps, ns, "dest-name"));
}

TEST_CASE("TestReconcileClusterSync_ApplySecret") {
  Rig rig;
  const bool sync = ApplyModeSubcases();
  const std::string ns = rig.Start("dest-namespace");
  rig.CreateHubSecret(rig.ns(), "test-secret", {{"test-key", EncodeBase64("test-data")}});
  rig.CreateSyncSet(
      "test-syncset",
      {{"resourceApplyMode", sync ? "Sync" : "Upsert"},
       {"secretMappings", Json::array({SecretMapping("test-secret", ns, "dest-name")})}});
  Reconciled r = rig.Reconcile();
  SyncStatus expected("test-syncset");
  if (sync) expected.ResourcesToDelete({SecretRef(ns, "dest-name")});
  rig.Check(r, Expect().SyncSets(std::vector<SyncStatus>{expected}));
  Json secret = rig.TargetGet(res::kSecrets, ns, "dest-name");
  CheckManaged(secret);
  CHECK(secret["data"] == Json({{"test-key", EncodeBase64("test-data")}}));
}

TEST_CASE("TestReconcileClusterSync_ApplyPatch") {
  Rig rig;
  const bool sync = ApplyModeSubcases();
  const std::string ns = rig.Start("dest-namespace");
  rig.CreateTargetObject(res::kConfigMaps, ConfigMap(ns, "dest-name"));
  rig.CreateSyncSet("test-syncset", {{"resourceApplyMode", sync ? "Sync" : "Upsert"},
                                     {"patches", Json::array({Patch(ns, "dest-name")})}});
  Reconciled r = rig.Reconcile();
  rig.Check(r, Expect().SyncSets(std::vector<SyncStatus>{
                   SyncStatus("test-syncset")}));  // patched objects are never tracked
  CHECK(rig.TargetGet(res::kConfigMaps, ns, "dest-name")["data"].value("patched", "") == "true");
}

// Hive's ApplyAllTypes and ApplyBehavior start: the ClusterDeployment, an empty ClusterSync, a
// target namespace each for the resource, the secret and the patch, the object to patch, and the
// source Secret.
void PrepareAllTypes(Rig& rig) {
  rig.CreateCd();
  rig.CreateClusterSync();
  for (const char* ns : {"resource-namespace", "secret-namespace", "patch-namespace"})
    rig.CreateTargetNamespace(rig.T(ns));
  rig.CreateTargetObject(res::kConfigMaps, ConfigMap(rig.T("patch-namespace"), "patch-name"));
  rig.CreateHubSecret(rig.ns(), "test-secret", {{"test-key", EncodeBase64("test-data")}});
}

TEST_CASE("TestReconcileClusterSync_ApplyAllTypes") {
  Rig rig;
  const bool sync = ApplyModeSubcases();
  PrepareAllTypes(rig);
  rig.CreateSyncSet(
      "test-syncset",
      {{"resourceApplyMode", sync ? "Sync" : "Upsert"},
       {"resources", Resources({ConfigMap(rig.T("resource-namespace"), "resource-name")})},
       {"secretMappings",
        Json::array({SecretMapping("test-secret", rig.T("secret-namespace"), "secret-name")})},
       {"patches", Json::array({Patch(rig.T("patch-namespace"), "patch-name")})}});
  Reconciled r = rig.Reconcile();
  SyncStatus expected("test-syncset");
  if (sync) {
    expected.ResourcesToDelete({ConfigMapRef(rig.T("resource-namespace"), "resource-name"),
                                SecretRef(rig.T("secret-namespace"), "secret-name")});
  }
  rig.Check(r, Expect().SyncSets(std::vector<SyncStatus>{expected}));
  Json resource = rig.TargetGet(res::kConfigMaps, rig.T("resource-namespace"), "resource-name");
  Json secret = rig.TargetGet(res::kSecrets, rig.T("secret-namespace"), "secret-name");
  Json patched = rig.TargetGet(res::kConfigMaps, rig.T("patch-namespace"), "patch-name");
  CheckManaged(resource);
  CheckManaged(secret);
  CHECK(patched["data"].value("patched", "") == "true");
  // Resources, then secretMappings, then patches.
  CHECK(Rv(resource) < Rv(secret));
  CHECK(Rv(secret) < Rv(patched));
}

TEST_CASE("TestReconcileClusterSync_ApplyBehavior") {
  Rig rig;
  std::string behavior;
  SUBCASE("Apply") {
    behavior = "Apply";
  }
  SUBCASE("CreateOnly") {
    behavior = "CreateOnly";
  }
  SUBCASE("CreateOrUpdate") {
    behavior = "CreateOrUpdate";
  }
  PrepareAllTypes(rig);
  rig.CreateSyncSet(
      "test-syncset",
      {{"applyBehavior", behavior},
       {"resources", Resources({ConfigMap(rig.T("resource-namespace"), "resource-name")})},
       {"secretMappings",
        Json::array({SecretMapping("test-secret", rig.T("secret-namespace"), "secret-name")})},
       {"patches", Json::array({Patch(rig.T("patch-namespace"), "patch-name")})}});
  Reconciled r = rig.Reconcile();
  rig.Check(r, Expect().SyncSets(std::vector<SyncStatus>{SyncStatus("test-syncset")}));
  Json resource = rig.TargetGet(res::kConfigMaps, rig.T("resource-namespace"), "resource-name");
  Json secret = rig.TargetGet(res::kSecrets, rig.T("secret-namespace"), "secret-name");
  CheckManaged(resource);
  CheckManaged(secret);
  // Only Apply keeps kubectl's last-applied annotation (Hive's Create and CreateOrUpdate do not
  // write it).
  bool annotated = resource["metadata"].contains("annotations") &&
                   resource["metadata"]["annotations"].contains(consumer::kLastAppliedAnnotation);
  CHECK(annotated == (behavior == "Apply"));
  // Patches are unaffected by the behavior.
  CHECK(rig.TargetGet(res::kConfigMaps, rig.T("patch-namespace"), "patch-name")["data"].value(
            "patched", "") == "true");
}

TEST_CASE("TestReconcileClusterSync_ErrorApplyingResource") {
  Rig rig;
  rig.CreateCd();
  rig.CreateClusterSync();
  const std::string ns = rig.T("dest-namespace");  // not created: the apply fails
  rig.CreateSyncSet("test-syncset", {{"resources", Resources({ConfigMap(ns, "dest-name")})}});
  Reconciled r = rig.Reconcile();
  rig.Check(r, Expect::FailingSyncSet("test-syncset",
                                      "failed to apply resource 0: " + MissingNamespace(ns))
                   .Requeue());
}

TEST_CASE("TestReconcileClusterSync_ErrorDecodingResource") {
  Rig rig;
  rig.CreateCd();
  rig.CreateClusterSync();
  // Hive's input, a resource `{}`, is refused by the hub itself (the SyncSet CRD's embedded
  // resources need apiVersion and kind), for Hive as for syncbus.
  Json ss = {{"apiVersion", "hive.openshift.io/v1"},
             {"kind", "SyncSet"},
             {"metadata", {{"name", "test-syncset"}, {"namespace", rig.ns()}}},
             {"spec",
              {{"clusterDeploymentRefs", Json::array({{{"name", kCdName}}})},
               {"resources", Json::array({Json::object()})}}}};
  auto made = rig.hub().Create(kube::Collection(res::kSyncSets, rig.ns()), ss);
  REQUIRE_FALSE(made.ok());
  CHECK(made.status().code() == Code::kInvalidArgument);
  // Should one get through, syncbus fails the set with Hive's words before applying anything.
  syncbus::hive::SyncSetCommonSpec spec;
  spec.resources.emplace_back(Json::object());
  spec.resources.emplace_back(ConfigMap("default", "never-applied"));
  consumer::PlanInput in;
  in.spec = &spec;
  consumer::SetPlan plan = consumer::PlanSet(in, nullptr);
  REQUIRE(plan.steps.size() == 1);
  CHECK(plan.steps[0].op == consumer::ApplyStep::Op::kFail);
  CHECK(plan.steps[0].failure ==
        "failed to decode resource 0: error unmarshaling JSON: while decoding JSON: Object 'Kind' "
        "is missing in '{}'");
  CHECK_FALSE(plan.steps[0].retryable);  // Hive does not requeue it
}

TEST_CASE("TestReconcileClusterSync_ErrorApplyingSecret") {
  Rig rig;
  rig.CreateCd();
  rig.CreateClusterSync();
  const std::string ns = rig.T("dest-namespace");  // not created: the apply fails
  rig.CreateHubSecret(rig.ns(), "test-secret", {{"test-key", EncodeBase64("test-data")}});
  rig.CreateSyncSet(
      "test-syncset",
      {{"secretMappings", Json::array({SecretMapping("test-secret", ns, "dest-name")})}});
  Reconciled r = rig.Reconcile();
  rig.Check(
      r, Expect::FailingSyncSet("test-syncset", "failed to apply secret 0: " + MissingNamespace(ns))
             .Requeue());
}

TEST_CASE("TestReconcileClusterSync_ErrorApplyingPatch") {
  Rig rig;
  rig.CreateCd();
  rig.CreateClusterSync();
  const std::string ns = rig.T("dest-namespace");
  rig.CreateTargetNamespace(ns);  // the object to patch is not there
  rig.CreateSyncSet("test-syncset", {{"patches", Json::array({Patch(ns, "dest-name")})}});
  Reconciled r = rig.Reconcile();
  rig.Check(r, Expect::FailingSyncSet("test-syncset",
                                      "failed to apply patch 0: configmaps \"dest-name\" not found")
                   .Requeue());
}

TEST_CASE("TestReconcileClusterSync_SkipAfterFailingResource") {
  Rig rig;
  int ok_resources = 3, ok_secrets = 3, ok_patches = 3;
  // Hive's nine sub-cases: resource, secret or patch 0, 1 or 2 fails.
  for (auto [what, ok] : {std::pair{"resource", &ok_resources}, std::pair{"secret", &ok_secrets},
                          std::pair{"patch", &ok_patches}}) {
    for (int i = 0; i < 3; ++i) {
      SUBCASE((std::string(what) + " " + std::to_string(i) + " fails").c_str()) {
        *ok = i;
      }
    }
  }
  rig.CreateCd();
  rig.CreateClusterSync();
  Json resources = Json::array(), mappings = Json::array(), patches = Json::array();
  for (int i = 0; i < 3; ++i) {
    const std::string n = std::to_string(i);
    resources.push_back(ConfigMap(rig.T("resource-namespace-" + n), "resource-name-" + n));
    rig.CreateHubSecret(rig.ns(), "test-secret-" + n,
                        {{"test-key-" + n, EncodeBase64("test-data-" + n)}});
    mappings.push_back(
        SecretMapping("test-secret-" + n, rig.T("secret-namespace-" + n), "secret-name-" + n));
    patches.push_back(Patch(rig.T("patch-namespace-" + n), "patch-name-" + n));
    // What fails is what the cluster is missing: the first failing item's namespace or object.
    if (i < ok_resources || ok_resources == 3)
      rig.CreateTargetNamespace(rig.T("resource-namespace-" + n));
    if (i < ok_secrets || ok_secrets == 3)
      rig.CreateTargetNamespace(rig.T("secret-namespace-" + n));
    rig.CreateTargetNamespace(rig.T("patch-namespace-" + n));
    if (i < ok_patches || ok_patches == 3) {
      rig.CreateTargetObject(res::kConfigMaps,
                             ConfigMap(rig.T("patch-namespace-" + n), "patch-name-" + n));
    }
  }
  rig.CreateSyncSet("test-syncset",
                    {{"resources", resources}, {"secretMappings", mappings}, {"patches", patches}});
  std::string message;
  if (ok_resources < 3) {
    const std::string n = std::to_string(ok_resources);
    message =
        "failed to apply resource " + n + ": " + MissingNamespace(rig.T("resource-namespace-" + n));
  } else if (ok_secrets < 3) {
    const std::string n = std::to_string(ok_secrets);
    message =
        "failed to apply secret " + n + ": " + MissingNamespace(rig.T("secret-namespace-" + n));
  } else {
    const std::string n = std::to_string(ok_patches);
    message = "failed to apply patch " + n + ": configmaps \"patch-name-" + n + "\" not found";
  }
  Reconciled r = rig.Reconcile();
  rig.Check(r, Expect::FailingSyncSet("test-syncset", message).Requeue());
  // What came before the failure was applied, in order; nothing after it.
  std::vector<Json> applied;
  for (int i = 0; i < 3; ++i) {
    const std::string n = std::to_string(i);
    Json cm =
        rig.TargetGet(res::kConfigMaps, rig.T("resource-namespace-" + n), "resource-name-" + n);
    CHECK(cm.is_null() == (i >= ok_resources));
    if (!cm.is_null()) applied.push_back(cm);
  }
  for (int i = 0; i < 3; ++i) {
    const std::string n = std::to_string(i);
    Json secret = rig.TargetGet(res::kSecrets, rig.T("secret-namespace-" + n), "secret-name-" + n);
    CHECK(secret.is_null() == (ok_resources < 3 || i >= ok_secrets));
    if (!secret.is_null()) applied.push_back(secret);
  }
  for (int i = 0; i < 3; ++i) {
    const std::string n = std::to_string(i);
    Json patched =
        rig.TargetGet(res::kConfigMaps, rig.T("patch-namespace-" + n), "patch-name-" + n);
    bool expect = ok_resources == 3 && ok_secrets == 3 && i < ok_patches;
    CHECK((!patched.is_null() && patched.contains("data")) == expect);
    if (expect) applied.push_back(patched);
  }
  for (size_t i = 1; i < applied.size(); ++i) CHECK(Rv(applied[i - 1]) < Rv(applied[i]));
}

TEST_CASE("TestReconcileClusterSync_FailingSyncSetDoesNotBlockOtherSyncSets") {
  Rig rig;
  int failing = 0;
  SUBCASE("resource 0 fails") {
    failing = 0;
  }
  SUBCASE("resource 1 fails") {
    failing = 1;
  }
  SUBCASE("resource 2 fails") {
    failing = 2;
  }
  rig.CreateCd();
  rig.CreateClusterSync();
  Expect expect;
  for (int i = 0; i < 3; ++i) {
    const std::string n = std::to_string(i);
    const std::string ns = rig.T("resource-namespace-" + n);
    if (i != failing) rig.CreateTargetNamespace(ns);
    rig.CreateSyncSet("test-syncset-" + n,
                      {{"resources", Resources({ConfigMap(ns, "resource-name-" + n)})}});
    SyncStatus status("test-syncset-" + n);
    if (i == failing)
      status.Failure("failed to apply resource 0: " + MissingNamespace(ns)).NoFirstSuccess();
    expect.sync_sets.push_back(status);
  }
  expect.failed_message = "SyncSet test-syncset-" + std::to_string(failing) + " is failing";
  expect.requeue = true;
  rig.Check(rig.Reconcile(), expect);
}

TEST_CASE("TestReconcileClusterSync_FailureMessage") {
  Rig rig;
  int ss = 0, sss = 0;
  std::function<std::string()> message;
  SUBCASE("multiple failing syncsets") {
    ss = 3;
    message = [] {
      return std::string("SyncSets test-syncset-0, test-syncset-1, test-syncset-2 are failing");
    };
  }
  SUBCASE("multiple failing selectorsyncsets") {
    sss = 3;
    message = [&] {
      return "SelectorSyncSets " + rig.U("test-selectorsyncset-0") + ", " +
             rig.U("test-selectorsyncset-1") + ", " + rig.U("test-selectorsyncset-2") +
             " are failing";
    };
  }
  SUBCASE("one failing syncset and selectorsyncset") {
    ss = 1;
    sss = 1;
    message = [&] {
      return "SyncSet test-syncset-0 and SelectorSyncSet " + rig.U("test-selectorsyncset-0") +
             " are failing";
    };
  }
  SUBCASE("multiple failing syncsets and selectorsyncsets") {
    ss = 3;
    sss = 3;
    message = [&] {
      return "SyncSets test-syncset-0, test-syncset-1, test-syncset-2 and SelectorSyncSets " +
             rig.U("test-selectorsyncset-0") + ", " + rig.U("test-selectorsyncset-1") + ", " +
             rig.U("test-selectorsyncset-2") + " are failing";
    };
  }
  const std::string value = rig.U("test-label-value");
  rig.CreateCd(Rig::Cd().Labels({{"test-label-key", value}}));
  rig.CreateClusterSync();
  Expect expect;
  for (int i = 0; i < ss; ++i) {
    const std::string n = std::to_string(i);
    const std::string ns = rig.T("syncset-namespace-" + n);  // missing: the apply fails
    rig.CreateSyncSet("test-syncset-" + n,
                      {{"resources", Resources({ConfigMap(ns, "syncset-name-" + n)})}});
    expect.sync_sets.push_back(SyncStatus("test-syncset-" + n)
                                   .Failure("failed to apply resource 0: " + MissingNamespace(ns))
                                   .NoFirstSuccess());
  }
  for (int i = 0; i < sss; ++i) {
    const std::string n = std::to_string(i);
    const std::string ns = rig.T("selectorsyncset-namespace-" + n);
    rig.CreateSelectorSyncSet(
        rig.U("test-selectorsyncset-" + n),
        {{"clusterDeploymentSelector", {{"matchLabels", {{"test-label-key", value}}}}},
         {"resources", Resources({ConfigMap(ns, "selectorsyncset-name-" + n)})}});
    expect.selector_sync_sets.push_back(
        SyncStatus(rig.U("test-selectorsyncset-" + n))
            .Failure("failed to apply resource 0: " + MissingNamespace(ns))
            .NoFirstSuccess());
  }
  expect.failed_message = message();
  expect.requeue = true;
  rig.Check(rig.Reconcile(), expect);
}

TEST_CASE("TestReconcileClusterSync_WithTemplates") {
  Rig rig;
  const std::string ns = rig.T("templates");
  // Hive's test templates a Pod whose fields only its mock accepts (a container without a name,
  // strings for a bool and an int): the same template actions here, in a ConfigMap a real API
  // server takes. The folded scalars (>-) are Hive's.
  const std::string resource = R"(
apiVersion: v1
kind: ConfigMap
metadata:
  name: some-config
  namespace: )" + ns + R"(
  labels:
    hive.openshift.io/managed: "true"
data:
  region: >-
    {{ fromCDLabel "hive.openshift.io/cluster-region" }}
  optional-param: ""
  log-level: debug
  command: /opt/{{ fromCDLabel "hive.openshift.io/cluster-platform" }}/do-the-thing
  image: quay.io/openshift/release:{{ fromCDLabel "hive.openshift.io/version" }}
  imagePullPolicy: >-
    {{ fromCDLabel "some.label.that/does-not-exist" }}
  failureThreshold: >-
    {{ fromCDLabel "hive.openshift.io/version-major" }}
  enableServiceLinks: >-
    {{ fromCDLabel "hive.openshift.io/hiveutil-created" }}
)";
  const std::string patch =
      R"({"metadata": {"annotations": {"test": "{{ fromCDLabel "hive.openshift.io/cluster-platform" }}" }}})";
  bool enabled = false;
  Json labels = Json::object();
  SUBCASE("templates not enabled: resource and patch unchanged") {}
  SUBCASE("templates enabled") {
    enabled = true;
    labels = {{"hive.openshift.io/cluster-region", "us-east-1"},
              {"hive.openshift.io/cluster-platform", "aws"},
              {"hive.openshift.io/version", "4.13.8"},
              {"hive.openshift.io/version-major", "4"},
              {"hive.openshift.io/version-minor", "13"},
              {"hive.openshift.io/version-fix", "8"},
              {"hive.openshift.io/hiveutil-created", "true"}};
  }
  rig.CreateCd(Rig::Cd().Labels(labels));
  rig.CreateClusterSync();
  rig.CreateTargetNamespace(ns);
  rig.CreateTargetObject(res::kConfigMaps, ConfigMap(ns, "mycm"));
  Result<Json> object = YamlToJson(resource);
  REQUIRE(object.ok());
  rig.CreateSyncSet("test-syncset", {{"resourceApplyMode", "Upsert"},
                                     {"resources", Json::array({*object})},
                                     {"patches", Json::array({{{"apiVersion", "v1"},
                                                               {"kind", "ConfigMap"},
                                                               {"name", "mycm"},
                                                               {"namespace", ns},
                                                               {"patch", patch}}})},
                                     {"enablePatchTemplates", enabled},
                                     {"enableResourceTemplates", enabled}});
  Reconciled r = rig.Reconcile();
  Json applied = rig.TargetGet(res::kConfigMaps, ns, "some-config");
  REQUIRE_FALSE(applied.is_null());
  if (enabled) {
    rig.Check(r, Expect().SyncSets(std::vector<SyncStatus>{SyncStatus("test-syncset")}));
    Json expected = {{"region", "us-east-1"},
                     {"optional-param", ""},
                     {"log-level", "debug"},
                     {"command", "/opt/aws/do-the-thing"},
                     {"image", "quay.io/openshift/release:4.13.8"},
                     {"imagePullPolicy", ""},
                     {"failureThreshold", "4"},
                     {"enableServiceLinks", "true"}};
    CHECK(applied["data"] == expected);
    CHECK(rig.TargetGet(res::kConfigMaps, ns, "mycm")["metadata"]["annotations"].value(
              "test", "") == "aws");
  } else {
    CHECK(applied["data"] == (*object)["data"]);  // unchanged
    // The untemplated patch is not even YAML: a real kubectl patch (Hive's) refuses it.
    std::vector<Json> entries = rig.Entries("syncSets");
    REQUIRE(entries.size() == 1);
    CHECK(entries[0]["result"] == "Failure");
    const std::string prefix = "failed to apply patch 0: unable to parse \"" + patch + "\": ";
    CHECK(entries[0].value("failureMessage", "").rfind(prefix, 0) == 0);
  }
}

TEST_CASE("TestReconcileClusterSync_ApiVersionChange") {
  Rig rig;
  // A kind served at v1beta1 and v1 on the target (Hive's group "foo" is no valid CRD group).
  const std::string group = "foo.conformance.syncbus.io";
  const std::string ns = rig.T("api-version");
  Json crd =
      syncbus::testing::OpenCrd(group, "Foo", "foos", /*namespaced=*/true, {"v1beta1", "v1"});
  const kube::Resource crds{"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                            "CustomResourceDefinition", false};
  auto made =
      rig.target().Apply(kube::Object(crds, "", "foos." + group), crd, {"hive-conformance", true});
  REQUIRE_MESSAGE(made.ok(), made.status().ToString());
  const kube::Resource foos_v1beta1{group, "v1beta1", "foos", "Foo", true};
  rig.CreateTargetNamespace(ns);
  Json ex = {
      {"apiVersion", group + "/v1beta1"},
      {"kind", "Foo"},
      {"metadata",
       {{"name", "foo"}, {"namespace", ns}, {"labels", {{"hive.openshift.io/managed", "true"}}}}}};
  // The served kind may take a moment to appear on a real API server.
  Result<Json> existing = Status(Code::kNotFound, "not yet");
  testing::WaitFor(
      [&] {
        existing = rig.target().Create(kube::Collection(foos_v1beta1, ns), ex);
        return existing.ok() || existing.status().code() != Code::kNotFound;
      },
      std::chrono::seconds(20), std::chrono::milliseconds(100));
  REQUIRE_MESSAGE(existing.ok(), existing.status().ToString());
  Json next = ex;
  next["apiVersion"] = group + "/v1";
  rig.CreateCd();
  Json old_ref = {
      {"apiVersion", group + "/v1beta1"}, {"kind", "Foo"}, {"namespace", ns}, {"name", "foo"}};
  Json new_ref = {
      {"apiVersion", group + "/v1"}, {"kind", "Foo"}, {"namespace", ns}, {"name", "foo"}};
  rig.CreateClusterSync(
      {SyncStatus("test-syncset").FirstSuccessInThePast().ResourcesToDelete({old_ref})});
  rig.CreateSyncSet("test-syncset",
                    {{"resourceApplyMode", "Sync"}, {"resources", Json::array({next})}});
  Reconciled r = rig.Reconcile();
  rig.Check(r,
            Expect().SyncSets(std::vector<SyncStatus>{
                SyncStatus("test-syncset").ResourcesToDelete({new_ref}).FirstSuccessInThePast()}));
  // The same object: applied at v1, not deleted for its old version.
  Json object = rig.TargetGet(foos_v1beta1, ns, "foo");
  REQUIRE_FALSE(object.is_null());
  CHECK(object["metadata"]["uid"] == (*existing)["metadata"]["uid"]);
}

}  // namespace
}  // namespace syncbus::conformance::hive
