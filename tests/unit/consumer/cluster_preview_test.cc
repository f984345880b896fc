// ClusterPreviewer: a changed set previewed on one simulated cluster, then applied for real by the
// sync: the preview told, object by object, what the sync then did, and wrote nothing itself.
#include "consumer/cluster_preview.h"

#include <doctest/doctest.h>

#include "tests/unit/consumer/apply_test_fixture.h"

using namespace syncbus;
using namespace syncbus::consumer;

namespace {

using syncbus::consumer::testing::ApplyFixture;
using syncbus::consumer::testing::ConfigMap;
using syncbus::consumer::testing::kCluster;

Json SyncSetObject(const std::string& name, const Json& resources,
                   const std::string& ns = kCluster) {
  return {{"apiVersion", "hive.openshift.io/v1"},
          {"kind", "SyncSet"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"clusterDeploymentRefs", Json::array({{{"name", kCluster}}})},
            {"resourceApplyMode", "Sync"},
            {"resources", resources}}}};
}

std::string OutcomeList(const PreviewReply& reply) {
  std::string text;
  for (const ObjectPreview& o : reply.objects) {
    text += (text.empty() ? "" : ", ") + o.kind + " " + o.ns + "/" + o.name + ": " +
            ObjectOutcomeName(o.outcome);
  }
  return text;
}

const PreviewCluster kTarget{kCluster, kCluster};

}  // namespace

TEST_CASE("a preview tells what the sync of the change then does, object by object") {
  ApplyFixture f;
  f.PutSyncSet("app",
               SyncSetObject("app", Json::array({ConfigMap("kept", {{"k", "1"}}),
                                                 ConfigMap("changed", {{"k", "1"}}),
                                                 ConfigMap("dropped", {{"k", "1"}})}))["spec"]);
  f.Sync();
  ClusterPreviewer previewer({}, *f.hub, *f.reader, *f.targets);

  // The change: one value changed, one object dropped (Sync mode deletes it), one added, and one
  // in a namespace the cluster does not have, before one more that the sync never reaches.
  const Json change = SyncSetObject(
      "app",
      Json::array({ConfigMap("kept", {{"k", "1"}}), ConfigMap("changed", {{"k", "2"}}),
                   ConfigMap("added", {{"k", "1"}}), ConfigMap("lost", {{"k", "1"}}, "nowhere"),
                   ConfigMap("after", {{"k", "1"}})}));
  const Json before = f.ConfigMapOnTarget("changed");
  const PreviewReply reply = previewer.Preview("p1", change, kTarget);
  REQUIRE_MESSAGE(reply.error.empty(), reply.error);
  CHECK(reply.preview_id == "p1");
  CHECK(OutcomeList(reply) ==
        "ConfigMap default/kept: unchanged, ConfigMap default/changed: changed, ConfigMap "
        "default/added: created, ConfigMap nowhere/lost: refused, ConfigMap default/after: "
        "not-reached, ConfigMap default/dropped: deleted");
  REQUIRE(reply.objects.size() == 6);
  CHECK(reply.objects[1].diff == std::vector<std::string>{"data.k: \"1\" -> \"2\""});
  // Nothing was written on the cluster.
  CHECK(f.ConfigMapOnTarget("changed") == before);
  CHECK(f.ConfigMapOnTarget("added").is_null());
  CHECK_FALSE(f.ConfigMapOnTarget("dropped").is_null());

  // The sync of the same change does what the preview said.
  f.PutSyncSet("app", change["spec"]);
  f.Sync();
  CHECK(f.ConfigMapOnTarget("changed")["data"]["k"] == "2");
  CHECK_FALSE(f.ConfigMapOnTarget("added").is_null());
  CHECK(f.ConfigMapOnTarget("after").is_null());
  CHECK(f.ConfigMapOnTarget("dropped").is_null());
  const Json entry = f.Entry("app");
  REQUIRE(entry.is_object());
  CHECK(entry["result"] == "Failure");
  CHECK(entry["failureMessage"] == reply.objects[3].message);
}

TEST_CASE("a cluster a preview cannot cover says why, and nothing else") {
  ApplyFixture f;
  ClusterPreviewer previewer({}, *f.hub, *f.reader, *f.targets);
  const Json set = SyncSetObject("app", Json::array({ConfigMap("cm", {{"k", "1"}})}));
  SUBCASE("no such cluster") {
    const PreviewReply reply = previewer.Preview("p", set, {"cluster-9999", "cluster-9999"});
    CHECK(reply.error == "no ClusterDeployment cluster-9999/cluster-9999");
    CHECK(reply.objects.empty());
  }
  SUBCASE("a SyncSet of another namespace") {
    const PreviewReply reply =
        previewer.Preview("p", SyncSetObject("app", Json::array(), "elsewhere"), kTarget);
    CHECK(reply.error == "the SyncSet is in namespace elsewhere, the cluster in cluster-0000");
  }
  SUBCASE("a SyncSet that does not name the cluster") {
    Json other = set;
    other["spec"]["clusterDeploymentRefs"] = Json::array({{{"name", "cluster-0001"}}});
    CHECK(previewer.Preview("p", other, kTarget).error == "the set does not apply to this cluster");
  }
  SUBCASE("not a set") {
    Json cm = ConfigMap("cm", {{"k", "1"}});
    CHECK(previewer.Preview("p", cm, kTarget).error ==
          "not a SyncSet or SelectorSyncSet: kind \"ConfigMap\"");
  }
  SUBCASE("a cluster Hive skips") {
    auto r = f.sim->hub().Call(
        "PATCH",
        std::string("/apis/hive.openshift.io/v1/namespaces/") + kCluster + "/clusterdeployments/" +
            kCluster,
        Json{{"metadata", {{"annotations", {{"hive.openshift.io/syncset-pause", "true"}}}}}},
        "application/merge-patch+json");
    REQUIRE_MESSAGE(r.status == 200, r.body);
    CHECK(previewer.Preview("p", set, kTarget).error.rfind("skipped, as Hive skips it: ", 0) == 0);
  }
}
