#include "tests/support/hive_objects.h"

#include <cctype>

#include <doctest/doctest.h>

#include "common/kube/resource.h"

namespace syncbus::testing {

Json RunningClusterStatus(Json conditions) {
  constexpr char kLongAgo[] = "2024-01-01T00:00:00Z";
  conditions.push_back({{"type", "Unreachable"},
                        {"status", "False"},
                        {"reason", "ClusterReachable"},
                        {"message", "cluster is reachable"},
                        {"lastTransitionTime", kLongAgo},
                        {"lastProbeTime", kLongAgo}});
  return {{"installedTimestamp", kLongAgo}, {"conditions", std::move(conditions)}};
}

hive::SyncStatus SyncStatusEntry(const std::string& name, int64_t generation,
                                 hive::SyncResult result) {
  hive::SyncStatus e;
  e.name = name;
  e.observed_generation = generation;
  e.result = result;
  return e;
}

Json SucceededCondition(const std::string& time) {
  return {{"type", "Failed"},
          {"status", "False"},
          {"reason", "Success"},
          {"message", "All SyncSets and SelectorSyncSets have been applied to the cluster"},
          {"lastTransitionTime", time},
          {"lastProbeTime", time}};
}

void MarkClusterRunning(kube::Client& hub, const std::string& ns, const std::string& name) {
  Result<Json> cd = hub.Get(kube::Object(kube::resources::kClusterDeployments, ns, name));
  REQUIRE_MESSAGE(cd.ok(), cd.status().ToString());
  (*cd)["status"] = RunningClusterStatus();
  Result<Json> updated =
      hub.Update(kube::StatusOf(kube::resources::kClusterDeployments, ns, name), *cd);
  REQUIRE_MESSAGE(updated.ok(), updated.status().ToString());
}

Json OpenCrd(const std::string& group, const std::string& kind, const std::string& plural,
             bool namespaced, const std::vector<std::string>& versions) {
  std::string singular = kind;
  for (char& c : singular) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const Json schema = {
      {"openAPIV3Schema", {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}};
  Json served = Json::array();
  for (size_t i = 0; i < versions.size(); ++i) {
    served.push_back({{"name", versions[i]},
                      {"served", true},
                      {"storage", i + 1 == versions.size()},
                      {"schema", schema}});
  }
  return {
      {"apiVersion", "apiextensions.k8s.io/v1"},
      {"kind", "CustomResourceDefinition"},
      {"metadata", {{"name", plural + "." + group}}},
      {"spec",
       {{"group", group},
        {"scope", namespaced ? "Namespaced" : "Cluster"},
        {"names",
         {{"plural", plural}, {"singular", singular}, {"kind", kind}, {"listKind", kind + "List"}}},
        {"versions", std::move(served)}}}};
}

}  // namespace syncbus::testing
