#include "tests/support/rollout_objects.h"

#include <doctest/doctest.h>

#include "common/hive/types.h"
#include "common/kube/resource.h"

namespace syncbus::testing {

namespace res = kube::resources;

Json RolledOutSelectorSyncSet(const std::string& name, const std::string& rollout_spec) {
  Json set = {
      {"apiVersion", "hive.openshift.io/v1"},
      {"kind", "SelectorSyncSet"},
      {"metadata", {{"name", name}}},
      {"spec",
       {{"clusterDeploymentSelector", {{"matchLabels", {{"syncbus.io/fleet", "sim"}}}}},
        {"resources", Json::array({{{"apiVersion", "v1"},
                                    {"kind", "ConfigMap"},
                                    {"metadata", {{"name", name}, {"namespace", "default"}}},
                                    {"data", {{"k", "v"}}}}})}}}};
  if (!rollout_spec.empty())
    set["metadata"]["annotations"][rollout::kSpecAnnotation] = rollout_spec;
  return set;
}

void LabelFleetCluster(kube::Client& hub, const std::string& cluster, const std::string& key,
                       const std::string& value) {
  Json patch = {{"metadata", {{"labels", {{key, value}}}}}};
  auto patched = hub.Patch(kube::Object(res::kClusterDeployments, cluster, cluster),
                           kube::PatchType::kMerge, patch.dump());
  REQUIRE_MESSAGE(patched.ok(), patched.status().ToString());
}

void WriteSelectorSetEntry(kube::Client& hub, const std::string& cluster, const std::string& set,
                           int64_t generation, const std::string& message) {
  auto current = hub.Get(kube::Object(res::kClusterSyncs, cluster, cluster));
  if (!current.ok()) {
    REQUIRE_MESSAGE(current.status().code() == Code::kNotFound, current.status().ToString());
    current = hub.Create(kube::Collection(res::kClusterSyncs, cluster),
                         {{"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
                          {"kind", "ClusterSync"},
                          {"metadata", {{"name", cluster}, {"namespace", cluster}}},
                          {"spec", Json::object()}});
    REQUIRE_MESSAGE(current.ok(), current.status().ToString());
  }
  auto cs = hive::ClusterSync::FromJson(*current);
  REQUIRE_MESSAGE(cs.ok(), cs.status().ToString());
  hive::SyncStatus entry;
  entry.name = set;
  entry.observed_generation = generation;
  entry.result = message.empty() ? hive::SyncResult::kSuccess : hive::SyncResult::kFailure;
  entry.failure_message = message;
  entry.last_transition_time = "2026-01-01T00:00:00Z";
  auto& entries = cs->status.selector_sync_sets;
  std::erase_if(entries, [&](const hive::SyncStatus& e) { return e.name == set; });
  entries.push_back(entry);
  Json update = *current;
  update["status"] = cs->status.ToJson();
  auto written = hub.Update(kube::StatusOf(res::kClusterSyncs, cluster, cluster), update);
  REQUIRE_MESSAGE(written.ok(), written.status().ToString());
}

void WriteRolloutState(kube::Client& hub, const std::string& set,
                       const rollout::RolloutState& state) {
  Json patch = {
      {"metadata", {{"annotations", {{rollout::kStateAnnotation, rollout::EncodeState(state)}}}}}};
  auto patched = hub.Patch(kube::Object(res::kSelectorSyncSets, "", set), kube::PatchType::kMerge,
                           patch.dump());
  REQUIRE_MESSAGE(patched.ok(), patched.status().ToString());
}

rollout::RolloutState ReadRolloutState(kube::Client& hub, const std::string& set) {
  auto read = hub.Get(kube::Object(res::kSelectorSyncSets, "", set));
  REQUIRE_MESSAGE(read.ok(), read.status().ToString());
  auto meta = hive::ObjectMeta::FromJson(*read);
  REQUIRE(meta.ok());
  auto text = meta->annotations.find(rollout::kStateAnnotation);
  REQUIRE(text != meta->annotations.end());
  auto state = rollout::ParseState(text->second);
  REQUIRE_MESSAGE(state.ok(), state.status().ToString());
  return *state;
}

}  // namespace syncbus::testing
