// The set preview against a simulated target cluster: each object's outcome is what the sync that
// follows does (ClusterSyncer over the same set), and the preview writes nothing.
#include "consumer/set_preview.h"

#include <list>

#include <doctest/doctest.h>

#include "tests/unit/consumer/apply_test_fixture.h"

using namespace syncbus;
using namespace syncbus::consumer;
using syncbus::consumer::testing::ApplyFixture;
using syncbus::consumer::testing::ConfigMap;
using syncbus::consumer::testing::kCluster;

namespace {

const char* OutcomeText(ObjectOutcome outcome) {
  switch (outcome) {
    case ObjectOutcome::kCreated: return "created";
    case ObjectOutcome::kChanged: return "changed";
    case ObjectOutcome::kUnchanged: return "unchanged";
    case ObjectOutcome::kDeleted: return "deleted";
    case ObjectOutcome::kRefused: return "refused";
    case ObjectOutcome::kNotReached: return "not-reached";
  }
  return "?";
}

// "name outcome" per object, in order.
std::vector<std::string> Outcomes(const std::vector<ObjectPreview>& objects) {
  std::vector<std::string> out;
  for (const ObjectPreview& o : objects) out.push_back(o.name + " " + OutcomeText(o.outcome));
  return out;
}

// A merge patch of ConfigMap default/a adding data.p.
Json PatchOfA() {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"name", "a"},
          {"namespace", "default"},
          {"patch", R"({"data":{"p":"1"}})"},
          {"patchType", "merge"}};
}

struct PreviewFixture {
  static kube::ClusterConfig TargetConfig() {
    kube::ClusterConfig cc;
    cc.server = std::string("http://sim.invalid/clusters/") + kCluster;
    return cc;
  }

  // The plan of SyncSet `name` with `spec` as the sync would make it now (its tracked objects
  // from its ClusterSync entry).
  SetPlan Plan(const std::string& name, const Json& spec) {
    Json object = {{"apiVersion", "hive.openshift.io/v1"},
                   {"kind", "SyncSet"},
                   {"metadata", {{"name", name}, {"namespace", kCluster}}},
                   {"spec", spec}};
    object["spec"]["clusterDeploymentRefs"] = Json::array({{{"name", kCluster}}});
    auto set = hive::SyncSet::FromJson(object);
    REQUIRE_MESSAGE(set.ok(), set.status().ToString());
    sets.push_back(std::move(*set));
    PlanInput in;
    in.spec = &sets.back().spec;
    in.set_namespace = kCluster;
    Json entry = f.Entry(name);
    if (!entry.is_null()) {
      for (const Json& r : entry.value("resourcesToDelete", Json::array())) {
        auto ref = hive::SyncResourceReference::FromJson(r);
        REQUIRE(ref.ok());
        in.previously_tracked.push_back(*ref);
      }
    }
    return PlanSet(in, &mapper);
  }
  std::vector<ObjectPreview> Preview(const std::string& name, const Json& spec) {
    Json before = Snapshot();
    std::vector<ObjectPreview> out = PreviewSetPlan(Plan(name, spec), client, mapper, {});
    CHECK_MESSAGE(Snapshot() == before, "the preview wrote on the cluster");
    return out;
  }
  // Everything a write would change: the cluster's ConfigMaps and Namespaces, with the lists'
  // resourceVersion (the store's).
  Json Snapshot() {
    Json out;
    for (const char* path : {"/api/v1/configmaps", "/api/v1/namespaces"}) {
      auto r = f.target().Call("GET", path);
      REQUIRE(r.status == 200);
      out[path] = Json::parse(r.body);
    }
    return out;
  }
  // The sync of `spec` as SyncSet `name`, then its entry's failure message.
  std::string SyncFailure(const std::string& name, const Json& spec) {
    f.PutSyncSet(name, spec);
    f.Sync();
    Json entry = f.Entry(name);
    REQUIRE_FALSE(entry.is_null());
    return entry.value("failureMessage", "");
  }

  ApplyFixture f;
  kube::ClientImpl client{TargetConfig(), f.transport};
  RestMapper mapper{client};
  std::list<hive::SyncSet> sets;  // the specs the plans point into
};

}  // namespace

TEST_CASE("preview: created on an empty cluster, unchanged after the sync, changed with a diff") {
  PreviewFixture p;
  Json spec = {{"resources", Json::array({ConfigMap("a", {{"k", "v"}}),
                                          ConfigMap("b", {{"k", "w"}}, "kube-system")})}};
  auto first = p.Preview("s", spec);
  CHECK(Outcomes(first) == std::vector<std::string>{"a created", "b created"});
  CHECK(first[1].ns == "kube-system");
  CHECK(first[1].api_version == "v1");
  CHECK(first[1].kind == "ConfigMap");

  CHECK(p.SyncFailure("s", spec).empty());
  REQUIRE_FALSE(p.f.ConfigMapOnTarget("b", "kube-system").is_null());
  CHECK(Outcomes(p.Preview("s", spec)) == std::vector<std::string>{"a unchanged", "b unchanged"});

  spec["resources"][0]["data"]["k"] = "v2";
  auto changed = p.Preview("s", spec);
  CHECK(Outcomes(changed) == std::vector<std::string>{"a changed", "b unchanged"});
  CHECK(changed[0].diff == std::vector<std::string>{R"(data.k: "v" -> "v2")"});
  CHECK(changed[0].message.empty());
  CHECK(p.SyncFailure("s", spec).empty());
  CHECK(p.f.ConfigMapOnTarget("a")["data"]["k"] == "v2");
}

TEST_CASE("preview: a missing namespace refuses the set's apply as the sync records it") {
  PreviewFixture p;
  Json spec = {{"resources", Json::array({ConfigMap("a", {{"k", "v"}}), ConfigMap("b", {}, "nope"),
                                          ConfigMap("c", {})})},
               {"patches", Json::array({PatchOfA()})}};
  auto preview = p.Preview("s", spec);
  CHECK(Outcomes(preview) ==
        std::vector<std::string>{"a created", "b refused", "c not-reached", "a not-reached"});
  CHECK(
      preview[1].message ==
      "failed to apply resource 1: error when creating \"object\": namespaces \"nope\" not found");
  // The sync that follows: the same message, a applied, c never.
  CHECK(p.SyncFailure("s", spec) == preview[1].message);
  CHECK_FALSE(p.f.ConfigMapOnTarget("a").is_null());
  CHECK(p.f.ConfigMapOnTarget("c").is_null());
}

TEST_CASE("preview: an unknown kind is refused with kubectl's message") {
  PreviewFixture p;
  Json widget = {{"apiVersion", "example.com/v1"},
                 {"kind", "Widget"},
                 {"metadata", {{"name", "w"}, {"namespace", "default"}}}};
  Json spec = {{"resources", Json::array({widget, ConfigMap("a", {})})}};
  auto preview = p.Preview("s", spec);
  CHECK(Outcomes(preview) == std::vector<std::string>{"w refused", "a not-reached"});
  CHECK(preview[0].message.rfind(
            "failed to apply resource 0: could not get info from passed resource: resource "
            "mapping not found for name: \"w\" namespace: \"default\" from \"object\": no matches "
            "for kind \"Widget\" in version \"example.com/v1\"",
            0) == 0);
  CHECK(p.SyncFailure("s", spec) == preview[0].message);
}

TEST_CASE("preview: Sync mode deletes what the set dropped, and nothing that is absent") {
  PreviewFixture p;
  Json spec = {{"resourceApplyMode", "Sync"},
               {"resources", Json::array({ConfigMap("a", {{"k", "v"}}), ConfigMap("b", {}),
                                          ConfigMap("c", {})})}};
  CHECK(p.SyncFailure("s", spec).empty());
  // c went away behind the set's back: nothing to delete there.
  REQUIRE(p.f.target().Call("DELETE", "/api/v1/namespaces/default/configmaps/c").status == 200);
  spec["resources"] = Json::array({ConfigMap("a", {{"k", "v"}})});
  auto preview = p.Preview("s", spec);
  CHECK(Outcomes(preview) == std::vector<std::string>{"a unchanged", "b deleted"});
  CHECK(p.SyncFailure("s", spec).empty());
  CHECK(p.f.ConfigMapOnTarget("b").is_null());
}

TEST_CASE("preview: applyBehavior CreateOnly and CreateOrUpdate, and a patch's diff") {
  PreviewFixture p;
  Json spec = {{"applyBehavior", "CreateOrUpdate"},
               {"resources", Json::array({ConfigMap("a", {{"k", "v"}})})}};
  CHECK(p.SyncFailure("s", spec).empty());
  CHECK(Outcomes(p.Preview("s", spec)) == std::vector<std::string>{"a unchanged"});
  spec["resources"][0]["data"]["k"] = "w";
  auto changed = p.Preview("s", spec);
  CHECK(Outcomes(changed) == std::vector<std::string>{"a changed"});
  CHECK(changed[0].diff == std::vector<std::string>{R"(data.k: "v" -> "w")"});

  spec["applyBehavior"] = "CreateOnly";
  spec["resources"].push_back(ConfigMap("n", {}));
  CHECK(Outcomes(p.Preview("s", spec)) == std::vector<std::string>{"a unchanged", "n created"});

  Json patched = {{"patches", Json::array({PatchOfA()})}};
  auto patch = p.Preview("t", patched);
  CHECK(Outcomes(patch) == std::vector<std::string>{"a changed"});
  CHECK(patch[0].diff == std::vector<std::string>{R"(data.p: <none> -> "1")"});
}

TEST_CASE("preview: a namespace the set creates first holds its objects, unchecked") {
  PreviewFixture p;
  Json ns = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "fresh"}}}};
  Json spec = {{"resources", Json::array({ns, ConfigMap("a", {}, "fresh")})}};
  auto preview = p.Preview("s", spec);
  CHECK(Outcomes(preview) == std::vector<std::string>{"fresh created", "a created"});
  CHECK(preview[1].message.find("not checked") != std::string::npos);
  CHECK(p.SyncFailure("s", spec).empty());
}
