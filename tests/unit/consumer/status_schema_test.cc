// Everything the consumer writes to ClusterSync must validate against upstream's CRD schema, and
// survive a round trip through a hub that validates and prunes with those CRDs.
#include <fstream>
#include <sstream>

#include <doctest/doctest.h>

#include "common/yaml_json.h"
#include "consumer/status_builder.h"
#include "tests/fakes/common/fake_clock.h"
#include "tests/kubesim/schema.h"
#include "tests/unit/consumer/apply_test_fixture.h"

using namespace syncbus;
using namespace syncbus::consumer;
using namespace std::chrono_literals;

namespace {

std::shared_ptr<const kubesim::Schema> ClusterSyncSchema() {
  std::ifstream in(std::string(SYNCBUS_KUBESIM_CRD_DIR) +
                   "/hiveinternal.openshift.io_clustersyncs.yaml");
  std::stringstream text;
  text << in.rdbuf();
  auto crd = YamlToJson(text.str());
  REQUIRE_MESSAGE(crd.ok(), crd.status().ToString());
  auto schema =
      kubesim::Schema::Compile((*crd)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]);
  REQUIRE_MESSAGE(schema.ok(), schema.status().ToString());
  return *schema;
}

hive::SyncResourceReference Ref(std::string api_version, std::string kind, std::string name,
                                std::string ns) {
  return {std::move(api_version), std::move(kind), std::move(name), std::move(ns)};
}

SetOutcome Outcome(SetKind kind, std::string name, int64_t generation, bool applied, bool success,
                   std::string message, std::vector<hive::SyncResourceReference> tracked) {
  SetOutcome o;
  o.kind = kind;
  o.name = std::move(name);
  o.generation = generation;
  o.applied = applied;
  o.success = success;
  o.failure_message = std::move(message);
  o.sync_mode = !tracked.empty();
  o.resources_to_delete = std::move(tracked);
  return o;
}

// Successes, failures with long multi-byte messages, Sync-mode tracking (namespaced and
// cluster-scoped), a removed set whose deletion failed, across two rounds.
hive::ClusterSyncStatus ComplexStatus(FakeClock& clock) {
  std::string long_message;
  for (int i = 0; i < 5000; ++i) long_message += "é failure ";
  std::vector<SetOutcome> round1 = {
      Outcome(SetKind::kSyncSet, "a", 1, true, true, "",
              {Ref("v1", "ConfigMap", "x", "default"), Ref("v1", "Namespace", "team", "")}),
      Outcome(SetKind::kSyncSet, "b", 3, true, false, long_message, {}),
      Outcome(SetKind::kSyncSet, "gone", 1, true, true, "",
              {Ref("apps/v1", "Deployment", "d", "default")}),
      Outcome(SetKind::kSelectorSyncSet, "fleet-1", 7, true, true, "", {}),
      Outcome(SetKind::kSelectorSyncSet, "fleet-2", 2, true, false,
              "failed to apply resource 0: conflict", {}),
  };
  auto first = BuildStatus({}, round1, clock.WallNow(), "2020-01-01T00:00:00Z").status;
  clock.Advance(5min);
  SetOutcome gone = Outcome(SetKind::kSyncSet, "gone", 1, true, false,
                            "failed to delete apps/v1, Kind=Deployment default/d: unavailable",
                            {Ref("apps/v1", "Deployment", "d", "default")});
  gone.removed = true;
  std::vector<SetOutcome> round2 = {
      gone,
      Outcome(SetKind::kSyncSet, "a", 2, true, true, "", {Ref("v1", "ConfigMap", "x", "default")}),
      Outcome(SetKind::kSyncSet, "b", 3, false, false, "", {}),
      Outcome(SetKind::kSelectorSyncSet, "fleet-1", 7, false, false, "", {}),
      Outcome(SetKind::kSelectorSyncSet, "fleet-2", 3, true, true, "", {}),
  };
  return BuildStatus(first, round2, clock.WallNow(), "2020-01-01T00:00:00Z").status;
}

}  // namespace

TEST_CASE(
    "status: a complex ClusterSync status validates against the upstream CRD schema, nothing "
    "pruned") {
  FakeClock clock;
  hive::ClusterSyncStatus status = ComplexStatus(clock);
  REQUIRE(status.sync_sets.size() == 3);  // a, b, gone (its deletion failed)
  Json object = {{"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
                 {"kind", "ClusterSync"},
                 {"metadata", {{"name", "c"}, {"namespace", "c"}}},
                 {"spec", Json::object()},
                 {"status", status.ToJson()}};
  auto schema = ClusterSyncSchema();
  Json pruned_copy = object;
  std::vector<std::string> pruned;
  schema->Prune(pruned_copy, /*root=*/true, &pruned);
  std::string first_pruned = pruned.empty() ? "" : pruned[0];
  CHECK_MESSAGE(pruned.empty(), first_pruned);
  CHECK(pruned_copy == object);
  std::vector<kubesim::FieldError> errors;
  schema->Validate(object, "", &errors);
  std::string first_error = errors.empty() ? "" : errors[0].field + ": " + errors[0].detail;
  CHECK_MESSAGE(errors.empty(), first_error);
}

TEST_CASE("status: a complex status round-trips through the hub unchanged") {
  consumer::testing::ApplyFixture f;
  FakeClock clock;
  hive::ClusterSyncStatus status = ComplexStatus(clock);
  const std::string ns = consumer::testing::kCluster;
  auto created = f.hub->Create(kube::Collection(kube::resources::kClusterSyncs, ns),
                               {{"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
                                {"kind", "ClusterSync"},
                                {"metadata", {{"name", ns}, {"namespace", ns}}},
                                {"spec", Json::object()}});
  REQUIRE_MESSAGE(created.ok(), created.status().ToString());
  Json update = *created;
  update["status"] = status.ToJson();
  auto written = f.hub->Update(kube::StatusOf(kube::resources::kClusterSyncs, ns, ns), update);
  REQUIRE_MESSAGE(written.ok(), written.status().ToString());
  auto read = f.hub->Get(kube::Object(kube::resources::kClusterSyncs, ns, ns));
  REQUIRE(read.ok());
  CHECK((*read)["status"] == status.ToJson());
  auto parsed = hive::ClusterSync::FromJson(*read);
  REQUIRE(parsed.ok());
  CHECK(parsed->status.ToJson() == status.ToJson());
}

TEST_CASE(
    "status: bounded size — messages truncated (UTF-8 safe), the condition names at most what "
    "fits") {
  FakeClock clock;
  std::string huge(200 * 1024, 'x');
  huge += "ü";
  std::vector<SetOutcome> sets;
  for (int i = 0; i < 500; ++i) {
    sets.push_back(Outcome(SetKind::kSelectorSyncSet,
                           "a-rather-long-selector-syncset-name-" + std::to_string(i), 1, true,
                           false, huge, {}));
  }
  auto st = BuildStatus({}, sets, clock.WallNow(), "").status;
  for (const auto& e : st.selector_sync_sets)
    CHECK(e.failure_message.size() <= kMaxFailureMessageBytes);
  CHECK(st.conditions[0].message.size() <= kMaxFailureMessageBytes);
  CHECK(st.conditions[0].message.find("(truncated)") != std::string::npos);
  // 500 failing sets with 200 KiB messages stay far below etcd's 1.5 MiB object limit.
  CHECK(st.ToJson().dump().size() < 700 * 1024);
  std::string cut = TruncateMessage(std::string(1020, 'a') + "éééééééé", 1030);
  CHECK(Json(cut).dump().size() > 0);  // valid UTF-8 or dump() throws
}

TEST_CASE(
    "status: a removed set's entry goes once its objects are deleted, stays as Failure while they "
    "fail") {
  FakeClock clock;
  auto st = BuildStatus({},
                        {Outcome(SetKind::kSyncSet, "s", 1, true, true, "",
                                 {Ref("v1", "ConfigMap", "a", "default")})},
                        clock.WallNow(), "")
                .status;
  SetOutcome failed = Outcome(SetKind::kSyncSet, "s", 1, true, false,
                              "failed to delete v1, Kind=ConfigMap default/a: down",
                              {Ref("v1", "ConfigMap", "a", "default")});
  failed.removed = true;
  clock.Advance(1min);
  auto kept = BuildStatus(st, {failed}, clock.WallNow(), "").status;
  REQUIRE(kept.sync_sets.size() == 1);
  CHECK(kept.sync_sets[0].result == hive::SyncResult::kFailure);
  CHECK(kept.sync_sets[0].resources_to_delete.size() == 1);
  CHECK(kept.sync_sets[0].last_transition_time != st.sync_sets[0].last_transition_time);
  CHECK(kept.conditions[0].status == "True");
  SetOutcome done = failed;
  done.success = true;
  done.resources_to_delete.clear();
  auto gone = BuildStatus(kept, {done}, clock.WallNow(), "").status;
  CHECK(gone.sync_sets.empty());
  CHECK(gone.conditions[0].status == "False");
}
