// Conformance: a set's preview (server-side dry runs, consumer/set_preview.h) gives the same
// outcome per object on the simulator and on kube-apiserver, and writes nothing on either.
#include "consumer/set_preview.h"

#include <map>

#include <doctest/doctest.h>

#include "common/hive/types.h"
#include "consumer/set_plan.h"
#include "tests/conformance/kube/conformance_util.h"

namespace syncbus::conformance {
namespace {

std::string Outcome(const ObjectPreview& o) {
  switch (o.outcome) {
    case ObjectOutcome::kCreated: return o.name + " created";
    case ObjectOutcome::kChanged: return o.name + " changed";
    case ObjectOutcome::kUnchanged: return o.name + " unchanged";
    case ObjectOutcome::kDeleted: return o.name + " deleted";
    case ObjectOutcome::kRefused: return o.name + " refused";
    case ObjectOutcome::kNotReached: return o.name + " not-reached";
  }
  return o.name + " ?";
}

// The names and resourceVersions of the namespace's ConfigMaps.
std::map<std::string, std::string> ConfigMapVersions(kube::Client& client, const std::string& ns) {
  auto list = client.List(kube::Collection(kube::resources::kConfigMaps, ns), {});
  REQUIRE_MESSAGE(list.ok(), list.status().ToString());
  std::map<std::string, std::string> out;
  for (const Json& item : list->items) out[item["metadata"]["name"]] = Rv(item);
  return out;
}

TEST_CASE(
    "set preview: created, changed, refused for a missing namespace, deleted, nothing written") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("preview");
  const std::string missing = ns + "-missing";
  for (const char* name : {"changed", "dropped"}) {
    Result<Json> made = client->Create(kube::Collection(kube::resources::kConfigMaps, ns),
                                       ConfigMap(ns, name, {{"k", "old"}}));
    REQUIRE_MESSAGE(made.ok(), made.status().ToString());
  }

  Json set = {
      {"apiVersion", "hive.openshift.io/v1"},
      {"kind", "SyncSet"},
      {"metadata", {{"name", "s"}, {"namespace", ns}}},
      {"spec",
       {{"clusterDeploymentRefs", Json::array({{{"name", "c"}}})},
        {"resourceApplyMode", "Sync"},
        {"resources",
         Json::array({ConfigMap(ns, "new", {{"k", "v"}}), ConfigMap(ns, "changed", {{"k", "new"}}),
                      ConfigMap(missing, "lost", {}), ConfigMap(ns, "after", {})})}}}};
  auto parsed = hive::SyncSet::FromJson(set);
  REQUIRE_MESSAGE(parsed.ok(), parsed.status().ToString());
  consumer::PlanInput in;
  in.spec = &parsed->spec;
  in.set_namespace = ns;
  in.previously_tracked = {{"v1", "ConfigMap", "dropped", ns}, {"v1", "ConfigMap", "absent", ns}};
  consumer::RestMapper mapper(*client);
  consumer::SetPlan plan = consumer::PlanSet(in, &mapper);

  const auto before = ConfigMapVersions(*client, ns);
  std::vector<ObjectPreview> preview = consumer::PreviewSetPlan(plan, *client, mapper, {});
  CHECK(ConfigMapVersions(*client, ns) == before);

  std::vector<std::string> outcomes;
  for (const ObjectPreview& o : preview) outcomes.push_back(Outcome(o));
  CHECK(outcomes == std::vector<std::string>{"new created", "changed changed", "lost refused",
                                             "after not-reached", "dropped deleted"});
  REQUIRE(preview.size() == 5);
  // The set labels what it manages.
  CHECK(preview[1].diff ==
        std::vector<std::string>{
            R"(data.k: "old" -> "new")",
            R"(metadata.labels["hive.openshift.io/managed"]: <none> -> "true")"});
  CHECK(preview[2].message ==
        "failed to apply resource 2: error when creating \"object\": "
        "namespaces \"" +
            missing + "\" not found");
}

}  // namespace
}  // namespace syncbus::conformance
