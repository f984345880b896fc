// Hive's clustersync tests about which clusters are synced and what ClusterSync, lease and
// firstSuccessTime say: NewClusterDeployment, NoWorkToDo, Reapply, NewSyncSetApplied,
// IgnoreNotApplicableSyncSets, PartialApply, ConditionNotMutatedWhenMessageNotChanged,
// FirstSuccessTime, NoFirstSuccessTimeSet, FirstSuccessTimeSetWithNoSyncSets.
#include <doctest/doctest.h>

#include "common/time_format.h"
#include "tests/conformance/hive/rig.h"

namespace syncbus::conformance::hive {
namespace {

namespace res = kube::resources;
using namespace std::chrono_literals;

TEST_CASE("TestReconcileClusterSync_NewClusterDeployment") {
  Rig rig;
  rig.CreateCd();
  Reconciled r = rig.Reconcile();
  REQUIRE(r.sent);
  Json cs = rig.GetClusterSync();
  REQUIRE_MESSAGE(!cs.is_null(), "expected there to be a ClusterSync");
  // Deliberately different: Hive's first reconcile only creates the ClusterSync and requeues at
  // once; syncbus does that pass and the next in one: the lease exists already, and the status.
  CHECK_FALSE(rig.GetLease().is_null());
  rig.Check(r, {});
}

TEST_CASE("TestReconcileClusterSync_NoWorkToDo") {
  Rig rig;
  Rig::Cd cd;
  SUBCASE("no ClusterDeployment") {
    rig.Check(rig.Reconcile(), Expect().NoWork());
    return;
  }
  SUBCASE("deleted ClusterDeployment") {
    cd.deleted = true;
  }
  SUBCASE("unreachable") {
    cd.unreachable = "True";
  }
  SUBCASE("uninstalled and unreachable unknown") {
    cd.installed = false;
    cd.installed_timestamp = false;
    cd.unreachable = "Unknown";
  }
  SUBCASE("syncset pause") {
    cd.annotations = {{"hive.openshift.io/syncset-pause", "true"}};
  }
  rig.CreateCd(cd);
  rig.Check(rig.Reconcile(), Expect().NoWork());
}

TEST_CASE("TestReconcileClusterSync_Reapply") {
  Rig rig;
  rig.CreateCd();
  rig.CreateTargetNamespace(rig.T("dest-namespace"));
  rig.CreateSyncSet("test-syncset",
                    {{"resources", Resources({ConfigMap(rig.T("dest-namespace"), "dest-name")})}});
  rig.CreateClusterSync({SyncStatus("test-syncset").TransitionInThePast().FirstSuccessInThePast()});
  bool expect_apply = true;
  SUBCASE("too soon") {
    rig.CreateLease(Now() - 1h);
    expect_apply = false;
  }
  SUBCASE("time for reapply") {
    rig.CreateLease(Now() - 3h);
  }
  SUBCASE("no sync lease") {}
  // Hive's zero renewTime; the CRD requires the field, so it is the zero time written out.
  SUBCASE("sync lease with no renew time") {
    rig.CreateLease("0001-01-01T00:00:00.000000Z");
  }
  Reconciled r = rig.Reconcile();
  Expect expect;
  expect.sync_sets = {SyncStatus("test-syncset").TransitionInThePast().FirstSuccessInThePast()};
  expect.unchanged_lease_renew_time = !expect_apply;
  rig.Check(r, expect);
  CHECK(rig.TargetGet(res::kConfigMaps, rig.T("dest-namespace"), "dest-name").is_null() ==
        !expect_apply);
}

TEST_CASE("TestReconcileClusterSync_NewSyncSetApplied") {
  Rig rig;
  rig.CreateCd();
  rig.CreateTargetNamespace(rig.T("dest-namespace"));
  rig.CreateTargetNamespace(rig.T("other-namespace"));
  rig.CreateSyncSet("existing-syncset",
                    {{"resources", Resources({ConfigMap(rig.T("dest-namespace"), "dest-name")})}});
  rig.CreateSyncSet(
      "new-syncset",
      {{"resources", Resources({ConfigMap(rig.T("other-namespace"), "other-name")})}});
  rig.CreateClusterSync(
      {SyncStatus("existing-syncset").TransitionInThePast().FirstSuccessInThePast()});
  rig.CreateLease(Now() - 1h);
  Reconciled r = rig.Reconcile();
  rig.Check(r, Expect()
                   .SyncSets(std::vector<SyncStatus>{
                       SyncStatus("existing-syncset").TransitionInThePast().FirstSuccessInThePast(),
                       SyncStatus("new-syncset")})
                   .LeaseUnchanged());
  CHECK_FALSE(rig.TargetGet(res::kConfigMaps, rig.T("other-namespace"), "other-name").is_null());
  CHECK(rig.TargetGet(res::kConfigMaps, rig.T("dest-namespace"), "dest-name")
            .is_null());  // not re-applied
}

TEST_CASE("TestReconcileClusterSync_IgnoreNotApplicableSyncSets") {
  Rig rig;
  const std::string value = rig.U("test-label-value");
  rig.CreateCd(Rig::Cd().Labels({{"test-label-key", value}}));
  rig.CreateTargetNamespace(rig.T("dest-namespace"));
  const std::string ns = rig.T("dest-namespace");
  rig.CreateSyncSet(
      "applicable-syncset",
      {{"resources", Resources({ConfigMap(ns, "resource-from-applicable-syncset")})}});
  rig.CreateSyncSet(
      "non-applicable-syncset",
      {{"clusterDeploymentRefs", Json::array({{{"name", "other-cd"}}})},
       {"resources", Resources({ConfigMap(ns, "resource-from-non-applicable-syncset")})}});
  rig.CreateSelectorSyncSet(
      rig.U("applicable-selectorsyncset"),
      {{"clusterDeploymentSelector", {{"matchLabels", {{"test-label-key", value}}}}},
       {"resources", Resources({ConfigMap(ns, "resource-from-applicable-selectorsyncset")})}});
  rig.CreateSelectorSyncSet(
      rig.U("non-applicable-selectorsyncset"),
      {{"clusterDeploymentSelector",
        {{"matchLabels", {{"test-label-key", rig.U("other-label-value")}}}}},
       {"resources", Resources({ConfigMap(ns, "resource-from-non-applicable-selectorsyncset")})}});
  rig.CreateClusterSync();
  Reconciled r = rig.Reconcile();
  rig.Check(r, Expect()
                   .SyncSets(std::vector<SyncStatus>{SyncStatus("applicable-syncset")})
                   .SelectorSyncSets(
                       std::vector<SyncStatus>{SyncStatus(rig.U("applicable-selectorsyncset"))}));
  CHECK_FALSE(rig.TargetGet(res::kConfigMaps, ns, "resource-from-applicable-syncset").is_null());
  CHECK_FALSE(
      rig.TargetGet(res::kConfigMaps, ns, "resource-from-applicable-selectorsyncset").is_null());
  CHECK(rig.TargetGet(res::kConfigMaps, ns, "resource-from-non-applicable-syncset").is_null());
  CHECK(rig.TargetGet(res::kConfigMaps, ns, "resource-from-non-applicable-selectorsyncset")
            .is_null());
}

TEST_CASE("TestReconcileClusterSync_PartialApply") {
  Rig rig;
  rig.CreateCd();
  rig.CreateTargetNamespace(rig.T("dest-namespace"));
  rig.CreateSyncSet("test-syncset",
                    {{"resources", Resources({ConfigMap(rig.T("dest-namespace"), "dest-name")})}},
                    2);
  SyncStatus expected("test-syncset");
  SUBCASE("last apply failed") {
    rig.CreateClusterSync({SyncStatus("test-syncset")
                               .Generation(2)
                               .Failure("existing failure")
                               .TransitionInThePast()
                               .NoFirstSuccess()});
    expected.Generation(2);
  }
  SUBCASE("syncset generation changed") {
    rig.CreateClusterSync(
        {SyncStatus("test-syncset").Generation(1).TransitionInThePast().FirstSuccessInThePast()});
    expected.Generation(2).FirstSuccessInThePast();
  }
  rig.CreateLease(Now());
  Reconciled r = rig.Reconcile();
  rig.Check(r, Expect().SyncSets(std::vector<SyncStatus>{expected}).LeaseUnchanged());
}

TEST_CASE("TestReconcileClusterSync_ConditionNotMutatedWhenMessageNotChanged") {
  Rig rig;
  rig.CreateCd();
  // The namespace is missing: the apply fails (Hive's test makes its mock fail).
  rig.CreateSyncSet("test-syncset",
                    {{"resources", Resources({ConfigMap(rig.T("dest-namespace"), "dest-name")})}});
  Json condition = {{"type", "Failed"},
                    {"status", "True"},
                    {"reason", "Failure"},
                    {"message", "SyncSet test-syncset is failing"},
                    {"lastTransitionTime", kTimeInThePast},
                    {"lastProbeTime", kTimeInThePast}};
  rig.CreateClusterSync({SyncStatus("test-syncset")
                             .Failure("failed to apply")
                             .TransitionInThePast()
                             .NoFirstSuccess()},
                        {}, Json::array({condition}));
  Reconciled r = rig.Reconcile();
  rig.Check(r, Expect::FailingSyncSet(
                   "test-syncset",
                   "failed to apply resource 0: error when creating \"object\": namespaces \"" +
                       rig.T("dest-namespace") + "\" not found")
                   .Requeue());
  Json conditions = rig.GetClusterSync()["status"]["conditions"];
  REQUIRE(conditions.size() == 1);
  CHECK(conditions[0]["type"] == "Failed");
  CHECK(conditions[0]["status"] == "True");
  CHECK(conditions[0]["lastTransitionTime"] == kTimeInThePast);
  CHECK(conditions[0]["lastProbeTime"] == kTimeInThePast);
}

TEST_CASE("TestReconcileClusterSync_FirstSuccessTime") {
  Rig rig;
  // installedTimestamp 15 minutes before timeInThePast; the old set first succeeded 10 minutes
  // after it.
  rig.CreateCd(Rig::Cd().InstalledAt("2020-01-02T02:49:05Z"));
  rig.CreateTargetNamespace(rig.T("dest-namespace"));
  Json resources = Resources({ConfigMap(rig.T("dest-namespace"), "dest-name")});
  rig.CreateSyncSet("test-syncset-new", {{"resources", resources}});
  rig.CreateSyncSet("test-syncset-old", {{"resources", resources}});
  const std::string old_first_success = "2020-01-02T03:14:05Z";
  rig.CreateClusterSync(
      {SyncStatus("test-syncset-old").TransitionInThePast().FirstSuccessAt(old_first_success),
       SyncStatus("test-syncset-new").TransitionInThePast().FirstSuccessInThePast()});
  rig.CreateLease(Now() - 1h);
  Reconciled r = rig.Reconcile();
  rig.Check(r, Expect()
                   .SyncSets(std::vector<SyncStatus>{
                       SyncStatus("test-syncset-new").TransitionInThePast().FirstSuccessInThePast(),
                       SyncStatus("test-syncset-old")
                           .TransitionInThePast()
                           .FirstSuccessAt(old_first_success)})
                   .LeaseUnchanged());
  // ClusterSync.Status.FirstSuccessTime is the latest of the sets' first successes.
  CHECK(rig.GetClusterSync()["status"].value("firstSuccessTime", "") == old_first_success);
}

TEST_CASE("TestReconcileClusterSync_NoFirstSuccessTimeSet") {
  Rig rig;
  rig.CreateCd(Rig::Cd().InstalledAt("2020-01-02T02:49:05Z"));
  rig.CreateSyncSet("test-syncset",
                    {{"resources", Resources({ConfigMap(rig.T("dest-namespace"), "dest-name")})}});
  rig.CreateClusterSync({SyncStatus("test-syncset")
                             .TransitionInThePast()
                             .Failure("test apply error")
                             .NoFirstSuccess()});
  rig.CreateLease(Now() - 1h);
  Reconciled r = rig.Reconcile();
  rig.Check(
      r,
      Expect()
          .Failed("SyncSet test-syncset is failing")
          .SyncSets(std::vector<SyncStatus>{
              SyncStatus("test-syncset")
                  .NoFirstSuccess()
                  .Failure(
                      "failed to apply resource 0: error when creating \"object\": namespaces \"" +
                      rig.T("dest-namespace") + "\" not found")})
          .LeaseUnchanged()
          .Requeue());
  CHECK_FALSE(rig.GetClusterSync()["status"].contains("firstSuccessTime"));
}

TEST_CASE("TestReconcileClusterSync_FirstSuccessTimeSetWithNoSyncSets") {
  Rig rig;
  rig.CreateCd(Rig::Cd().InstalledAt("2020-01-02T02:49:05Z"));
  rig.CreateClusterSync();
  rig.CreateLease(Now() - 1h);
  Reconciled r = rig.Reconcile();
  rig.Check(r, Expect().LeaseUnchanged());
  // Set when no set applies to the cluster.
  CHECK(Between(rig.GetClusterSync()["status"].value("firstSuccessTime", ""), r.start, r.end));
}

}  // namespace
}  // namespace syncbus::conformance::hive
