// What Hive's controller does that its Go tests leave out, read from its code and checked against
// the real controller (tests/e2e/hive-differential): the skip annotations as Go booleans, a
// missing Unreachable condition, fake clusters, the ClusterSync and lease of a cluster with no set,
// the lease on a failing full reapply, the API URL and IP overrides, patches without a namespace
// or in YAML, the order between sets, and objects Hive applied client-side.
#include <doctest/doctest.h>

#include "common/base64.h"
#include "common/go_json.h"
#include "consumer/client_side_apply.h"
#include "consumer/set_applier.h"
#include "tests/conformance/hive/rig.h"

namespace syncbus::conformance::hive {
namespace {

namespace res = kube::resources;
using namespace std::chrono_literals;

TEST_CASE(
    "Hive rules: the pause annotations are Go booleans, relocation and a missing Unreachable "
    "condition skip") {
  Rig rig;
  Rig::Cd cd;
  bool skipped = true;
  SUBCASE("syncset-pause True") {
    cd.annotations = {{"hive.openshift.io/syncset-pause", "True"}};
  }
  SUBCASE("syncset-pause 1") {
    cd.annotations = {{"hive.openshift.io/syncset-pause", "1"}};
  }
  SUBCASE("syncset-pause t") {
    cd.annotations = {{"hive.openshift.io/syncset-pause", "t"}};
  }
  SUBCASE("syncset-pause yes is no Go boolean") {
    cd.annotations = {{"hive.openshift.io/syncset-pause", "yes"}};
    skipped = false;
  }
  SUBCASE("syncset-pause false") {
    cd.annotations = {{"hive.openshift.io/syncset-pause", "false"}};
    skipped = false;
  }
  SUBCASE("reconcile-pause TRUE") {
    cd.annotations = {{"hive.openshift.io/reconcile-pause", "TRUE"}};
  }
  SUBCASE("relocate, whatever its value") {
    cd.annotations = {{"hive.openshift.io/relocate", "other-hive/outgoing"}};
  }
  SUBCASE("no Unreachable condition") {
    cd.unreachable = std::nullopt;
  }
  rig.CreateCd(cd);
  Reconciled r = rig.Reconcile();
  if (skipped) {
    rig.Check(r, Expect().NoWork());
  } else {
    rig.Check(r, {});
  }
}

TEST_CASE("Hive rules: a fake cluster gets no traffic and every set succeeds") {
  Rig rig;
  rig.CreateCd(Rig::Cd().Annotations({{"hive.openshift.io/fake-cluster", "true"}}));
  const std::string ns = rig.T("never-created");
  rig.CreateSyncSet("test-syncset", {{"resourceApplyMode", "Sync"},
                                     {"resources", Resources({ConfigMap(ns, "x")})}});
  Reconciled r = rig.Reconcile();
  rig.Check(r, Expect().SyncSets(std::vector<SyncStatus>{
                   SyncStatus("test-syncset").ResourcesToDelete({ConfigMapRef(ns, "x")})}));
  CHECK(rig.TargetGet(res::kConfigMaps, ns, "x").is_null());
}

TEST_CASE(
    "Hive rules: a cluster with no set gets its ClusterSync and lease, renewed on every full "
    "reapply") {
  Rig rig;
  rig.CreateCd();
  Reconciled r = rig.Reconcile();
  rig.Check(r, {});
  CHECK_FALSE(rig.GetClusterSync()["status"].value("firstSuccessTime", "").empty());
  // Nothing to do until the reapply interval has passed.
  Reconciled again = rig.Reconcile();
  CHECK_FALSE(again.sent);
  // Due: the lease is renewed, with no set.
  Json lease = rig.GetLease();
  lease["spec"]["renewTime"] = "2020-01-02T03:04:05.000000Z";
  Ok(rig.hub().Update(kube::Object(res::kClusterSyncLeases, rig.ns(), kCdName), lease), "lease");
  Reconciled due = rig.Reconcile();
  CHECK(due.sent);
  CHECK(due.full_reapply);
  rig.Check(due, {});
}

TEST_CASE(
    "Hive rules: the lease is renewed by a full reapply that fails, with six fraction digits") {
  Rig rig;
  rig.CreateCd();
  rig.CreateSyncSet("test-syncset", {{"resources", Resources({ConfigMap(rig.T("missing"), "x")})}});
  rig.CreateClusterSync();
  rig.CreateLease(RealClock().WallNow() - 3h);
  Reconciled r = rig.Reconcile();
  CHECK(r.full_reapply);
  rig.Check(r, Expect::FailingSyncSet(
                   "test-syncset",
                   "failed to apply resource 0: error when creating \"object\": namespaces \"" +
                       rig.T("missing") + "\" not found")
                   .Requeue());
}

// The admin kubeconfig with its server replaced (and, optionally, the TLS name to check).
std::string KubeconfigWithServer(Rig& rig, const std::string& server,
                                 const std::string& tls_server_name) {
  Json secret = Ok(rig.hub().Get(kube::Object(res::kSecrets, rig.ns(),
                                              std::string(kCdName) + "-admin-kubeconfig")),
                   "kubeconfig");
  std::string yaml = *DecodeBase64(secret["data"]["kubeconfig"].get<std::string>());
  size_t at = yaml.find("server: ");
  REQUIRE(at != std::string::npos);
  size_t end = yaml.find('\n', at);
  std::string line = "server: " + server;
  if (!tls_server_name.empty())
    line += "\n" + std::string(at - yaml.rfind('\n', at) - 1, ' ') +
            "tls-server-name: " + tls_server_name;
  yaml.replace(at, end - at, line);
  secret["data"]["kubeconfig"] = EncodeBase64(yaml);
  Ok(rig.hub().Update(
         kube::Object(res::kSecrets, rig.ns(), std::string(kCdName) + "-admin-kubeconfig"), secret),
     "kubeconfig");
  return yaml;
}

TEST_CASE(
    "Hive rules: spec.controlPlaneConfig.apiURLOverride is used while ActiveAPIURLOverride is "
    "True") {
  Rig rig;
  const std::string real = rig.target().config().server;
  bool active = true;
  SUBCASE("active") {}
  SUBCASE("not active: the kubeconfig's server") {
    active = false;
  }
  Json condition = {{"type", "ActiveAPIURLOverride"},
                    {"status", active ? "True" : "False"},
                    {"reason", "Test"},
                    {"message", "test"},
                    {"lastTransitionTime", kTimeInThePast},
                    {"lastProbeTime", kTimeInThePast}};
  rig.CreateCd(
      Rig::Cd().ControlPlane({{"apiURLOverride", real}}).ExtraConditions(Json::array({condition})));
  // The kubeconfig names a server that is not there.
  KubeconfigWithServer(rig, "https://127.0.0.1:1", "");
  const std::string ns = rig.T("override");
  rig.CreateTargetNamespace(ns);
  rig.CreateSyncSet("test-syncset", {{"resources", Resources({ConfigMap(ns, "via-override")})}});
  rig.CreateClusterSync();
  Reconciled r = rig.Reconcile();
  if (active) {
    rig.Check(r, Expect().SyncSets(std::vector<SyncStatus>{SyncStatus("test-syncset")}));
    CHECK_FALSE(rig.TargetGet(res::kConfigMaps, ns, "via-override").is_null());
  } else {
    // Nothing answers at the kubeconfig's server: nothing is recorded (next test).
    CHECK_FALSE(r.sync_status.ok());
    CHECK(rig.Entries("syncSets").empty());
    CHECK(rig.TargetGet(res::kConfigMaps, ns, "via-override").is_null());
  }
}

TEST_CASE("Hive rules: a cluster whose API server answers no request gets nothing written") {
  // Hive reads the target's OpenAPI schema first and returns the error: no ClusterSync, status or
  // lease write. Its hibernation and pool controllers then see no failing cluster.
  Rig rig;
  rig.CreateCd();
  KubeconfigWithServer(rig, "https://127.0.0.1:1", "");
  rig.CreateSyncSet("test-syncset",
                    {{"resources", Resources({ConfigMap(rig.T("dest-namespace"), "dest-name")})}});
  SUBCASE("a new cluster: no ClusterSync, no lease") {
    Reconciled r = rig.Reconcile();
    CHECK(r.sent);
    CHECK(r.sync_status.code() == Code::kUnavailable);
    CHECK(rig.GetClusterSync().is_null());
    CHECK(rig.GetLease().is_null());
  }
  SUBCASE("a cluster synced before (now hibernating): its status and lease stay as they were") {
    rig.CreateClusterSync(
        {SyncStatus("test-syncset").TransitionInThePast().FirstSuccessInThePast()});
    rig.CreateLease(RealClock().WallNow() - 3h);  // a full reapply is due
    const Json before = rig.GetClusterSync()["status"];
    const std::string renewed = rig.GetLease()["spec"]["renewTime"];
    Reconciled r = rig.Reconcile();
    CHECK(r.full_reapply);
    CHECK(r.sync_status.code() == Code::kUnavailable);
    CHECK(rig.GetClusterSync()["status"] == before);
    CHECK(rig.GetLease()["spec"]["renewTime"] == renewed);
  }
}

TEST_CASE("Hive rules: spec.controlPlaneConfig.apiServerIPOverride connects to that address") {
  Rig rig;
  const std::string real = rig.target().config().server;  // https://127.0.0.1:PORT
  const std::string port = real.substr(real.rfind(':') + 1);
  // A name that does not resolve; the certificate is checked for localhost.
  rig.CreateCd(Rig::Cd().ControlPlane({{"apiServerIPOverride", "127.0.0.1"}}));
  KubeconfigWithServer(rig, "https://syncbus-ip-override.invalid:" + port, "localhost");
  const std::string ns = rig.T("ip-override");
  rig.CreateTargetNamespace(ns);
  rig.CreateSyncSet("test-syncset", {{"resources", Resources({ConfigMap(ns, "via-ip")})}});
  rig.CreateClusterSync();
  rig.Check(rig.Reconcile(),
            Expect().SyncSets(std::vector<SyncStatus>{SyncStatus("test-syncset")}));
  CHECK_FALSE(rig.TargetGet(res::kConfigMaps, ns, "via-ip").is_null());
}

TEST_CASE(
    "Hive rules: a patch without a namespace patches in default, and YAML patch bodies work") {
  Rig rig;
  rig.CreateCd();
  rig.CreateClusterSync();
  const std::string name = rig.T("patched-in-default");
  rig.CreateTargetObject(res::kConfigMaps, ConfigMap("default", name));
  rig.CreateSyncSet(
      "test-syncset",
      {{"patches", Json::array({{{"apiVersion", "v1"},
                                 {"kind", "ConfigMap"},
                                 {"name", name},
                                 {"patchType", "merge"},
                                 {"patch", "metadata:\n  annotations:\n    p: yaml\n"}}})}});
  rig.Check(rig.Reconcile(),
            Expect().SyncSets(std::vector<SyncStatus>{SyncStatus("test-syncset")}));
  CHECK(rig.TargetGet(res::kConfigMaps, "default", name)["metadata"]["annotations"].value(
            "p", "") == "yaml");
}

TEST_CASE(
    "Hive rules: a patch names its kind as kubectl reads it: any case, the plural or a short "
    "name") {
  // Hive hands "<kind>.<version>.<group>/<name>" to kubectl patch, which reads it as a resource.
  Rig rig;
  const std::string ns = rig.Start("patched");
  Json patches = Json::array();
  const std::vector<std::string> kinds = {"ConfigMap", "configmap", "CONFIGMAP", "configmaps",
                                          "cm"};
  for (size_t i = 0; i < kinds.size(); ++i) {
    rig.CreateTargetObject(res::kConfigMaps, ConfigMap(ns, "cm-" + std::to_string(i)));
    patches.push_back({{"apiVersion", "v1"},
                       {"kind", kinds[i]},
                       {"name", "cm-" + std::to_string(i)},
                       {"namespace", ns},
                       {"patchType", "merge"},
                       {"patch", R"({"data":{"patched":"yes"}})"}});
  }
  rig.CreateSyncSet("test-syncset", {{"patches", patches}});
  rig.Check(rig.Reconcile(),
            Expect().SyncSets(std::vector<SyncStatus>{SyncStatus("test-syncset")}));
  for (size_t i = 0; i < kinds.size(); ++i) {
    INFO("kind " << kinds[i]);
    CHECK(rig.TargetGet(res::kConfigMaps, ns, "cm-" + std::to_string(i))["data"].value(
              "patched", "") == "yes");
  }
}

TEST_CASE("Hive rules: a namespaced resource without a namespace fails as kubectl does") {
  Rig rig;
  rig.CreateCd();
  rig.CreateClusterSync();
  rig.CreateSyncSet(
      "test-syncset",
      {{"resources", Resources({{{"apiVersion", "v1"},
                                 {"kind", "ConfigMap"},
                                 {"metadata", {{"name", rig.T("no-namespace")}}}}})}});
  rig.Check(
      rig.Reconcile(),
      Expect::FailingSyncSet(
          "test-syncset",
          "failed to apply resource 0: error when retrieving current configuration of:\n"
          "Resource: \"/v1, Resource=configmaps\", GroupVersionKind: \"/v1, Kind=ConfigMap\"\n"
          "Name: \"" +
              rig.T("no-namespace") +
              "\", Namespace: \"\"\n"
              "from server for: \"object\": an empty namespace may not be set when a resource "
              "name is provided"));
}

TEST_CASE(
    "Deliberately different: a tracked cluster-scoped object recorded with a namespace is "
    "deleted") {
  // Hive records the namespace as written and deletes at that namespaced path: a 404, counted as
  // deleted, and the object stays. syncbus records the same and deletes the object.
  Rig rig;
  rig.CreateCd();
  rig.CreateClusterSync();
  const std::string name = rig.T("cluster-scoped");
  Json ns = {{"apiVersion", "v1"},
             {"kind", "Namespace"},
             {"metadata", {{"name", name}, {"namespace", "bogus"}}}};
  rig.CreateSyncSet("test-syncset",
                    {{"resourceApplyMode", "Sync"}, {"resources", Resources({ns})}});
  const Json ref = {
      {"apiVersion", "v1"}, {"kind", "Namespace"}, {"namespace", "bogus"}, {"name", name}};
  rig.Check(rig.Reconcile(), Expect().SyncSets(std::vector<SyncStatus>{
                                 SyncStatus("test-syncset").ResourcesToDelete({ref})}));
  REQUIRE_FALSE(rig.TargetGet(res::kNamespaces, "", name).is_null());
  const std::string first_success = rig.Entries("syncSets").at(0).value("firstSuccessTime", "");
  Json ss = Ok(rig.hub().Get(kube::Object(res::kSyncSets, rig.ns(), "test-syncset")), "SyncSet");
  ss["spec"]["resources"] = Json::array();
  Ok(rig.hub().Update(kube::Object(res::kSyncSets, rig.ns(), "test-syncset"), ss), "SyncSet");
  rig.Check(rig.Reconcile(),
            Expect()
                .SyncSets(std::vector<SyncStatus>{
                    SyncStatus("test-syncset").Generation(2).FirstSuccessAt(first_success)})
                .LeaseUnchanged());
  // Gone, or going (a real API server keeps a deleted namespace Terminating until its controller,
  // absent from the test's control plane, empties it).
  Json after = rig.TargetGet(res::kNamespaces, "", name);
  CHECK((after.is_null() || after["metadata"].contains("deletionTimestamp")));
}

TEST_CASE(
    "Hive rules: SyncSets apply in name order, so a later set may use what an earlier one made") {
  Rig rig;
  rig.CreateCd();
  rig.CreateClusterSync();
  const std::string ns = rig.T("made-by-set-a");
  // Set a makes the namespace last; set b puts an object in it.
  rig.CreateSyncSet(
      "a-namespaces",
      {{"resources",
        Resources({ConfigMap("default", rig.T("first")),
                   {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}}})}});
  rig.CreateSyncSet("b-contents", {{"resources", Resources({ConfigMap(ns, "inside")})}});
  rig.Check(rig.Reconcile(), Expect().SyncSets(std::vector<SyncStatus>{SyncStatus("a-namespaces"),
                                                                       SyncStatus("b-contents")}));
  CHECK_FALSE(rig.TargetGet(res::kConfigMaps, ns, "inside").is_null());
}

TEST_CASE(
    "Hive rules: an object Hive applied client-side loses a removed key once syncbus applies it") {
  Rig rig;
  const std::string ns = rig.Start("taken-over");
  // As Hive's kubectl left it: created with the last-applied annotation by an Update field manager.
  Json before = ConfigMap(ns, "cm");
  before["metadata"]["labels"] = {{"hive.openshift.io/managed", "true"}};
  before["data"] = {{"kept", "1"}, {"removed", "2"}};
  Json applied = before;
  applied["metadata"]["annotations"] = Json::object();
  before["metadata"]["annotations"] = {
      {consumer::kLastAppliedAnnotation, GoJsonEncode(applied) + "\n"}};
  kube::ClusterConfig hive = rig.target().config();
  hive.user_agent = "Go-http-client/2.0";  // the field manager Hive's mce-2.2 kubectl wrote as
  kube::ClientImpl as_hive(hive, rig.transport());
  Ok(as_hive.Create(kube::Collection(res::kConfigMaps, ns), before), "Hive's object");
  Json now = ConfigMap(ns, "cm");
  now["data"] = {{"kept", "1"}};
  rig.CreateSyncSet("test-syncset", {{"resources", Resources({now})}});
  rig.Check(rig.Reconcile(),
            Expect().SyncSets(std::vector<SyncStatus>{SyncStatus("test-syncset")}));
  Json cm = rig.TargetGet(res::kConfigMaps, ns, "cm");
  CHECK(cm["data"] == Json({{"kept", "1"}}));
  // The annotation says what syncbus applied, so Hive's next three-way merge is right too.
  Json expected = now;
  expected["metadata"]["labels"] = {{"hive.openshift.io/managed", "true"}};
  expected["metadata"]["annotations"] = Json::object();
  CHECK(cm["metadata"]["annotations"].value(consumer::kLastAppliedAnnotation, "") ==
        GoJsonEncode(expected) + "\n");
  for (const auto& entry : cm["metadata"]["managedFields"]) {
    CHECK_MESSAGE(entry.value("operation", "") != "Update",
                  "client-side apply's entry left: " << entry.dump());
  }
}

}  // namespace
}  // namespace syncbus::conformance::hive
