// Switching a fleet from Hive's clustersync to syncbus and back, on real API servers. With
// upstream Hive (../shared/hive): Hive applies first, syncbus takes over one namespace's clusters
// (a key removed from a set then disappears from its object), Hive is restarted and keeps syncing
// both the clusters syncbus wrote leases and statuses for and those it never touched. Without it:
// the objects, ClusterSync and lease are written the way Hive writes them, syncbus takes over, and
// what it leaves is checked against the formats Hive reads.
#include <regex>

#include <doctest/doctest.h>

#include "common/go_json.h"
#include "common/time_format.h"
#include "consumer/client_side_apply.h"
#include "consumer/set_applier.h"
#include "tests/e2e/hive/hive_world.h"
#include "tests/support/hive_objects.h"
#include "tests/support/wait.h"

namespace syncbus::testing {
namespace {

namespace res = kube::resources;
using namespace std::chrono_literals;

Json TargetCm(HiveWorld& w, const std::string& ns, const std::string& name) {
  auto cm = w.target().Get(kube::Object(res::kConfigMaps, ns, name));
  return cm.ok() ? *cm : Json();
}

// The last-applied annotation kubectl (Hive) and syncbus write for `object` as applied.
std::string LastApplied(Json object) {
  object["metadata"]["labels"]["hive.openshift.io/managed"] = "true";
  object["metadata"]["annotations"] = Json::object();
  return GoJsonEncode(object) + "\n";
}

bool MicroTime(const std::string& t) {
  return std::regex_match(t, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)"));
}

// Waits until the cluster's lease was renewed after `after` (a full reapply ran since).
bool LeaseRenewedAfter(HiveWorld& w, const std::string& ns, const std::string& cluster,
                       WallTime after) {
  return WaitFor(
      [&] {
        auto lease = w.hub().Get(kube::Object(res::kClusterSyncLeases, ns, cluster));
        if (!lease.ok()) return false;
        auto t = ParseRfc3339((*lease)["spec"].value("renewTime", ""));
        return t.ok() && *t > after;
      },
      90s, 500ms);
}

void CheckNoUpdateManagers(const Json& object) {
  for (const auto& entry : object["metadata"]["managedFields"]) {
    CHECK_MESSAGE(entry.value("operation", "") != "Update",
                  "a client-side apply manager is left: " << entry.dump());
  }
}

}  // namespace

TEST_CASE("switch-over with Hive: Hive, then syncbus, then Hive again") {
  std::string why;
  std::optional<std::string> hive_dir = HiveManager::Dir(&why);
  if (!hive_dir) ExitDidNotRun(why);
  HiveWorld w("hive-switch-over");
  const std::string a = "so-taken", b = "so-untouched";
  for (const std::string& ns : {a, b}) {
    w.CreateHubNamespace(ns);
    w.CreateTargetNamespace(ns);
    w.AddCluster(ns, ns);
  }
  w.PutSyncSet(
      a, "app", a,
      {{"resourceApplyMode", "Sync"},
       {"resources", Json::array({ConfigMapObject(a, "cfg", {{"k1", "1"}, {"k2", "2"}, {"k3", "3"}},
                                                  {{"team", "x"}})})}});
  w.PutSyncSet(b, "app-b", b,
               {{"resources", Json::array({ConfigMapObject(b, "cfg-b", {{"v", "1"}})})}});
  auto converged = [&](const std::string& ns, const std::string& set) {
    return WaitFor([&] { return w.Converged(ns, ns, {{"SyncSet", set}}); }, 90s, 250ms);
  };

  // 1. Hive applies, client-side.
  w.StartHive(*hive_dir);
  REQUIRE_MESSAGE(converged(a, "app"), w.HiveLog());
  REQUIRE_MESSAGE(converged(b, "app-b"), w.HiveLog());
  w.StopHive();
  Json cfg = TargetCm(w, a, "cfg");
  REQUIRE(cfg["metadata"]["annotations"].contains(consumer::kLastAppliedAnnotation));

  // 2. syncbus takes the first namespace over; a key and a label removed from the set go.
  const WallTime taken_over = RealClock().WallNow();
  w.StartSyncbus(a, "20s");
  Json next = ConfigMapObject(a, "cfg", {{"k1", "1"}, {"k3", "3"}});
  w.PutSyncSet(a, "app", a, {{"resourceApplyMode", "Sync"}, {"resources", Json::array({next})}});
  REQUIRE_MESSAGE(converged(a, "app"), w.SyncbusLogs());
  REQUIRE_MESSAGE(LeaseRenewedAfter(w, a, a, taken_over),
                  w.SyncbusLogs());  // syncbus's own full reapply
  cfg = TargetCm(w, a, "cfg");
  CHECK(cfg["data"] == Json({{"k1", "1"}, {"k3", "3"}}));
  CHECK_FALSE(cfg["metadata"]["labels"].contains("team"));
  CHECK(cfg["metadata"]["annotations"].value(consumer::kLastAppliedAnnotation, "") ==
        LastApplied(next));
  CheckNoUpdateManagers(cfg);
  Json lease = Ok(w.hub().Get(kube::Object(res::kClusterSyncLeases, a, a)));
  CHECK(MicroTime(lease["spec"]["renewTime"]));
  w.StopSyncbus();

  // 3. Hive again, reading what syncbus left.
  w.StartHive(*hive_dir);
  // The cluster syncbus never touched is synced (Hive could load every lease).
  w.PutSyncSet(b, "app-b", b,
               {{"resources", Json::array({ConfigMapObject(b, "cfg-b", {{"v", "2"}})})}});
  CHECK_MESSAGE(
      WaitFor([&] { return TargetCm(w, b, "cfg-b")["data"].value("v", "") == "2"; }, 90s, 250ms),
      w.HiveLog());
  // The taken-over cluster too: k3 goes (syncbus's last-applied names it), k4 comes.
  w.PutSyncSet(
      a, "app", a,
      {{"resourceApplyMode", "Sync"},
       {"resources", Json::array({ConfigMapObject(a, "cfg", {{"k1", "1"}, {"k4", "4"}})})}});
  CHECK_MESSAGE(WaitFor(
                    [&] {
                      return TargetCm(w, a, "cfg")["data"] == Json({{"k1", "1"}, {"k4", "4"}});
                    },
                    90s, 250ms),
                TargetCm(w, a, "cfg").dump() << "\n"
                                             << w.HiveLog());
  CHECK_MESSAGE(converged(a, "app"), w.HiveLog());
  std::string log = w.HiveLog();
  CHECK_MESSAGE(log.find("cannot parse") == std::string::npos, log);
  w.StopHive();
}

TEST_CASE(
    "switch-over without Hive: objects, ClusterSync and lease as Hive writes them, taken over and "
    "left in Hive's formats") {
  HiveWorld w("hive-switch-over-emulated");
  const std::string ns = "so-emulated";
  w.CreateHubNamespace(ns);
  w.CreateTargetNamespace(ns);
  w.AddCluster(ns, ns);
  Json first = ConfigMapObject(ns, "cfg", {{"k1", "1"}, {"k2", "2"}});
  w.PutSyncSet(ns, "app", ns, {{"resources", Json::array({first})}});
  // The object as Hive's kubectl left it: its field manager, an Update, the last-applied
  // annotation.
  Json applied = first;
  applied["metadata"]["labels"] = {{"hive.openshift.io/managed", "true"}};
  applied["metadata"]["annotations"] = {{consumer::kLastAppliedAnnotation, LastApplied(first)}};
  kube::ClusterConfig as_hive = w.target().config();
  as_hive.user_agent = "hive6-clustersync/v1";  // the server names the field manager after it
  Ok(kube::ClientImpl(as_hive, w.transport())
         .Create(kube::Collection(res::kConfigMaps, ns), applied),
     "Hive's object");
  // Hive's ClusterSync and lease for it.
  Json cd = Ok(w.hub().Get(kube::Object(res::kClusterDeployments, ns, ns)));
  Json cs =
      Ok(w.hub().Create(kube::Collection(res::kClusterSyncs, ns),
                        {{"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
                         {"kind", "ClusterSync"},
                         {"metadata",
                          {{"name", ns},
                           {"namespace", ns},
                           {"ownerReferences", Json::array({{{"apiVersion", "hive.openshift.io/v1"},
                                                             {"kind", "ClusterDeployment"},
                                                             {"name", ns},
                                                             {"uid", cd["metadata"]["uid"]},
                                                             {"blockOwnerDeletion", true}}})}}},
                         {"spec", Json::object()}}));
  const std::string now = FormatRfc3339(RealClock().WallNow());
  cs["status"] = {{"controlledByReplica", 0},
                  {"firstSuccessTime", now},
                  {"conditions", Json::array({SucceededCondition(now)})},
                  {"syncSets", Json::array({{{"name", "app"},
                                             {"observedGeneration", 1},
                                             {"result", "Success"},
                                             {"lastTransitionTime", now},
                                             {"firstSuccessTime", now}}})}};
  cs = Ok(w.hub().Update(kube::StatusOf(res::kClusterSyncs, ns, ns), cs));
  Ok(w.hub().Create(
      kube::Collection(res::kClusterSyncLeases, ns),
      {{"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
       {"kind", "ClusterSyncLease"},
       {"metadata",
        {{"name", ns},
         {"namespace", ns},
         {"ownerReferences", Json::array({{{"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
                                           {"kind", "ClusterSync"},
                                           {"name", ns},
                                           {"uid", cs["metadata"]["uid"]},
                                           {"blockOwnerDeletion", true}}})}}},
       {"spec", {{"renewTime", FormatRfc3339Micro(RealClock().WallNow())}}}}));

  const WallTime taken_over = RealClock().WallNow();
  w.StartSyncbus(ns, "20s");
  Json next = ConfigMapObject(ns, "cfg", {{"k1", "1"}});
  w.PutSyncSet(ns, "app", ns, {{"resources", Json::array({next})}});
  REQUIRE_MESSAGE(WaitFor(
                      [&] {
                        return w.Converged(ns, ns, {{"SyncSet", "app"}});
                      },
                      90s, 250ms),
                  w.SyncbusLogs());
  REQUIRE_MESSAGE(LeaseRenewedAfter(w, ns, ns, taken_over), w.SyncbusLogs());
  w.StopSyncbus();

  Json cfg = TargetCm(w, ns, "cfg");
  CHECK(cfg["data"] == Json({{"k1", "1"}}));  // k2, which only Hive's apply had set, is gone
  CHECK(cfg["metadata"]["annotations"].value(consumer::kLastAppliedAnnotation, "") ==
        LastApplied(next));
  CheckNoUpdateManagers(cfg);
  // What Hive reads back: metav1.Time (seconds) in the ClusterSync, metav1.MicroTime in the lease.
  Json status = Ok(w.hub().Get(kube::Object(res::kClusterSyncs, ns, ns)))["status"];
  auto seconds = std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)");
  CHECK(std::regex_match(status["firstSuccessTime"].get<std::string>(), seconds));
  for (const auto& e : status["syncSets"]) {
    CHECK(std::regex_match(e["lastTransitionTime"].get<std::string>(), seconds));
    CHECK(e["observedGeneration"] == 2);
  }
  CHECK(status["conditions"][0]["message"] ==
        "All SyncSets and SelectorSyncSets have been applied to the cluster");
  Json lease = Ok(w.hub().Get(kube::Object(res::kClusterSyncLeases, ns, ns)));
  CHECK(MicroTime(lease["spec"]["renewTime"]));
  CHECK(lease["metadata"]["ownerReferences"][0]["kind"] == "ClusterSync");
  CHECK(lease["metadata"]["ownerReferences"][0]["uid"] == cs["metadata"]["uid"]);
}

}  // namespace syncbus::testing
