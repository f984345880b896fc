// End to end: the simulator (hub + target clusters), the real broker, one publisher and two
// consumers as separate processes. Every cluster must end with every set applied at its current
// generation, objects must be on the targets, and an edit must propagate.
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

constexpr int kClusters = 12;

// syncbus.yaml besides the broker and the hub.
constexpr char kConfig[] =
    "log: {level: info}\n"
    "admin: {listen: \"127.0.0.1:0\"}\n"
    "topology: {retryTiers: [1s, 2s]}\n"
    "publisher: {leaderElection: {enabled: false}}\n"
    "consumer: {prefetch: 4, maxAttempts: 5}\n";

struct Pipeline : ProcessRig {
  Pipeline() : ProcessRig("syncbus-e2e") {}

  std::vector<ChildProcess> daemons;

  void AddDaemon(const std::string& binary, const std::string& name) {
    std::vector<std::string> args;
    if (binary.find("consumer") != std::string::npos) args = {"--name", name};
    daemons.push_back(StartDaemon(binary, args, name + ".log"));
  }

  ctl::FleetProgress Progress() {
    auto p = ctl::ReadProgress(*hub, "");
    REQUIRE_MESSAGE(p.ok(), p.status().ToString());
    return *p;
  }

  std::string Logs() {
    std::string all;
    for (auto& d : daemons) all += d.Log().substr(0, 4000) + "\n----\n";
    return all;
  }
};

}  // namespace

TEST_CASE("a fleet is synced through the broker and an edit propagates") {
  Pipeline p;
  p.StartSimulator({"--clusters", std::to_string(kClusters), "--syncsets", "2",
                    "--selector-syncsets", "3", "--resources", "4"});
  p.WriteConfig(kConfig);
  p.AddDaemon("publisher/syncbus-publisher", "publisher");
  p.AddDaemon("consumer/syncbus-consumer", "consumer-1");
  p.AddDaemon("consumer/syncbus-consumer", "consumer-2");

  ctl::FleetProgress progress;
  bool synced = WaitFor([&] { return (progress = p.Progress()).done(); }, 90s, 200ms);
  REQUIRE_MESSAGE(synced, "synced " << progress.synced << "/" << progress.clusters << "\n"
                                    << p.Logs());
  CHECK(progress.clusters == kClusters);
  CHECK(progress.failing == 0);

  // The objects are really on a target cluster, labelled as managed.
  auto target_cfg = kube::ParseKubeconfig(ReadFile(p.dir + "/hub.kubeconfig"));
  REQUIRE(target_cfg.ok());
  target_cfg->server += "/clusters/cluster-0003";
  kube::ClientImpl target(*target_cfg, p.transport);
  auto cms = target.List(kube::Collection(kube::resources::kConfigMaps, "default"), {});
  REQUIRE(cms.ok());
  size_t managed = 0;
  for (const auto& cm : cms->items) {
    if (cm["metadata"]["labels"].value("hive.openshift.io/managed", "") == "true") ++managed;
  }
  CHECK(managed == (2 + 3) * 4);

  // Edit one SelectorSyncSet: its generation moves and every cluster catches up.
  auto sss = p.hub->List(kube::Collection(kube::resources::kSelectorSyncSets), {});
  REQUIRE(sss.ok());
  REQUIRE_FALSE(sss->items.empty());
  Json edited = sss->items.front();
  std::string name = edited["metadata"]["name"];
  edited["spec"]["resources"][0]["data"]["edited"] = "yes";
  auto stats_before = p.hub->GetPath("/_sim/stats");
  REQUIRE(stats_before.ok());
  auto updated = p.hub->Update(kube::Object(kube::resources::kSelectorSyncSets, "", name), edited);
  REQUIRE_MESSAGE(updated.ok(), updated.status().ToString());
  REQUIRE((*updated)["metadata"]["generation"].get<int64_t>() == 2);
  synced = WaitFor([&] { return (progress = p.Progress()).done(); }, 60s, 200ms);
  REQUIRE_MESSAGE(synced, "after edit: synced " << progress.synced << "/" << progress.clusters
                                                << "\n"
                                                << p.Logs());
  std::string cm_name = edited["spec"]["resources"][0]["metadata"]["name"];
  std::string cm_ns = edited["spec"]["resources"][0]["metadata"].value("namespace", "default");
  auto cm = target.Get(kube::Object(kube::resources::kConfigMaps, cm_ns, cm_name));
  REQUIRE(cm.ok());
  CHECK((*cm)["data"].value("edited", "") == "yes");

  // The consumers read every cluster's state from their hub mirrors: the edit's syncs sent the hub
  // no read of the sets or the ClusterDeployments, and a status write per cluster (a second one
  // only after a conflict).
  auto stats_after = p.hub->GetPath("/_sim/stats");
  REQUIRE(stats_after.ok());
  auto delta = [&](const std::string& verb, const std::string& resource) {
    auto count = [&](const Json& stats) {
      return stats["hubRequests"].value(verb, Json::object()).value(resource, int64_t{0});
    };
    return count(*stats_after) - count(*stats_before);
  };
  // (The test's own progress polls list every collection once each.)
  const int64_t polls = delta("list", "clusterdeployments");
  CHECK(delta("list", "syncsets") == polls);
  CHECK(delta("list", "selectorsyncsets") == polls);
  CHECK(delta("get", "clusterdeployments") == 0);
  CHECK(delta("update", "clustersyncs/status") >= kClusters);

  // SIGTERM: every daemon exits cleanly.
  for (auto& d : p.daemons) CHECK(d.Stop(SIGTERM, 30s) == std::optional<int>(0));
}
