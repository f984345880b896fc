#include "common/hive/types.h"

#include <doctest/doctest.h>

using namespace syncbus;
using namespace syncbus::hive;

TEST_CASE("SyncSet parses with upstream defaults") {
  auto ss = SyncSet::FromJson(Json::parse(R"({
    "apiVersion":"hive.openshift.io/v1","kind":"SyncSet",
    "metadata":{"name":"s","namespace":"ns","generation":3},
    "spec":{"clusterDeploymentRefs":[{"name":"c1"},{"name":"c2"}],
            "resources":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}],
            "patches":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","patch":"{}"}],
            "secretMappings":[{"sourceRef":{"name":"a"},"targetRef":{"name":"b","namespace":"t"}}]}})"));
  REQUIRE(ss.ok());
  CHECK(ss->meta.generation == 3);
  CHECK(ss->cluster_deployment_refs == std::vector<std::string>{"c1", "c2"});
  CHECK(ss->spec.resource_apply_mode == ResourceApplyMode::kUpsert);
  CHECK(ss->spec.apply_behavior == ApplyBehavior::kApply);
  REQUIRE(ss->spec.patches.size() == 1);
  CHECK(ss->spec.patches[0].patch_type == PatchType::kStrategic);
  CHECK(ss->spec.secret_mappings[0].target.ns == "t");
}

TEST_CASE("SyncSet modes and behaviours") {
  auto ss = SyncSet::FromJson(Json::parse(R"({"metadata":{"name":"s","namespace":"n"},
    "spec":{"clusterDeploymentRefs":[],"resourceApplyMode":"Sync","applyBehavior":"CreateOnly",
            "patches":[{"apiVersion":"v1","kind":"K","name":"x","patch":"[]","patchType":"json"}]}})"));
  REQUIRE(ss.ok());
  CHECK(ss->spec.resource_apply_mode == ResourceApplyMode::kSync);
  CHECK(ss->spec.apply_behavior == ApplyBehavior::kCreateOnly);
  CHECK(ss->spec.patches[0].patch_type == PatchType::kJson);
  // Values Hive does not know are read as Hive reads them: Apply; a patch type that fails that
  // patch.
  auto odd = SyncSet::FromJson(Json::parse(R"({"metadata":{"name":"s","namespace":"n"},
    "spec":{"clusterDeploymentRefs":[],"applyBehavior":"Sometimes",
            "patches":[{"apiVersion":"v1","kind":"K","name":"x","patch":"{}","patchType":"bogus"}]}})"));
  REQUIRE(odd.ok());
  CHECK(odd->spec.apply_behavior == ApplyBehavior::kApply);
  CHECK(odd->spec.patches[0].patch_type == PatchType::kInvalid);
  CHECK(odd->spec.patches[0].patch_type_text == "bogus");
  auto wrong_type = SyncSet::FromJson(Json::parse(R"({"metadata":{"name":"s","namespace":"n"},
    "spec":{"clusterDeploymentRefs":"c1"}})"));
  REQUIRE_FALSE(wrong_type.ok());
  CHECK(wrong_type.status().message().find("spec.clusterDeploymentRefs") != std::string::npos);
}

TEST_CASE("a set's resources are kept, or only checked, as the reader asks") {
  const Json good = Json::parse(R"({"metadata":{"name":"s","namespace":"n"},
    "spec":{"clusterDeploymentRefs":[],"clusterDeploymentSelector":{},
            "resources":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}},
                         {"apiVersion":"v2","kind":"K","metadata":{"name":"b"}}]}})");
  auto kept = SyncSet::FromJson(good);
  REQUIRE(kept.ok());
  REQUIRE(kept->spec.resources.size() == 2);
  CHECK(kept->spec.resources[1].api_version() == "v2");
  auto checked = SyncSet::FromJson(good, SetResources::kCheckOnly);
  REQUIRE(checked.ok());
  CHECK(checked->spec.resources.empty());
  auto selector_checked = SelectorSyncSet::FromJson(good, SetResources::kCheckOnly);
  REQUIRE(selector_checked.ok());
  CHECK(selector_checked->spec.resources.empty());
  // Checked or kept, a resource that is not an object makes the set invalid.
  const Json bad = Json::parse(R"({"metadata":{"name":"s","namespace":"n"},
    "spec":{"clusterDeploymentRefs":[],"clusterDeploymentSelector":{},
            "resources":[{"kind":"ConfigMap"},"not an object"]}})");
  for (SetResources mode : {SetResources::kKeep, SetResources::kCheckOnly}) {
    auto ss = SyncSet::FromJson(bad, mode);
    REQUIRE_FALSE(ss.ok());
    CHECK(ss.status().message().find("spec.resources[1]: expected an object") != std::string::npos);
    CHECK_FALSE(SelectorSyncSet::FromJson(bad, mode).ok());
  }
}

TEST_CASE("ClusterDeployment skip rules") {
  auto parse = [](const char* extra_meta, const char* spec, const char* status) {
    std::string j = std::string(R"({"metadata":{"name":"c","namespace":"c")") + extra_meta +
                    "},\"spec\":" + spec + ",\"status\":" + status + "}";
    auto cd = ClusterDeployment::FromJson(Json::parse(j));
    REQUIRE(cd.ok());
    return *cd;
  };
  const char* installed =
      R"({"installed":true,"clusterMetadata":{"adminKubeconfigSecretRef":{"name":"k"}}})";
  const char* reachable = R"({"conditions":[{"type":"Unreachable","status":"False"}]})";
  CHECK(parse("", installed, reachable).SkipReason().empty());
  CHECK(parse("", installed, reachable).admin_kubeconfig_secret == "k");
  // Go's strconv.ParseBool, as Hive reads the pause annotations.
  for (const char* yes : {"true", "True", "TRUE", "t", "T", "1"}) {
    std::string meta =
        std::string(R"(,"annotations":{"hive.openshift.io/syncset-pause":")") + yes + R"("})";
    CHECK(parse(meta.c_str(), installed, reachable).SkipReason() == "paused");
  }
  for (const char* no : {"false", "0", "yes", "on", ""}) {
    std::string meta =
        std::string(R"(,"annotations":{"hive.openshift.io/syncset-pause":")") + no + R"("})";
    CHECK(parse(meta.c_str(), installed, reachable).SkipReason().empty());
  }
  CHECK(parse(R"(,"annotations":{"hive.openshift.io/reconcile-pause":"1"})", installed, reachable)
            .SkipReason() == "reconcile-paused");
  CHECK(parse(R"(,"annotations":{"hive.openshift.io/relocate":""})", installed, reachable)
            .SkipReason() == "relocating");
  CHECK(parse(R"(,"annotations":{"hive.openshift.io/fake-cluster":"true"})", installed, reachable)
            .fake());
  CHECK(
      parse(R"(,"deletionTimestamp":"2026-01-01T00:00:00Z")", installed, reachable).SkipReason() ==
      "deleting");
  CHECK(parse("", R"({"installed":false})", reachable).SkipReason() == "not-installed");
  CHECK(parse("", installed, R"({"conditions":[{"type":"Unreachable","status":"True"}]})")
            .SkipReason() == "unreachable");
  CHECK(parse("", installed, R"({"conditions":[{"type":"Unreachable","status":"Unknown"}]})")
            .SkipReason() == "unreachable");
  CHECK(parse("", installed, "{}").SkipReason() ==
        "unreachable");  // Hive: no condition yet is unreachable
}

TEST_CASE("ClusterDeployment API URL and IP overrides, as Hive's remote client uses them") {
  auto cd = ClusterDeployment::FromJson(Json::parse(R"({"metadata":{"name":"c","namespace":"c"},
    "spec":{"installed":true,"controlPlaneConfig":{"apiURLOverride":"https://alt:6443","apiServerIPOverride":"10.0.0.1"}},
    "status":{"installedTimestamp":"2024-01-01T00:00:00Z","conditions":[{"type":"ActiveAPIURLOverride","status":"True"}]}})"));
  REQUIRE(cd.ok());
  CHECK(cd->ActiveApiUrl() == "https://alt:6443");
  CHECK(cd->api_server_ip_override == "10.0.0.1");
  CHECK(cd->installed_timestamp == "2024-01-01T00:00:00Z");
  cd->conditions.clear();
  CHECK(cd->ActiveApiUrl().empty());  // the override is used only while its condition is True
}

TEST_CASE("ClusterSync status round-trips in upstream's shape") {
  Json status = Json::parse(R"({
    "syncSets":[{"name":"a","observedGeneration":2,"result":"Success","lastTransitionTime":"2026-01-01T00:00:00Z",
                 "firstSuccessTime":"2026-01-01T00:00:00Z",
                 "resourcesToDelete":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","namespace":"d"}]}],
    "selectorSyncSets":[{"name":"b","observedGeneration":1,"result":"Failure","failureMessage":"boom",
                         "lastTransitionTime":"2026-01-01T00:00:00Z"}],
    "conditions":[{"type":"Failed","status":"True","reason":"Failure","message":"SelectorSyncSet b is failing",
                   "lastTransitionTime":"2026-01-01T00:00:00Z","lastProbeTime":"2026-01-01T00:00:00Z"}],
    "firstSuccessTime":"2026-01-01T00:00:00Z"})");
  auto parsed = ClusterSyncStatus::FromJson(status);
  REQUIRE(parsed.ok());
  CHECK(parsed->sync_sets[0].resources_to_delete[0].kind == "ConfigMap");
  CHECK(parsed->selector_sync_sets[0].result == SyncResult::kFailure);
  CHECK(parsed->ToJson() == status);
}
