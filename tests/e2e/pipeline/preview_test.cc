// End to end: `syncbusctl preview` against the simulator (hub and targets), the real broker, a
// publisher and two consumers as separate processes, on a fleet with planted refusals (a
// namespace the change needs is missing on some clusters). The preview writes nothing, and the
// sync of the same change then does on every cluster, object by object, what the preview said.
#include <fstream>
#include <map>
#include <set>

#include <doctest/doctest.h>
#include <signal.h>

#include "common/kube/client_impl.h"
#include "common/kube/config.h"
#include "ctl/fleet_progress.h"
#include "tests/support/files.h"
#include "tests/support/process_rig.h"
#include "tests/support/wait.h"

using namespace syncbus;
using namespace syncbus::testing;
using namespace std::chrono_literals;

namespace {

constexpr int kPreviewClusters = 10;
const std::set<std::string> kRefusing = {"cluster-0002", "cluster-0005", "cluster-0007"};

constexpr char kPreviewConfig[] =
    "log: {level: info}\n"
    "admin: {listen: \"127.0.0.1:0\"}\n"
    "topology: {retryTiers: [1s, 2s]}\n"
    "publisher: {leaderElection: {enabled: false}}\n"
    "consumer: {prefetch: 4, maxAttempts: 2, previewWorkers: 3}\n";

struct PreviewFleet : ProcessRig {
  PreviewFleet() : ProcessRig("syncbus-e2e-preview") {}
  std::vector<ChildProcess> daemons;

  kube::ClientImpl Target(const std::string& cluster) {
    auto cfg = kube::ParseKubeconfig(ReadFile(dir + "/hub.kubeconfig"));
    REQUIRE(cfg.ok());
    cfg->server += "/clusters/" + cluster;
    return kube::ClientImpl(*cfg, transport);
  }
  // The ConfigMap on `cluster`, or null.
  Json ConfigMap(const std::string& cluster, const std::string& ns, const std::string& name) {
    auto cm = Target(cluster).Get(kube::Object(kube::resources::kConfigMaps, ns, name));
    if (!cm.ok() && cm.status().code() == Code::kNotFound) return nullptr;
    REQUIRE_MESSAGE(cm.ok(), cm.status().ToString());
    return *cm;
  }
  std::string Logs() {
    std::string all;
    for (auto& d : daemons) all += d.Log().substr(0, 3000) + "\n----\n";
    return all;
  }
};

}  // namespace

TEST_CASE(
    "a preview on a fleet with planted refusals tells what the sync then does, writing nothing") {
  PreviewFleet f;
  f.StartSimulator({"--clusters", std::to_string(kPreviewClusters), "--syncsets", "1",
                    "--selector-syncsets", "1", "--resources", "2"});
  f.WriteConfig(kPreviewConfig);
  f.daemons.push_back(f.StartDaemon("publisher/syncbus-publisher", {}, "publisher.log"));
  for (const char* name : {"consumer-1", "consumer-2"})
    f.daemons.push_back(
        f.StartDaemon("consumer/syncbus-consumer", {"--name", name}, std::string(name) + ".log"));
  ctl::FleetProgress progress;
  auto read_progress = [&] {
    auto p = ctl::ReadProgress(*f.hub, "");
    REQUIRE_MESSAGE(p.ok(), p.status().ToString());
    return *p;
  };
  REQUIRE_MESSAGE(WaitFor([&] { return (progress = read_progress()).done(); }, 90s, 200ms),
                  f.Logs());

  // Every cluster but the refusing ones has the namespace the change needs.
  for (int i = 0; i < kPreviewClusters; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "cluster-%04d", i);
    if (kRefusing.count(name)) continue;
    auto made = f.Target(name).Create(
        kube::Collection(kube::resources::kNamespaces, ""),
        {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "team-a"}}}});
    REQUIRE_MESSAGE(made.ok(), made.status().ToString());
  }

  // The change: the fleet's SelectorSyncSet with a value changed and a ConfigMap in team-a added.
  auto listed = f.hub->List(kube::Collection(kube::resources::kSelectorSyncSets), {});
  REQUIRE(listed.ok());
  REQUIRE(listed->items.size() == 1);
  Json set = listed->items.front();
  const std::string set_name = set["metadata"]["name"];
  Json& first = set["spec"]["resources"][0];
  const std::string changed_ns = first["metadata"].value("namespace", "default");
  const std::string changed_name = first["metadata"]["name"];
  first["data"]["edited"] = "yes";
  set["spec"]["resources"].push_back({{"apiVersion", "v1"},
                                      {"kind", "ConfigMap"},
                                      {"metadata", {{"name", "added"}, {"namespace", "team-a"}}},
                                      {"data", {{"k", "v"}}}});
  Json file = {{"apiVersion", set["apiVersion"]},
               {"kind", "SelectorSyncSet"},
               {"metadata", {{"name", set_name}}},
               {"spec", set["spec"]}};
  std::ofstream(f.dir + "/changed.yaml") << file.dump(2);  // JSON is YAML
  auto stats_before = f.hub->GetPath("/_sim/stats");
  REQUIRE(stats_before.ok());

  std::vector<std::string> argv = {BinaryDir() + "/ctl/syncbusctl",
                                   "preview",
                                   "-c",
                                   f.dir + "/syncbus.yaml",
                                   "-f",
                                   f.dir + "/changed.yaml",
                                   "-o",
                                   "json",
                                   "--timeout",
                                   "60s"};
  auto run = ChildProcess::Start(argv, f.dir + "/preview.json");
  REQUIRE(run.ok());
  auto code = run->Stop(0, 90s);
  REQUIRE(code.has_value());
  CHECK(*code == 1);  // some clusters refuse
  // The progress line goes to stderr, which the log holds too: the report is the document after.
  const std::string out = run->Log();
  auto report = Json::parse(out.substr(std::min(out.find('{'), out.size())), nullptr, false);
  REQUIRE_MESSAGE(report.is_object(), out << "\n" << f.Logs());
  CHECK(report["clusters"] == kPreviewClusters);
  CHECK(report["answered"] == kPreviewClusters);
  CHECK(report["summary"]["change"] == kPreviewClusters - static_cast<int>(kRefusing.size()));
  CHECK(report["summary"]["refuse"] == kRefusing.size());

  // What each cluster's preview said, by object.
  std::map<std::string, std::map<std::string, Json>> said;  // cluster -> "ns/name" -> object
  for (const Json& reply : report["replies"]) {
    const std::string cluster = reply["cluster"]["name"];
    CHECK_MESSAGE(!reply.contains("error"), reply.dump());
    for (const Json& o : reply["objects"])
      said[cluster][o["namespace"].get<std::string>() + "/" + o["name"].get<std::string>()] = o;
  }
  REQUIRE(said.size() == kPreviewClusters);
  const std::string changed_key = changed_ns + "/" + changed_name;
  for (const auto& [cluster, objects] : said) {
    CAPTURE(cluster);
    REQUIRE(objects.count(changed_key) == 1);
    REQUIRE(objects.count("team-a/added") == 1);
    CHECK(objects.at(changed_key)["outcome"] == "changed");
    CHECK(objects.at(changed_key)["diff"] == Json::array({"data.edited: <none> -> \"yes\""}));
    CHECK(objects.at("team-a/added")["outcome"] ==
          (kRefusing.count(cluster) ? "refused" : "created"));
  }

  // The preview wrote nothing: not on a target, nothing on the hub.
  for (const auto& [cluster, objects] : said) {
    CHECK(f.ConfigMap(cluster, "team-a", "added").is_null());
    CHECK_FALSE(f.ConfigMap(cluster, changed_ns, changed_name)["data"].contains("edited"));
  }
  auto stats_after = f.hub->GetPath("/_sim/stats");
  REQUIRE(stats_after.ok());
  for (const char* verb : {"create", "update", "patch", "delete"}) {
    CAPTURE(verb);
    CHECK((*stats_after)["hubRequests"].value(verb, Json::object()) ==
          (*stats_before)["hubRequests"].value(verb, Json::object()));
  }

  // The change applied for real: each cluster ends as its preview said.
  set["metadata"].erase("managedFields");
  auto updated = f.hub->Update(kube::Object(kube::resources::kSelectorSyncSets, "", set_name), set);
  REQUIRE_MESSAGE(updated.ok(), updated.status().ToString());
  auto at_generation_2 = [&] {
    auto syncs = f.hub->List(kube::Collection(kube::resources::kClusterSyncs, ""), {});
    if (!syncs.ok()) return false;
    size_t done = 0;
    for (const Json& cs : syncs->items) {
      for (const Json& e : cs["status"].value("selectorSyncSets", Json::array()))
        if (e["name"] == set_name && e.value("observedGeneration", 0) == 2) ++done;
    }
    return done == static_cast<size_t>(kPreviewClusters);
  };
  REQUIRE_MESSAGE(WaitFor(at_generation_2, 60s, 200ms), f.Logs());
  for (const auto& [cluster, objects] : said) {
    CAPTURE(cluster);
    CHECK(f.ConfigMap(cluster, changed_ns, changed_name)["data"]["edited"] == "yes");
    CHECK(f.ConfigMap(cluster, "team-a", "added").is_null() == (kRefusing.count(cluster) > 0));
    auto cs = f.hub->Get(kube::Object(kube::resources::kClusterSyncs, cluster, cluster));
    REQUIRE(cs.ok());
    for (const Json& e : (*cs)["status"]["selectorSyncSets"]) {
      if (e["name"] != set_name) continue;
      if (kRefusing.count(cluster)) {
        CHECK(e["result"] == "Failure");
        CHECK(e["failureMessage"] == objects.at("team-a/added")["message"]);
      } else {
        CHECK(e["result"] == "Success");
      }
    }
  }
  for (auto& d : f.daemons) CHECK(d.Stop(SIGTERM, 30s) == std::optional<int>(0));
}
