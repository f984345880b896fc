// Hive SyncSet semantics, end to end through ClusterSyncer against a simulated target cluster.
#include <atomic>

#include <doctest/doctest.h>

#include "common/base64.h"
#include "consumer/client_side_apply.h"
#include "tests/support/hive_objects.h"
#include "tests/unit/consumer/apply_test_fixture.h"

using namespace syncbus;
using namespace syncbus::consumer;
using namespace syncbus::consumer::testing;

namespace {

bool ManagedBy(const Json& obj, const std::string& manager) {
  for (const auto& f : obj["metadata"].value("managedFields", Json::array())) {
    if (f.value("manager", "") == manager) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("apply: server-side apply with field manager syncbus, managed label, Success status") {
  ApplyFixture f;
  f.PutSyncSet("base", {{"resources", Json::array({ConfigMap("a", {{"k", "v"}}),
                                                   ConfigMap("b", {{"k", "w"}}, "kube-system")})}});
  SyncOutcome out = f.Sync();
  CHECK(out.kind == SyncOutcome::Kind::kSynced);
  CHECK(out.applies == 2);
  CHECK(out.failed_sets.empty());
  Json a = f.ConfigMapOnTarget("a");
  REQUIRE_FALSE(a.is_null());
  CHECK(a["data"]["k"] == "v");
  CHECK(a["metadata"]["labels"]["hive.openshift.io/managed"] == "true");
  CHECK(ManagedBy(a, "syncbus"));
  CHECK(f.ConfigMapOnTarget("b", "kube-system")["data"]["k"] == "w");
  Json cs = f.ClusterSync();
  REQUIRE_FALSE(cs.is_null());
  CHECK(cs["metadata"]["ownerReferences"][0]["kind"] == "ClusterDeployment");
  Json e = f.Entry("base");
  CHECK(e["result"] == "Success");
  CHECK(e["observedGeneration"] == 1);
  CHECK_FALSE(e.contains("resourcesToDelete"));

  SUBCASE("a second request with nothing new is up to date and sends nothing to the target") {
    uint64_t before = f.target().stats().requests;
    CHECK(f.Sync().kind == SyncOutcome::Kind::kUpToDate);
    CHECK(f.target().stats().requests == before);
  }
  SUBCASE("a full reapply applies again") {
    CHECK(f.Sync(true).applies == 2);
  }
}

TEST_CASE(
    "order: resources, then secretMappings, then patches, a failure stops the rest of the set") {
  ApplyFixture f;
  f.PutHub(std::string("/api/v1/namespaces/") + kCluster + "/secrets",
           {{"apiVersion", "v1"},
            {"kind", "Secret"},
            {"type", "kubernetes.io/tls"},
            {"metadata",
             {{"name", "src"},
              {"namespace", kCluster},
              {"labels", {{"l", "1"}}},
              {"annotations", {{"an", "x"}}},
              {"finalizers", Json::array({"keep/me"})}}},
            {"data", {{"tls.crt", EncodeBase64("C")}, {"tls.key", EncodeBase64("K")}}}});

  SUBCASE("patches run after the resources they patch; the secret is copied") {
    f.PutSyncSet(
        "s", {{"resources", Json::array({ConfigMap("a", {{"k", "v"}})})},
              {"secretMappings",
               Json::array({{{"sourceRef", {{"name", "src"}}},
                             {"targetRef", {{"name", "copy"}, {"namespace", "kube-system"}}}}})},
              {"patches", Json::array({{{"apiVersion", "v1"},
                                        {"kind", "ConfigMap"},
                                        {"name", "a"},
                                        {"namespace", "default"},
                                        {"patchType", "merge"},
                                        {"patch", R"({"data":{"patched":"yes"}})"}}})}});
    SyncOutcome out = f.Sync();
    CHECK(out.failed_sets.empty());
    CHECK(f.ConfigMapOnTarget("a")["data"]["patched"] == "yes");
    Json secret = f.TargetGet("/api/v1/namespaces/kube-system/secrets/copy");
    REQUIRE_FALSE(secret.is_null());
    CHECK(secret["type"] == "kubernetes.io/tls");
    CHECK(secret["data"]["tls.crt"] == EncodeBase64("C"));
    CHECK(secret["metadata"]["labels"]["l"] == "1");
    CHECK(secret["metadata"]["labels"]["hive.openshift.io/managed"] == "true");
    CHECK(secret["metadata"]["annotations"]["an"] == "x");
    CHECK_FALSE(secret["metadata"].contains("finalizers"));
  }
  SUBCASE("a failing resource stops later resources, secretMappings and patches") {
    f.PutSyncSet(
        "s",
        {{"resources",
          Json::array(
              {ConfigMap("a", {{"k", "v"}}),
               {{"apiVersion", "example.com/v1"}, {"kind", "Nope"}, {"metadata", {{"name", "x"}}}},
               ConfigMap("c", {{"k", "v"}})})},
         {"secretMappings",
          Json::array({{{"sourceRef", {{"name", "src"}}},
                        {"targetRef", {{"name", "copy"}, {"namespace", "default"}}}}})},
         {"patches", Json::array({{{"apiVersion", "v1"},
                                   {"kind", "ConfigMap"},
                                   {"name", "a"},
                                   {"namespace", "default"},
                                   {"patchType", "merge"},
                                   {"patch", R"({"data":{"patched":"yes"}})"}}})}});
    SyncOutcome out = f.Sync();
    REQUIRE(out.failed_sets.size() == 1);
    CHECK_FALSE(f.ConfigMapOnTarget("a").is_null());
    CHECK(f.ConfigMapOnTarget("c").is_null());
    CHECK(f.TargetGet("/api/v1/namespaces/default/secrets/copy").is_null());
    CHECK_FALSE(f.ConfigMapOnTarget("a")["data"].contains("patched"));
    Json e = f.Entry("s");
    CHECK(e["result"] == "Failure");
    CHECK(e["failureMessage"].get<std::string>().rfind(
              "failed to apply resource 1: could not get info from passed resource: resource "
              "mapping not found for "
              "name: \"x\" namespace: \"\" from \"object\": no matches for kind \"Nope\" in "
              "version \"example.com/v1\"",
              0) == 0);
    Json cond = f.ClusterSync()["status"]["conditions"][0];
    CHECK(cond["type"] == "Failed");
    CHECK(cond["status"] == "True");
    CHECK(cond["message"] == "SyncSet s is failing");
  }
  SUBCASE("a missing source Secret fails the set at its secretMapping") {
    f.PutSyncSet("s",
                 {{"resources", Json::array({ConfigMap("a", {{"k", "v"}})})},
                  {"secretMappings",
                   Json::array({{{"sourceRef", {{"name", "absent"}}},
                                 {"targetRef", {{"name", "copy"}, {"namespace", "default"}}}}})}});
    SyncOutcome out = f.Sync();
    CHECK(out.failed_sets.size() == 1);
    CHECK(f.Entry("s")["failureMessage"] == "failed to read secret 0: Secret \"absent\" not found");
  }
}

TEST_CASE("applyBehavior CreateOnly creates absent objects and leaves present ones alone") {
  ApplyFixture f;
  f.PutTarget("/api/v1/namespaces/default/configmaps",
              ConfigMap("present", {{"k", "theirs"}}, "default"));
  f.PutSyncSet("s", {{"applyBehavior", "CreateOnly"},
                     {"resources", Json::array({ConfigMap("present", {{"k", "ours"}}),
                                                ConfigMap("absent", {{"k", "ours"}})})}});
  SyncOutcome out = f.Sync();
  CHECK(out.failed_sets.empty());
  CHECK(f.ConfigMapOnTarget("present")["data"]["k"] == "theirs");
  CHECK(f.ConfigMapOnTarget("absent")["data"]["k"] == "ours");
  CHECK(f.ConfigMapOnTarget("absent")["metadata"]["labels"]["hive.openshift.io/managed"] == "true");
}

TEST_CASE(
    "applyBehavior CreateOnly: an object with generateName and no name is created every time") {
  ApplyFixture f;
  Json generated = ConfigMap("", {{"k", "v"}});
  generated["metadata"].erase("name");
  generated["metadata"]["generateName"] = "gen-";
  f.PutSyncSet("s", {{"applyBehavior", "CreateOnly"}, {"resources", Json::array({generated})}});
  auto generated_count = [&] {
    Json list = Json::parse(f.target().Call("GET", "/api/v1/namespaces/default/configmaps").body);
    int n = 0;
    for (const Json& cm : list["items"])
      n += cm["metadata"]["name"].get<std::string>().rfind("gen-", 0) == 0;
    return n;
  };
  CHECK(f.Sync().failed_sets.empty());
  CHECK(generated_count() == 1);
  CHECK(f.Sync(/*full_reapply=*/true).failed_sets.empty());
  CHECK(generated_count() == 2);  // as Hive's kubectl create does
}

TEST_CASE("applyBehavior CreateOrUpdate updates our fields and keeps fields we do not set") {
  ApplyFixture f;
  f.PutTarget("/api/v1/namespaces/default/configmaps",
              ConfigMap("present", {{"k", "old"}, {"theirs", "kept"}}, "default"));
  f.PutSyncSet("s", {{"applyBehavior", "CreateOrUpdate"},
                     {"resources", Json::array({ConfigMap("present", {{"k", "new"}}),
                                                ConfigMap("absent", {{"k", "new"}})})}});
  SyncOutcome out = f.Sync();
  CHECK(out.failed_sets.empty());
  Json present = f.ConfigMapOnTarget("present");
  CHECK(present["data"]["k"] == "new");
  CHECK(present["data"]["theirs"] == "kept");
  CHECK(present["metadata"]["labels"]["hive.openshift.io/managed"] == "true");
  CHECK(f.ConfigMapOnTarget("absent")["data"]["k"] == "new");
}

TEST_CASE(
    "patches: strategic, merge and json (YAML too), namespace defaulting to default as kubectl's") {
  ApplyFixture f;
  f.PutTarget("/api/v1/namespaces",
              {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kCluster}}}});
  f.PutTarget("/api/v1/namespaces/default/configmaps", ConfigMap("p", {{"a", "1"}}));
  f.PutSyncSet("s",
               {{"patches",
                 Json::array({{{"apiVersion", "v1"},
                               {"kind", "ConfigMap"},
                               {"name", "p"},
                               {"patch", R"({"data":{"s":"strategic"}})"}},
                              {{"apiVersion", "v1"},
                               {"kind", "ConfigMap"},
                               {"name", "p"},
                               {"patchType", "merge"},
                               {"patch", "data:\n  m: merge\n"}},
                              {{"apiVersion", "v1"},
                               {"kind", "ConfigMap"},
                               {"name", "p"},
                               {"patchType", "json"},
                               {"patch", R"([{"op":"add","path":"/data/j","value":"json"}])"}}})}});
  SyncOutcome out = f.Sync();
  CHECK(out.failed_sets.empty());
  CHECK(out.applies == 3);
  Json p = f.ConfigMapOnTarget("p");
  CHECK(p["data"]["a"] == "1");
  CHECK(p["data"]["s"] == "strategic");
  CHECK(p["data"]["m"] == "merge");
  CHECK(p["data"]["j"] == "json");

  SUBCASE("a patch of an absent object fails the set") {
    f.PutSyncSet("s", {{"patches", Json::array({{{"apiVersion", "v1"},
                                                 {"kind", "ConfigMap"},
                                                 {"name", "nope"},
                                                 {"patchType", "merge"},
                                                 {"patch", "{}"}}})}});
    CHECK(f.Sync().failed_sets.size() == 1);
    CHECK(f.Entry("s")["failureMessage"] ==
          "failed to apply patch 0: configmaps \"nope\" not found");
  }
  SUBCASE("an unknown patchType fails that patch, not the whole set's reading") {
    f.PutSyncSet("s", {{"patches", Json::array({{{"apiVersion", "v1"},
                                                 {"kind", "ConfigMap"},
                                                 {"name", "p"},
                                                 {"patchType", "bogus"},
                                                 {"patch", "{}"}}})}});
    CHECK(f.Sync().failed_sets.size() == 1);
    CHECK(f.Entry("s")["failureMessage"] ==
          "failed to apply patch 0: invalid patch type: bogus. Valid patch types are 'strategic', "
          "'merge' or 'json'");
  }
}

TEST_CASE("Sync mode: tracking, deletion of dropped objects and of a deleted set's objects") {
  ApplyFixture f;
  f.PutSyncSet("s", {{"resourceApplyMode", "Sync"},
                     {"resources",
                      Json::array({ConfigMap("a", {{"k", "v"}}), ConfigMap("b", {{"k", "v"}})})}});
  f.Sync();
  Json e = f.Entry("s");
  REQUIRE(e["resourcesToDelete"].size() == 2);
  CHECK(e["resourcesToDelete"][0]["kind"] == "ConfigMap");
  CHECK(e["resourcesToDelete"][0]["namespace"] == "default");

  // b dropped from the set: deleted from the target.
  f.PutSyncSet("s", {{"resourceApplyMode", "Sync"},
                     {"resources", Json::array({ConfigMap("a", {{"k", "v"}})})}});
  f.Sync();
  CHECK(f.ConfigMapOnTarget("b").is_null());
  CHECK_FALSE(f.ConfigMapOnTarget("a").is_null());
  CHECK(f.Entry("s")["resourcesToDelete"].size() == 1);
  CHECK(f.Entry("s")["observedGeneration"] == 2);

  SUBCASE("the set deleted: all its objects deleted and its entry dropped") {
    f.DeleteSyncSet("s");
    f.Sync();
    CHECK(f.ConfigMapOnTarget("a").is_null());
    CHECK(f.Entry("s").is_null());
  }
  SUBCASE("an object already gone counts as deleted") {
    REQUIRE(f.target().Call("DELETE", "/api/v1/namespaces/default/configmaps/a").status == 200);
    f.DeleteSyncSet("s");
    f.Sync();
    CHECK(f.Entry("s").is_null());
  }
  SUBCASE("an object that moves to another set is not deleted") {
    f.PutSyncSet("t", {{"resourceApplyMode", "Sync"},
                       {"resources", Json::array({ConfigMap("a", {{"k", "t"}})})}});
    f.PutSyncSet("s", {{"resourceApplyMode", "Sync"}, {"resources", Json::array()}});
    f.Sync();
    CHECK(f.ConfigMapOnTarget("a")["data"]["k"] == "t");
    CHECK_FALSE(f.Entry("s").contains("resourcesToDelete"));
    CHECK(f.Entry("t")["resourcesToDelete"].size() == 1);
    f.DeleteSyncSet("s");
    f.Sync();
    CHECK_FALSE(f.ConfigMapOnTarget("a").is_null());
  }
  SUBCASE("switching to Upsert clears tracking and deletes nothing") {
    f.PutSyncSet("s", {{"resourceApplyMode", "Upsert"}, {"resources", Json::array()}});
    f.Sync();
    CHECK_FALSE(f.ConfigMapOnTarget("a").is_null());
    CHECK_FALSE(f.Entry("s").contains("resourcesToDelete"));
    f.DeleteSyncSet("s");
    f.Sync();
    CHECK_FALSE(f.ConfigMapOnTarget("a").is_null());
  }
  SUBCASE("a failing deletion keeps the removed set's entry as Failure with what is left") {
    kubesim::FaultSpec down;
    down.error_rate = 1.0;
    REQUIRE(f.sim->faults().Set(kCluster, down).ok());
    f.DeleteSyncSet("s");
    SyncOutcome out = f.Sync();
    CHECK(out.failed_sets.size() == 1);
    Json left = f.Entry("s");
    REQUIRE_FALSE(left.is_null());
    CHECK(left["result"] == "Failure");
    CHECK(left["resourcesToDelete"].size() == 1);
    REQUIRE(f.sim->faults().Set(kCluster, kubesim::FaultSpec{}).ok());
    f.Sync();
    CHECK(f.Entry("s").is_null());
    CHECK(f.ConfigMapOnTarget("a").is_null());
  }
}

TEST_CASE("templates: fromCDLabel in resources and patches when enabled") {
  ApplyFixture f;
  f.PutTarget("/api/v1/namespaces/default/configmaps", ConfigMap("p", {{"a", "1"}}, "default"));
  f.PutSyncSet(
      "s",
      {{"enableResourceTemplates", true},
       {"enablePatchTemplates", true},
       {"resources", Json::array({ConfigMap("t", {{"region", R"({{ fromCDLabel "region" }})"},
                                                  {"missing", R"(x{{fromCDLabel "nope"}}y)"}})})},
       {"patches", Json::array({{{"apiVersion", "v1"},
                                 {"kind", "ConfigMap"},
                                 {"name", "p"},
                                 {"namespace", "default"},
                                 {"patchType", "merge"},
                                 {"patch", R"({"data":{"tier":"{{ fromCDLabel "tier" }}"}})"}}})}});
  SyncOutcome out = f.Sync();
  CHECK(out.failed_sets.empty());
  Json t = f.ConfigMapOnTarget("t");
  CHECK(t["data"]["region"] == "us-east-1");
  CHECK(t["data"]["missing"] == "xy");
  CHECK(f.ConfigMapOnTarget("p")["data"]["tier"] == "gold");

  SUBCASE("disabled: the text is applied as it is") {
    f.PutSyncSet("s",
                 {{"resources",
                   Json::array({ConfigMap("t", {{"region", R"({{ fromCDLabel "region" }})"}})})}});
    f.Sync();
    CHECK(f.ConfigMapOnTarget("t")["data"]["region"] == R"({{ fromCDLabel "region" }})");
  }
  SUBCASE("an unknown function fails the set") {
    f.PutSyncSet("s",
                 {{"enableResourceTemplates", true},
                  {"resources", Json::array({ConfigMap("t", {{"x", R"({{ env "HOME" }})"}})})}});
    CHECK(f.Sync().failed_sets.size() == 1);
  }
  SUBCASE(
      "a patch template that fails is noted, the next patch still applied (Hive's applySyncSet)") {
    Json bad = {{"apiVersion", "v1"},   {"kind", "ConfigMap"},
                {"name", "p"},          {"namespace", "default"},
                {"patchType", "merge"}, {"patch", R"({"data":{"x":"{{ env "HOME" }}"}})"}};
    Json good = bad;
    good["patch"] = R"({"data":{"after":"applied"}})";
    f.PutSyncSet("s", {{"enablePatchTemplates", true}, {"patches", Json::array({bad, good})}});
    CHECK(f.Sync().failed_sets == std::vector<std::string>{"s"});
    CHECK(f.ConfigMapOnTarget("p")["data"]["after"] == "applied");
    CHECK(f.Entry("s")["failureMessage"].get<std::string>().rfind(
              "failed to parameterize patch 0: ", 0) == 0);
  }
}

TEST_CASE(
    "a target that answers with errors gets its failures recorded, one that answers nothing gets "
    "no write") {
  ApplyFixture f;
  f.PutSyncSet("s", {{"resources", Json::array({ConfigMap("a", {{"k", "v"}})})}});
  kubesim::FaultSpec faults;
  SUBCASE("every request answered with 500 or 503: the sets fail, and say why") {
    faults.error_rate = 1.0;
    REQUIRE(f.sim->faults().Set(kCluster, faults).ok());
    SyncOutcome out = f.Sync();
    CHECK(out.failed_sets == std::vector<std::string>{"s"});
    CHECK(f.Entry("s")["result"] == "Failure");
  }
  SUBCASE("no request answered (connections dropped): no ClusterSync, the request fails") {
    faults.drop_rate = 1.0;
    REQUIRE(f.sim->faults().Set(kCluster, faults).ok());
    auto out = f.TrySync(/*full_reapply=*/true);
    REQUIRE_FALSE(out.ok());
    CHECK(out.status().code() == Code::kUnavailable);
    CHECK(f.ClusterSync().is_null());
  }
}

TEST_CASE("Sync mode: a tracked object of a kind the cluster no longer serves counts as deleted") {
  // Hive's Delete fails on the mapping for ever (the set stays Failed); the object went with its
  // CRD.
  ApplyFixture f;
  Json crd = syncbus::testing::OpenCrd("example.com", "Gadget", "gadgets");
  f.PutTarget("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd);
  Json gadget = {{"apiVersion", "example.com/v1"},
                 {"kind", "Gadget"},
                 {"metadata", {{"name", "g"}, {"namespace", "default"}}}};
  f.PutSyncSet("s", {{"resourceApplyMode", "Sync"},
                     {"resources", Json::array({gadget, ConfigMap("a", {{"k", "v"}})})}});
  REQUIRE(f.Sync().failed_sets.empty());
  REQUIRE(f.Entry("s")["resourcesToDelete"].size() == 2);
  REQUIRE(f.target()
              .Call("DELETE",
                    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.example.com")
              .status == 200);
  SUBCASE("dropped from the set") {
    f.PutSyncSet("s", {{"resourceApplyMode", "Sync"},
                       {"resources", Json::array({ConfigMap("a", {{"k", "v"}})})}});
    SyncOutcome out = f.Sync();
    CHECK_MESSAGE(out.failed_sets.empty(), f.Entry("s").dump());
    CHECK(f.Entry("s")["result"] == "Success");
    CHECK(f.Entry("s")["resourcesToDelete"] == Json::array({{{"apiVersion", "v1"},
                                                             {"kind", "ConfigMap"},
                                                             {"name", "a"},
                                                             {"namespace", "default"}}}));
  }
  SUBCASE("the set deleted") {
    f.DeleteSyncSet("s");
    SyncOutcome out = f.Sync();
    CHECK(out.failed_sets.empty());
    CHECK(f.Entry("s").is_null());
    CHECK(f.ConfigMapOnTarget("a").is_null());
  }
}

TEST_CASE(
    "discovery: cluster-scoped kinds carry no namespace, a kind installed by an earlier resource "
    "is found") {
  ApplyFixture f;
  Json crd = syncbus::testing::OpenCrd("example.com", "Widget", "widgets");
  f.PutSyncSet(
      "s", {{"resources", Json::array({{{"apiVersion", "v1"},
                                        {"kind", "Namespace"},
                                        {"metadata", {{"name", "team"}, {"namespace", "ignored"}}}},
                                       crd,
                                       {{"apiVersion", "example.com/v1"},
                                        {"kind", "Widget"},
                                        {"metadata", {{"name", "w"}, {"namespace", "team"}}},
                                        {"size", 3}}})}});
  SyncOutcome out = f.Sync();
  CHECK_MESSAGE(out.failed_sets.empty(), f.Entry("s").dump());
  CHECK_FALSE(f.TargetGet("/api/v1/namespaces/team").is_null());
  Json w = f.TargetGet("/apis/example.com/v1/namespaces/team/widgets/w");
  REQUIRE_FALSE(w.is_null());
  CHECK(w["size"] == 3);
}

TEST_CASE(
    "sets of one cluster: SyncSets and SelectorSyncSets each get their entry, a failure in one "
    "leaves the others") {
  ApplyFixture f;
  f.PutSyncSet("a-good", {{"resources", Json::array({ConfigMap("g", {{"k", "v"}})})}});
  f.PutSyncSet(
      "b-bad",
      {{"resources",
        Json::array({{{"apiVersion", "v1"}, {"kind", "Nope"}, {"metadata", {{"name", "x"}}}}})}});
  f.PutHub("/apis/hive.openshift.io/v1/selectorsyncsets",
           {{"apiVersion", "hive.openshift.io/v1"},
            {"kind", "SelectorSyncSet"},
            {"metadata", {{"name", "fleet"}}},
            {"spec",
             {{"clusterDeploymentSelector", {{"matchLabels", {{"region", "us-east-1"}}}}},
              {"resources", Json::array({ConfigMap("sel", {{"k", "v"}})})}}}});
  SyncOutcome out = f.Sync();
  CHECK(out.failed_sets == std::vector<std::string>{"b-bad"});
  CHECK_FALSE(f.ConfigMapOnTarget("g").is_null());
  CHECK_FALSE(f.ConfigMapOnTarget("sel").is_null());
  Json cs = f.ClusterSync();
  CHECK(cs["status"]["selectorSyncSets"][0]["result"] == "Success");
  CHECK(cs["status"]["conditions"][0]["message"] == "SyncSet b-bad is failing");
}

TEST_CASE("a lost fence stops writes before they reach the target") {
  ApplyFixture f;
  f.PutSyncSet("s", {{"resources", Json::array({ConfigMap("a", {{"k", "v"}})})}});
  SyncRequest req;
  req.cluster_namespace = kCluster;
  req.cluster_name = kCluster;
  auto out = f.syncer->Sync(req, [] { return Status(Code::kConflict, "lease lost"); });
  CHECK_FALSE(out.ok());
  CHECK(f.ConfigMapOnTarget("a").is_null());
}

TEST_CASE(
    "a fence lost after the step's check keeps the write off the wire, and the cluster is given "
    "up") {
  // The syncer asks the fence when it claims the cluster and before the step; the transport asks
  // it once more when the request would go out: a consumer frozen (SIGSTOP) or queued in between
  // must not send what it decided while it still held the lease.
  ApplyFixture f;
  f.PutSyncSet("s", {{"resources", Json::array({ConfigMap("a", {{"k", "v"}})})}});
  SyncRequest req;
  req.cluster_namespace = kCluster;
  req.cluster_name = kCluster;
  std::atomic<int> calls{0};
  auto out = f.syncer->Sync(req, [&calls] {
    return ++calls <= 2 ? Status::Ok() : Status(Code::kConflict, "lease lapsed");
  });
  CHECK(calls.load() >= 3);
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().code() == Code::kConflict);
  CHECK(f.ConfigMapOnTarget("a").is_null());
}

TEST_CASE(
    "limits: a cluster never has more requests in flight than its cap and the deadline stops what "
    "is left [concurrent]") {
  SUBCASE("per-cluster in-flight cap") {
    SyncerOptions options = ApplyFixture::Defaults();
    options.per_cluster_in_flight = 2;
    options.parallel_sync_sets = 8;
    ApplyFixture f(options);
    f.SlowTarget();
    for (int s = 0; s < 4; ++s) {
      Json resources = Json::array();
      for (int r = 0; r < 3; ++r)
        resources.push_back(
            ConfigMap("cm-" + std::to_string(s) + "-" + std::to_string(r), {{"k", "v"}}));
      f.PutSyncSet("s" + std::to_string(s), {{"resources", resources}});
    }
    SyncOutcome out = f.Sync();
    CHECK(out.failed_sets.empty());
    CHECK(out.applies == 12);
    CHECK(f.sim->Stats()["clusters"][kCluster]["peakInFlight"].get<int>() <= 2);
    CHECK(f.syncer->limiter_stats().peak_in_flight <= 2);
    CHECK(f.syncer->limiter_stats().in_flight == 0);
  }
  SUBCASE("a passed cluster deadline fails the remaining steps as transient, sending nothing") {
    SyncerOptions options = ApplyFixture::Defaults();
    options.cluster_deadline = std::chrono::milliseconds(0);
    ApplyFixture f(options);
    f.PutSyncSet("s", {{"resources", Json::array({ConfigMap("a", {{"k", "v"}})})}});
    SyncOutcome out = f.Sync();
    CHECK(out.failed_sets.size() == 1);
    CHECK(out.transient);
    CHECK(f.ConfigMapOnTarget("a").is_null());
    CHECK(f.Entry("s")["failureMessage"].get<std::string>().find("deadline") != std::string::npos);
  }
}

TEST_CASE(
    "a target's 429 Retry-After travels into the outcome, and the failure counts as transient") {
  ApplyFixture f;
  f.PutSyncSet("s", {{"resources", Json::array({ConfigMap("a", {{"k", "v"}})})}});
  kubesim::FaultSpec throttled;
  throttled.throttle_rate = 1;
  throttled.retry_after_seconds = 42;
  REQUIRE(f.sim->faults().Set(kCluster, throttled).ok());
  SyncOutcome out = f.Sync();
  CHECK(out.failed_sets == std::vector<std::string>{"s"});
  CHECK(out.transient);
  CHECK(out.retry_after == std::chrono::seconds(42));
}

TEST_CASE(
    "ApiVersionsOf lists what planning maps: resources, secretMappings, patches, tracked objects") {
  hive::SyncSetCommonSpec spec;
  for (const Json& r :
       {ConfigMap("a", {}), Json{{"apiVersion", "apps/v1"}, {"kind", "Deployment"}},
        Json{{"apiVersion", "{{ fromCDLabel \"v\" }}"}, {"kind", "X"}}, Json("not an object")}) {
    spec.resources.emplace_back(r);
  }
  spec.secret_mappings.push_back({});
  hive::SyncObjectPatch patch;
  patch.api_version = "config.openshift.io/v1";
  spec.patches.push_back(patch);
  PlanInput in;
  in.spec = &spec;
  in.previously_tracked = {{"rbac.authorization.k8s.io/v1", "Role", "r", "ns"}};
  CHECK(ApiVersionsOf(in) == std::set<std::string>{"apps/v1", "config.openshift.io/v1",
                                                   "rbac.authorization.k8s.io/v1", "v1"});
  hive::SyncSetCommonSpec empty;
  in.spec = &empty;
  in.previously_tracked.clear();
  CHECK(ApiVersionsOf(in).empty());
}

TEST_CASE(
    "kubeconfig Secret: a ClusterDeployment that names another one is followed, none is an error") {
  ApplyFixture f;
  f.PutSyncSet("base", {{"resources", Json::array({ConfigMap("a", {{"k", "v"}})})}});
  CHECK(f.Sync().applies == 1);  // remembers the Secret the ClusterDeployment names

  const std::string secrets = std::string("/api/v1/namespaces/") + kCluster + "/secrets/";
  const std::string cd_path = std::string("/apis/hive.openshift.io/v1/namespaces/") + kCluster +
                              "/clusterdeployments/" + kCluster;
  Json cd = Json::parse(f.sim->hub().Call("GET", cd_path).body);
  const std::string old_name = cd["spec"]["clusterMetadata"]["adminKubeconfigSecretRef"]["name"];
  Json secret = Json::parse(f.sim->hub().Call("GET", secrets + old_name).body);
  secret["metadata"] = {{"name", "rotated-kubeconfig"}, {"namespace", kCluster}};
  f.PutHub(std::string("/api/v1/namespaces/") + kCluster + "/secrets", secret);
  REQUIRE(f.sim->hub().Call("DELETE", secrets + old_name).status == 200);
  cd["spec"]["clusterMetadata"]["adminKubeconfigSecretRef"]["name"] = "rotated-kubeconfig";
  REQUIRE(f.sim->hub().Call("PUT", cd_path, cd).status == 200);
  CHECK(f.Sync(true).applies == 1);  // the remembered, now deleted, Secret is not used

  cd = Json::parse(f.sim->hub().Call("GET", cd_path).body);
  cd["spec"].erase("clusterMetadata");  // the schema requires the ref inside clusterMetadata
  REQUIRE(f.sim->hub().Call("PUT", cd_path, cd).status == 200);
  auto out = f.TrySync(/*full_reapply=*/true);
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().code() == Code::kInvalidArgument);
  CHECK(out.status().message().find("adminKubeconfigSecretRef") != std::string::npos);
}

TEST_CASE("a set that does not decode deletes nothing, and its tracking stays") {
  hive::SyncSetCommonSpec spec;
  spec.resource_apply_mode = hive::ResourceApplyMode::kSync;
  spec.resources.emplace_back(ConfigMap("kept", {{"k", "v"}}));
  spec.resources.emplace_back(Json{{"apiVersion", "v1"}, {"metadata", {{"name", "no-kind"}}}});
  PlanInput in;
  in.spec = &spec;
  in.previously_tracked = {{"v1", "ConfigMap", "dropped", "default"},
                           {"v1", "ConfigMap", "kept", "default"}};
  SetPlan plan = PlanSet(in, nullptr);
  REQUIRE(plan.steps.size() == 1);
  CHECK(plan.steps[0].failure.rfind(
            "failed to decode resource 1: error unmarshaling JSON: while decoding JSON: "
            "Object 'Kind' is missing in '",
            0) == 0);
  CHECK(plan.deletions
            .empty());  // Hive would delete "dropped": the undecodable resource is not "in the set"
  CHECK(plan.listed.size() == 2);  // so both stay tracked
}

TEST_CASE("secretMappings: Hive's namespace rules are checked before anything is read") {
  hive::SecretMapping same{{"s", ""}, {"t", "n"}}, own{{"s", "ns"}, {"t", "n"}},
      other{{"s", "elsewhere"}, {"t", "n"}};
  CHECK(SecretSourceKey(same, "ns") == "ns/s");
  CHECK(SecretSourceKey(own, "ns") == "ns/s");
  CHECK(SecretSourceKey(other, "ns").empty());  // a SyncSet may not read another namespace
  CHECK(SecretSourceKey(same, "").empty());     // a SelectorSyncSet must name the namespace
  CHECK(SecretSourceKey(other, "") == "elsewhere/s");
}

TEST_CASE(
    "secretMappings: the whole Secret is copied, type, data and immutable, under new metadata") {
  ApplyFixture f;
  f.PutHub(std::string("/api/v1/namespaces/") + kCluster + "/secrets",
           {{"apiVersion", "v1"},
            {"kind", "Secret"},
            {"metadata",
             {{"name", "src"}, {"labels", {{"team", "a"}}}, {"annotations", {{"note", "n"}}}}},
            {"type", "kubernetes.io/dockerconfigjson"},
            {"immutable", true},
            {"data", {{".dockerconfigjson", "e30="}}}});
  f.PutSyncSet("s",
               {{"secretMappings",
                 Json::array({{{"sourceRef", {{"name", "src"}}},
                               {"targetRef", {{"name", "copy"}, {"namespace", "default"}}}}})}});
  CHECK(f.Sync().failed_sets.empty());
  Json copy = f.TargetGet("/api/v1/namespaces/default/secrets/copy");
  REQUIRE_FALSE(copy.is_null());
  CHECK(copy["type"] == "kubernetes.io/dockerconfigjson");
  CHECK(copy["immutable"] == true);
  CHECK(copy["data"] == Json({{".dockerconfigjson", "e30="}}));
  CHECK(copy["metadata"]["labels"] == Json({{"team", "a"}, {"hive.openshift.io/managed", "true"}}));
  CHECK(copy["metadata"]["annotations"]["note"] == "n");
}

TEST_CASE("Go's aggregate error text and Hive's mergeResources") {
  CHECK(AggregateMessage({"a"}) == "a");
  CHECK(AggregateMessage({"a", "b", "a"}) == "[a, b]");
  CHECK(AggregateMessage({"a", "a"}) == "a");
  std::vector<hive::SyncResourceReference> applied = {{"apps/v1", "Deployment", "d", "ns"}};
  std::vector<hive::SyncResourceReference> left = {{"apps/v1beta1", "Deployment", "d", "ns"},
                                                   {"v1", "ConfigMap", "c", "ns"}};
  auto merged = MergeResources(applied, left);
  REQUIRE(merged.size() == 2);  // the same object at another version counts once
  CHECK(merged[0].api_version == "apps/v1");
  CHECK(MergeResources({}, left).size() == 2);
}

TEST_CASE(
    "Apply keeps kubectl's last-applied annotation, byte for byte as Hive's kubectl writes it") {
  ApplyFixture f;
  f.PutSyncSet("s", {{"resources", Json::array({ConfigMap("a", {{"k", "<v&>"}})})}});
  f.Sync();
  Json a = f.ConfigMapOnTarget("a");
  CHECK(a["metadata"]["annotations"][kLastAppliedAnnotation] ==
        "{\"apiVersion\":\"v1\",\"data\":{\"k\":\"\\u003cv\\u0026\\u003e\"},\"kind\":\"ConfigMap\","
        "\"metadata\":"
        "{\"annotations\":{},\"labels\":{\"hive.openshift.io/"
        "managed\":\"true\"},\"name\":\"a\",\"namespace\":\"default\"}}\n");
}

TEST_CASE(
    "an object applied client-side is taken over: what the set dropped goes, other managers' "
    "fields stay") {
  ApplyFixture f;
  // As Hive's kubectl left it (Update by its field manager, the annotation), plus a field another
  // controller owns.
  Json hive = ConfigMap("a", {{"kept", "1"}, {"dropped", "2"}});
  hive["metadata"]["labels"] = {{"hive.openshift.io/managed", "true"}};
  hive["metadata"]["annotations"] = {{kLastAppliedAnnotation, "{}"}};
  REQUIRE(f.target()
              .Call("POST", "/api/v1/namespaces/default/configmaps", hive, "application/json",
                    "fieldManager=hive6-clustersync")
              .status == 201);
  REQUIRE(f.target()
              .Call("PATCH", "/api/v1/namespaces/default/configmaps/a",
                    Json{{"data", {{"theirs", "x"}}}}, "application/merge-patch+json",
                    "fieldManager=other-controller")
              .status == 200);
  f.PutSyncSet("s", {{"resources", Json::array({ConfigMap("a", {{"kept", "1"}})})}});
  SyncOutcome out = f.Sync();
  CHECK(out.failed_sets.empty());
  Json a = f.ConfigMapOnTarget("a");
  CHECK(a["data"] == Json({{"kept", "1"}, {"theirs", "x"}}));
  std::set<std::string> managers;
  for (const auto& e : a["metadata"]["managedFields"])
    managers.insert(e["manager"].get<std::string>());
  CHECK(managers == std::set<std::string>{"syncbus", "other-controller"});
}

TEST_CASE(
    "CreateOrUpdate: kubectl's three-way patch from the last-applied annotation, Kubernetes lists "
    "merged by key") {
  ApplyFixture f;
  Json svc = {{"apiVersion", "v1"},
              {"kind", "Service"},
              {"metadata", {{"name", "svc"}, {"namespace", "default"}}},
              {"spec", {{"ports", Json::array({{{"name", "a"}, {"port", 80}}})}}}};
  f.PutTarget("/api/v1/namespaces/default/services", svc);
  Json cm = ConfigMap("cm", {{"old", "1"}, {"theirs", "x"}});
  cm["metadata"]["annotations"] = {{kLastAppliedAnnotation, R"({"data":{"old":"1"}})"}};
  f.PutTarget("/api/v1/namespaces/default/configmaps", cm);
  Json svc_set = svc;
  svc_set["spec"]["ports"] = Json::array({{{"name", "b"}, {"port", 81}}});
  f.PutSyncSet("s", {{"applyBehavior", "CreateOrUpdate"},
                     {"resources", Json::array({svc_set, ConfigMap("cm", {{"new", "2"}})})}});
  SyncOutcome out = f.Sync();
  CHECK_MESSAGE(out.failed_sets.empty(), f.Entry("s").dump());
  Json ports = f.TargetGet("/api/v1/namespaces/default/services/svc")["spec"]["ports"];
  CHECK(ports.size() == 2);  // merged by port, as a strategic merge does
  Json data = f.ConfigMapOnTarget("cm")["data"];
  CHECK(data == Json({{"new", "2"}, {"theirs", "x"}}));  // "old" was in the last-applied annotation
}

TEST_CASE(
    "Footprint: only sets of namespaced built-in objects with nothing in common may run side by "
    "side") {
  auto step = [](const char* group, const char* kind, bool namespaced, const char* name) {
    ApplyStep s;
    s.api_version = std::string(group).empty() ? "v1" : std::string(group) + "/v1";
    s.kind = kind;
    s.ns = namespaced ? "default" : "";
    s.name = name;
    s.resource = kube::Resource{group, "v1", "things", kind, namespaced};
    return s;
  };
  auto plan = [](std::vector<ApplyStep> steps) {
    SetPlan p;
    p.steps = std::move(steps);
    return p;
  };
  SetFootprint cm_a = FootprintOf(plan({step("", "ConfigMap", true, "a")}));
  SetFootprint cm_b =
      FootprintOf(plan({step("apps", "Deployment", true, "b"), step("", "ConfigMap", true, "b")}));
  CHECK_FALSE(cm_a.ordered);
  CHECK_FALSE(MustFollow(cm_a, cm_b));
  CHECK(MustFollow(cm_a, cm_a));  // one object in both
  for (auto ordered : {step("", "Namespace", false, "n"),
                       step("apiextensions.k8s.io", "CustomResourceDefinition", false, "c"),
                       step("", "ResourceQuota", true, "q"), step("", "ServiceAccount", true, "sa"),
                       step("example.com", "Widget", true, "w")}) {
    CAPTURE(ordered.kind);
    SetFootprint f = FootprintOf(plan({ordered}));
    CHECK(f.ordered);
    CHECK(MustFollow(f, cm_a));
    CHECK(MustFollow(cm_a, f));
  }
  ApplyStep unknown = step("", "ConfigMap", true, "u");
  unknown.resource.reset();  // not served when planned
  CHECK(FootprintOf(plan({unknown})).ordered);
  SetPlan deletes;
  deletes.deletions.push_back(step("", "Namespace", false, "gone"));
  CHECK(FootprintOf(deletes).ordered);
  ApplyStep failed = step("", "Namespace", false, "n");
  failed.op = ApplyStep::Op::kFail;  // never sent
  CHECK_FALSE(FootprintOf(plan({failed})).ordered);
}

TEST_CASE(
    "sets of one cluster run side by side only where Hive's order cannot be seen [concurrent]") {
  SyncerOptions options = ApplyFixture::Defaults();
  options.parallel_sync_sets = 8;
  ApplyFixture f(options);
  f.SlowTarget();
  SUBCASE("independent sets overlap") {
    for (int s = 0; s < 4; ++s) {
      f.PutSyncSet(
          "s" + std::to_string(s),
          {{"resources", Json::array({ConfigMap("cm-" + std::to_string(s), {{"k", "v"}})})}});
    }
    CHECK(f.Sync().failed_sets.empty());
    CHECK(f.syncer->limiter_stats().peak_in_flight > 1);
  }
  SUBCASE("a later set uses the Namespace an earlier one makes, on the first pass") {
    f.PutSyncSet("a-makes", {{"resources", Json::array({{{"apiVersion", "v1"},
                                                         {"kind", "Namespace"},
                                                         {"metadata", {{"name", "made"}}}}})}});
    for (int s = 0; s < 3; ++s) {
      f.PutSyncSet(
          "b-uses-" + std::to_string(s),
          {{"resources",
            Json::array({ConfigMap("inside-" + std::to_string(s), {{"k", "v"}}, "made")})}});
    }
    CHECK(f.Sync().failed_sets.empty());
    CHECK(f.syncer->limiter_stats().peak_in_flight > 1);  // the three users, once it is there
    CHECK_FALSE(f.ConfigMapOnTarget("inside-2", "made").is_null());
  }
  SUBCASE("two sets writing one object: the later one in Hive's order wins, as under Hive") {
    f.PutSyncSet("a", {{"resources", Json::array({ConfigMap("shared", {{"k", "from-a"}})})}});
    f.PutSyncSet("b", {{"resources", Json::array({ConfigMap("shared", {{"k", "from-b"}})})}});
    CHECK(f.Sync().failed_sets.empty());
    CHECK(f.ConfigMapOnTarget("shared")["data"]["k"] == "from-b");
    CHECK(f.syncer->limiter_stats().peak_in_flight == 1);
  }
}
