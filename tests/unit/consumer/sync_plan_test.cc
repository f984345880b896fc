// The plan of one cluster's sync. NoWriteReason: when a sync of a cluster's state would end
// without a write (DeliveryLoop settles a returned request without running it on this answer, so
// every way the state can still call for a write must say ""). ReadsOf and PlanSteps: what the
// steps need read, and the steps themselves in Hive's order, from the state and those reads
// alone.
#include "consumer/sync_plan.h"

#include <memory>

#include <doctest/doctest.h>

#include "common/bus/rollout.h"
#include "common/hive/status_rules.h"

using namespace syncbus;
using namespace syncbus::consumer;

namespace {

std::shared_ptr<hive::ClusterDeployment> Cd() {
  auto cd = std::make_shared<hive::ClusterDeployment>();
  cd->meta.ns = cd->meta.name = "c1";
  cd->installed = true;
  cd->installed_timestamp = "2026-01-01T00:00:00Z";
  hive::Condition reachable;
  reachable.type = "Unreachable";
  reachable.status = "False";
  cd->conditions = {reachable};
  return cd;
}

hive::SyncStatus Entry(const std::string& name, int64_t generation, hive::SyncResult result) {
  hive::SyncStatus e;
  e.name = name;
  e.observed_generation = generation;
  e.result = result;
  e.first_success_time = "2026-01-01T00:00:00Z";
  return e;
}

// Cluster c1 with SyncSet "a" at generation 2, SelectorSyncSet "fleet" at generation 1, and a
// ClusterSync that reports both applied at those generations, with Hive's condition and
// firstSuccessTime: a state that needs no write.
struct State {
  std::shared_ptr<hive::ClusterDeployment> cd = Cd();
  std::shared_ptr<hive::SyncSet> ss = std::make_shared<hive::SyncSet>();
  std::shared_ptr<hive::SelectorSyncSet> sss = std::make_shared<hive::SelectorSyncSet>();
  hive::ClusterSync status;

  State() {
    ss->meta.ns = "c1";
    ss->meta.name = "a";
    ss->meta.generation = 2;
    sss->meta.name = "fleet";
    sss->meta.generation = 1;
    status.meta.ns = status.meta.name = "c1";
    status.status.sync_sets = {Entry("a", 2, hive::SyncResult::kSuccess)};
    status.status.selector_sync_sets = {Entry("fleet", 1, hive::SyncResult::kSuccess)};
    status.status.first_success_time = "2026-01-01T00:00:00Z";
  }
  ClusterState Build(bool with_status = true) {
    status.status.conditions = {hive::ExpectedFailedCondition(status.status)};
    ClusterState s;
    s.cd = cd;
    s.sync_sets = {ss};
    s.selector_sync_sets = {sss};
    if (with_status) s.status = std::make_shared<hive::ClusterSync>(status);
    return s;
  }
};

}  // namespace

TEST_CASE("a cluster whose status reports every set applied at its generation needs no write") {
  State st;
  CHECK(NoWriteReason(st.Build(), false) == "up-to-date");
}

TEST_CASE("every way the state still calls for a write is told apart from up to date") {
  SUBCASE("a full reapply writes every set") {
    State st;
    CHECK(NoWriteReason(st.Build(), true) == "");
  }
  SUBCASE("no ClusterSync yet") {
    State st;
    CHECK(NoWriteReason(st.Build(false), false) == "");
  }
  SUBCASE("a set at a newer generation than its entry") {
    State st;
    st.ss->meta.generation = 3;
    CHECK(NoWriteReason(st.Build(), false) == "");
  }
  SUBCASE("a set without an entry") {
    State st;
    st.status.status.selector_sync_sets.clear();
    CHECK(NoWriteReason(st.Build(), false) == "");
  }
  SUBCASE("a set that failed at its generation: its retries are still owed") {
    State st;
    st.status.status.sync_sets = {Entry("a", 2, hive::SyncResult::kFailure)};
    CHECK(NoWriteReason(st.Build(), false) == "");
  }
  SUBCASE("an entry of a set that no longer applies: its objects are deleted") {
    State st;
    st.status.status.sync_sets.push_back(Entry("gone", 1, hive::SyncResult::kSuccess));
    CHECK(NoWriteReason(st.Build(), false) == "");
  }
  SUBCASE("a condition that does not say what the entries call for") {
    State st;
    ClusterState s = st.Build();
    auto outdated = std::make_shared<hive::ClusterSync>(*s.status);
    outdated->status.conditions.clear();
    s.status = outdated;
    CHECK(NoWriteReason(s, false) == "");
  }
  SUBCASE("firstSuccessTime due on an installed cluster") {
    State st;
    st.status.status.first_success_time.clear();
    CHECK(NoWriteReason(st.Build(), false) == "");
  }
}

TEST_CASE("the steps of a sync: every set's outcome in Hive's order, a run for each with work") {
  State st;
  // "a" at a newer generation: a ConfigMap and a Secret mapped from its own namespace.
  st.ss->meta.generation = 3;
  st.ss->spec.resource_apply_mode = hive::ResourceApplyMode::kSync;
  st.ss->spec.resources.emplace_back(Json::parse(
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"app"}})"));
  st.ss->spec.secret_mappings.push_back({{"src", ""}, {"copied", "app"}});
  // "b": up to date, no run.
  auto b = std::make_shared<hive::SyncSet>();
  b->meta.ns = "c1";
  b->meta.name = "b";
  b->meta.generation = 1;
  st.status.status.sync_sets.push_back(Entry("b", 1, hive::SyncResult::kSuccess));
  // "gone": no longer applies; it tracked a ConfigMap, which is deleted.
  hive::SyncStatus gone = Entry("gone", 4, hive::SyncResult::kSuccess);
  gone.resources_to_delete = {{"v1", "ConfigMap", "old", "app"}};
  st.status.status.sync_sets.push_back(gone);
  // "fleet" at a newer generation: a patch and a Secret mapped from the hub's namespace; the
  // same source named twice is read once.
  st.sss->meta.generation = 2;
  st.sss->spec.patches.push_back({"apps/v1", "Deployment", "web", "app",
                                  R"({"spec":{"replicas":2}})", hive::PatchType::kStrategic,
                                  "strategic"});
  st.sss->spec.secret_mappings.push_back({{"shared", "hub"}, {"shared", "app"}});
  st.sss->spec.secret_mappings.push_back({{"shared", "hub"}, {"shared-again", "app"}});
  ClusterState state = st.Build();
  state.sync_sets.push_back(b);

  const SyncPlan plan = PlanSync(state, false);
  const PlanReads reads = ReadsOf(state, plan);
  CHECK(reads.secrets ==
        std::vector<std::pair<std::string, std::string>>{{"c1", "src"}, {"hub", "shared"}});
  CHECK(reads.api_versions == std::set<std::string>{"apps/v1", "v1"});

  SecretSources secrets;
  secrets.emplace("c1/src", Json::parse(R"({"metadata":{"name":"src"},"data":{"k":"dg=="}})"));
  secrets.emplace("hub/shared", NotFound("secrets \"shared\" not found"));
  const ClusterSteps steps = PlanSteps(state, plan, secrets, nullptr);

  std::vector<std::string> order;
  for (const SetOutcome& o : steps.outcomes)
    order.push_back(o.name + (o.removed ? " (removed)" : ""));
  CHECK(order == std::vector<std::string>{"gone (removed)", "a", "b", "fleet"});
  REQUIRE(steps.metas.size() == 4);
  CHECK(steps.metas[0] == nullptr);
  CHECK(steps.metas[1] == &st.ss->meta);
  CHECK(steps.outcome_of == std::vector<size_t>{0, 1, 3});
  REQUIRE(steps.runs.size() == 3);
  REQUIRE(steps.runs[0].deletions.size() == 1);
  CHECK(steps.runs[0].deletions[0].name == "old");
  REQUIRE(steps.runs[1].steps.size() == 2);
  CHECK(steps.runs[1].steps[0].name == "cm");
  CHECK(steps.runs[1].steps[1].object["data"]["k"] == "dg==");  // the source Secret as read
  REQUIRE(steps.runs[2].steps.size() == 3);
  CHECK(steps.runs[2].steps[0].op == ApplyStep::Op::kFail);  // its source was not found
  CHECK(steps.runs[2].steps[0].failure == "failed to read secret 0: Secret \"shared\" not found");
  CHECK(steps.runs[2].steps[2].op == ApplyStep::Op::kPatch);
  // No kind is known without the cluster's discovery: every run keeps its place in Hive's order.
  CHECK(steps.waits_for == std::vector<std::vector<size_t>>{{}, {0}, {0, 1}});
}

TEST_CASE("a sync with nothing to apply has its outcomes and no run") {
  State st;
  const ClusterState state = st.Build();
  const ClusterSteps steps = PlanSteps(state, PlanSync(state, false), {}, nullptr);
  CHECK(steps.outcomes.size() == 2);
  CHECK(steps.runs.empty());
  CHECK(steps.outcome_of.empty());
  CHECK(ReadsOf(state, PlanSync(state, false)).api_versions.empty());
}

TEST_CASE("a cluster that is gone or skipped needs no write, with the syncer's reason") {
  State st;
  ClusterState gone = st.Build();
  gone.cd = nullptr;
  CHECK(NoWriteReason(gone, false) == "cluster-gone");
  st.cd->meta.annotations["hive.openshift.io/syncset-pause"] = "true";
  st.ss->meta.generation = 3;  // a change waits, but a paused cluster gets none
  CHECK(NoWriteReason(st.Build(), false) == "skipped:" + st.cd->SkipReason());
  CHECK(st.cd->SkipReason() != "");
}

TEST_CASE("a set a rollout holds back is neither applied, reapplied nor removed: its entry stays") {
  State s;
  // SelectorSyncSet "fleet" is at generation 2 now, its rollout not yet at this cluster's wave,
  // and its selector no longer matches the cluster.
  s.sss->meta.generation = 2;
  s.sss->meta.annotations[rollout::kSpecAnnotation] = R"({"waves": [{"clusters": 1}]})";
  s.sss->selector = *hive::LabelSelector::FromJson({{"matchLabels", {{"gone", "yes"}}}});
  s.status.status.selector_sync_sets[0].resources_to_delete = {{"v1", "ConfigMap", "kept", "ns"}};
  s.ss->cluster_deployment_refs = {"c1"};
  ClusterState state = s.Build();
  ChooseSets(state, {s.ss}, {s.sss});
  REQUIRE(state.selector_sync_sets.size() == 1);  // held, with its entry: kept in the state
  CHECK(state.Held(hive::SetKind::kSelectorSyncSet, "fleet"));
  for (bool full_reapply : {false, true}) {
    SyncPlan plan = PlanSync(state, full_reapply);
    CHECK(plan.removed.empty());
    REQUIRE(plan.work.size() == 2);
    CHECK(plan.work[1].held);
    CHECK_FALSE(plan.work[1].needs_apply);
    CHECK(plan.work[1].generation == 1);  // its entry's
  }
  CHECK(NoWriteReason(state, false) == "up-to-date");
  // Without an entry a held set is not part of the sync at all.
  s.status.status.selector_sync_sets.clear();
  ClusterState fresh = s.Build();
  ChooseSets(fresh, {s.ss}, {s.sss});
  CHECK(fresh.selector_sync_sets.empty());
  CHECK(fresh.Held(hive::SetKind::kSelectorSyncSet, "fleet"));
}
