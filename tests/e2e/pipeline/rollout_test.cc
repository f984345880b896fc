// End to end: a SelectorSyncSet edit rolled out in three waves (by label selector) through the
// simulator, the real broker, a publisher and two consumers as separate processes. Wave 2 has
// planted failures (the namespace the edit needs is missing on two of its three clusters, one
// more than the wave tolerates): the rollout halts in wave 2, with the failing clusters and
// their messages on the set and an Event, and wave 3 stays untouched, its ClusterSync entries at
// the old generation as Hive's readers expect. The publisher, killed while halted, comes back at
// the same wave. After the fix and a resume, the rollout completes on every cluster.
#include "common/bus/rollout.h"

#include <map>
#include <set>
#include <thread>

#include <doctest/doctest.h>
#include <signal.h>

#include "common/kube/client_impl.h"
#include "common/kube/config.h"
#include "tests/support/files.h"
#include "tests/support/process_rig.h"
#include "tests/support/wait.h"

using namespace syncbus;
using namespace syncbus::testing;
using namespace std::chrono_literals;
namespace res = kube::resources;

namespace {

constexpr int kRolloutClusters = 9;
const std::set<std::string> kCanaries = {"cluster-0000", "cluster-0001"};
const std::set<std::string> kEarly = {"cluster-0002", "cluster-0003", "cluster-0004"};
const std::set<std::string> kFailingEarly = {"cluster-0002", "cluster-0003"};

// Consumers retry a failing cluster for a while (20 attempts, 2 s apart at most), so that once
// the namespace exists the wave recovers by itself before the resume.
constexpr char kRolloutConfig[] =
    "log: {level: info}\n"
    "admin: {listen: \"127.0.0.1:0\"}\n"
    "topology: {retryTiers: [1s, 2s]}\n"
    "publisher: {leaderElection: {enabled: false}}\n"
    "consumer: {prefetch: 4, maxAttempts: 20}\n";

constexpr char kWaves[] =
    R"({"waves": [{"selector": {"matchLabels": {"ring": "canary"}}},
                  {"selector": {"matchLabels": {"ring": "early"}}}],
        "maxFailures": 1, "healthyFor": "2s", "progressDeadline": "5m"})";

// The entries of `list` ("syncSets", "selectorSyncSets") in a ClusterSync's status; none while
// it has no status yet (the consumer creates it, then writes its status).
Json StatusEntries(const Json& cluster_sync, const char* list) {
  const Json status = cluster_sync.value("status", Json::object());
  return status.is_object() ? status.value(list, Json::array()) : Json::array();
}

std::string ClusterName(int i) {
  char name[32];
  std::snprintf(name, sizeof name, "cluster-%04d", i);
  return name;
}

struct RolloutFleet : ProcessRig {
  RolloutFleet() : ProcessRig("syncbus-e2e-rollout") {}
  std::optional<ChildProcess> publisher;
  std::vector<ChildProcess> consumers;
  std::string set_name;

  kube::ClientImpl Target(const std::string& cluster) {
    auto cfg = kube::ParseKubeconfig(ReadFile(dir + "/hub.kubeconfig"));
    REQUIRE(cfg.ok());
    cfg->server += "/clusters/" + cluster;
    return kube::ClientImpl(*cfg, transport);
  }
  void CreateNamespace(const std::string& cluster, const std::string& ns) {
    auto made = Target(cluster).Create(
        kube::Collection(res::kNamespaces, ""),
        {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
    REQUIRE_MESSAGE((made.ok() || made.status().code() == Code::kAlreadyExists),
                    made.status().ToString());
  }
  bool HasConfigMap(const std::string& cluster, const std::string& ns, const std::string& name) {
    auto cm = Target(cluster).Get(kube::Object(res::kConfigMaps, ns, name));
    if (!cm.ok() && cm.status().code() == Code::kNotFound) return false;
    REQUIRE_MESSAGE(cm.ok(), cm.status().ToString());
    return true;
  }
  // The cluster's entry for the set: {observedGeneration, result}; {0, ""} when none.
  std::pair<int64_t, std::string> Entry(const std::string& cluster) {
    auto cs = hub->Get(kube::Object(res::kClusterSyncs, cluster, cluster));
    if (!cs.ok()) return {0, ""};
    for (const Json& e : StatusEntries(*cs, "selectorSyncSets")) {
      if (e["name"] == set_name) return {e.value("observedGeneration", 0), e.value("result", "")};
    }
    return {0, ""};
  }
  Json Set() {
    auto set = hub->Get(kube::Object(res::kSelectorSyncSets, "", set_name));
    REQUIRE_MESSAGE(set.ok(), set.status().ToString());
    return *set;
  }
  // The rollout state on the set, or nullopt.
  std::optional<rollout::RolloutState> State() {
    Json annotations = Set()["metadata"].value("annotations", Json::object());
    if (!annotations.contains(rollout::kStateAnnotation)) return std::nullopt;
    auto s = rollout::ParseState(annotations[rollout::kStateAnnotation].get<std::string>());
    REQUIRE_MESSAGE(s.ok(), s.status().ToString());
    return *s;
  }
  // Waits up to `timeout` for the rollout to reach `phase`; returns its state (REQUIREs it).
  rollout::RolloutState AwaitPhase(rollout::Phase phase, std::chrono::seconds timeout) {
    std::optional<rollout::RolloutState> state;
    REQUIRE_MESSAGE(WaitFor(
                        [&] {
                          state = State();
                          return state && state->phase == phase;
                        },
                        timeout, 200ms),
                    Logs());
    return *state;
  }
  void StartPublisher() {
    publisher.emplace(StartDaemon("publisher/syncbus-publisher", {}, "publisher.log"));
  }
  std::string Logs() {
    std::string all = publisher ? publisher->Log().substr(0, 4000) + "\n----\n" : "";
    for (auto& d : consumers) all += d.Log().substr(0, 2000) + "\n----\n";
    return all;
  }
};

}  // namespace

TEST_CASE("a rollout in three waves halts on wave 2's failures, leaves wave 3 alone and resumes") {
  RolloutFleet f;
  f.StartSimulator({"--clusters", std::to_string(kRolloutClusters), "--syncsets", "1",
                    "--selector-syncsets", "1", "--resources", "2"});
  f.WriteConfig(kRolloutConfig);
  f.StartPublisher();
  for (const char* name : {"consumer-1", "consumer-2"})
    f.consumers.push_back(
        f.StartDaemon("consumer/syncbus-consumer", {"--name", name}, std::string(name) + ".log"));
  auto listed = f.hub->List(kube::Collection(res::kSelectorSyncSets), {});
  REQUIRE(listed.ok());
  REQUIRE(listed->items.size() == 1);
  f.set_name = listed->items.front()["metadata"]["name"];
  auto all_at = [&](int64_t generation) {
    for (int i = 0; i < kRolloutClusters; ++i) {
      if (f.Entry(ClusterName(i)) != std::pair<int64_t, std::string>{generation, "Success"})
        return false;
    }
    return true;
  };
  REQUIRE_MESSAGE(WaitFor([&] { return all_at(1); }, 90s, 200ms), f.Logs());

  // The waves' labels, and every cluster but wave 2's failing ones has the edit's namespace.
  for (int i = 0; i < kRolloutClusters; ++i) {
    const std::string cluster = ClusterName(i);
    std::string ring = kCanaries.count(cluster) ? "canary" : kEarly.count(cluster) ? "early" : "";
    if (!ring.empty()) {
      Json patch = {{"metadata", {{"labels", {{"ring", ring}}}}}};
      auto labelled = f.hub->Patch(kube::Object(res::kClusterDeployments, cluster, cluster),
                                   kube::PatchType::kMerge, patch.dump());
      REQUIRE_MESSAGE(labelled.ok(), labelled.status().ToString());
    }
    if (!kFailingEarly.count(cluster)) f.CreateNamespace(cluster, "team-a");
  }

  // The edit, with the rollout annotation: a value changed and a ConfigMap in team-a added.
  Json set = f.Set();
  set["metadata"].erase("managedFields");
  set["metadata"]["annotations"][rollout::kSpecAnnotation] = kWaves;
  Json& first = set["spec"]["resources"][0];
  const std::string edited_ns = first["metadata"].value("namespace", "default");
  const std::string edited_name = first["metadata"]["name"];
  first["data"]["edited"] = "yes";
  set["spec"]["resources"].push_back({{"apiVersion", "v1"},
                                      {"kind", "ConfigMap"},
                                      {"metadata", {{"name", "added"}, {"namespace", "team-a"}}},
                                      {"data", {{"k", "v"}}}});
  auto updated = f.hub->Update(kube::Object(res::kSelectorSyncSets, "", f.set_name), set);
  REQUIRE_MESSAGE(updated.ok(), updated.status().ToString());
  REQUIRE((*updated)["metadata"]["generation"] == 2);

  // Halted in wave 2, naming both failing clusters and why.
  std::optional<rollout::RolloutState> state = f.AwaitPhase(rollout::Phase::kHalted, 90s);
  CHECK(state->generation == 2);
  CHECK(state->wave == 2);
  CHECK(state->waves == 3);
  CHECK(state->message == "wave 2 of 3: 2 of 3 clusters failed; the wave tolerates 1");
  REQUIRE(state->failing.size() == 2);
  for (const auto& failing : state->failing) {
    CHECK(kFailingEarly.count(failing.cluster.substr(failing.cluster.find('/') + 1)) == 1);
    CHECK_MESSAGE(failing.message.find("team-a") != std::string::npos, failing.message);
  }
  // Waves 1 and 2 have generation 2 (wave 2's failing clusters as failures), wave 3 has nothing of
  // it: its entries stay at generation 1, its objects as they were.
  for (int i = 0; i < kRolloutClusters; ++i) {
    const std::string cluster = ClusterName(i);
    CAPTURE(cluster);
    auto [generation, result] = f.Entry(cluster);
    if (kCanaries.count(cluster) || kEarly.count(cluster)) {
      CHECK(generation == 2);
      CHECK(result == (kFailingEarly.count(cluster) ? "Failure" : "Success"));
    } else {
      CHECK(generation == 1);
      CHECK(result == "Success");
      CHECK_FALSE(f.HasConfigMap(cluster, "team-a", "added"));
      auto cm = f.Target(cluster).Get(kube::Object(res::kConfigMaps, edited_ns, edited_name));
      REQUIRE(cm.ok());
      CHECK_FALSE((*cm)["data"].contains("edited"));
    }
  }
  // A wave-3 cluster synced for another reason (its own SyncSet edited) still keeps the held set
  // as it is: the consumer holds it back too.
  const std::string bystander = ClusterName(8);
  auto own = f.hub->List(kube::Collection(res::kSyncSets, bystander), {});
  REQUIRE(own.ok());
  REQUIRE(own->items.size() == 1);
  Json own_set = own->items.front();
  own_set["metadata"].erase("managedFields");
  own_set["spec"]["resources"][0]["data"]["touched"] = "yes";
  auto touched = f.hub->Update(
      kube::Object(res::kSyncSets, bystander, own_set["metadata"]["name"].get<std::string>()),
      own_set);
  REQUIRE_MESSAGE(touched.ok(), touched.status().ToString());
  const int64_t own_generation = (*touched)["metadata"]["generation"];
  REQUIRE_MESSAGE(WaitFor(
                      [&] {
                        auto cs =
                            f.hub->Get(kube::Object(res::kClusterSyncs, bystander, bystander));
                        if (!cs.ok()) return false;
                        for (const Json& e : StatusEntries(*cs, "syncSets"))
                          if (e.value("observedGeneration", 0) == own_generation) return true;
                        return false;
                      },
                      60s, 200ms),
                  f.Logs());
  CHECK(f.Entry(bystander) == std::pair<int64_t, std::string>{1, "Success"});
  CHECK_FALSE(f.HasConfigMap(bystander, "team-a", "added"));

  // The halt is an Event on the set (a SelectorSyncSet's go to "default").
  auto events = f.hub->List(kube::Collection(res::kEvents, "default"), {});
  REQUIRE(events.ok());
  std::set<std::string> reasons;
  for (const Json& e : events->items) {
    if (e["involvedObject"].value("name", "") == f.set_name) reasons.insert(e.value("reason", ""));
  }
  CHECK(reasons.count("RolloutStarted") == 1);
  CHECK(reasons.count("RolloutWaveReleased") == 1);
  CHECK(reasons.count("RolloutHalted") == 1);

  // syncbusctl sees the halt as the publisher wrote it, wave by wave, and wait stops on it.
  auto ctl = [&](std::vector<std::string> args, const std::string& log) {
    std::vector<std::string> argv = {testing::BinaryDir() + "/ctl/syncbusctl"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"-c", f.dir + "/syncbus.yaml"});
    auto p = ChildProcess::Start(argv, f.dir + "/" + log);
    REQUIRE(p.ok());
    auto code = p->Stop(0, 60s);
    REQUIRE(code.has_value());
    return std::pair{*code, p->Log()};
  };
  auto [status_code, status_log] =
      ctl({"rollout", "status", "sss/" + f.set_name, "-o", "json"}, "ctl-status.log");
  REQUIRE_MESSAGE(status_code == 0, status_log);
  Json view = Json::parse(status_log);
  MESSAGE(view.dump());
  CHECK(view["phase"] == "Halted");
  CHECK(view["waves"][0]["synced"] == 2);
  CHECK(view["waves"][1]["failing"] == 2);
  CHECK(view["waves"][1]["synced"] == 1);
  CHECK(view["waves"][2]["released"] == false);
  CHECK(view["waves"][2]["clusters"] == 4);
  CHECK(view["waves"][2]["pending"] == 4);
  auto [wait_code, wait_log] = ctl({"wait", "--timeout", "5m", "-q"}, "ctl-wait.log");
  MESSAGE(wait_log);
  CHECK(wait_code == 3);

  // The publisher killed while halted comes back at the same wave, still halted.
  REQUIRE(f.publisher->Stop(SIGKILL, 10s).has_value());
  f.StartPublisher();
  REQUIRE_MESSAGE(
      WaitFor(
          [&] { return f.publisher->Log().find("connected to the broker") != std::string::npos; },
          60s, 100ms),
      f.Logs());
  std::this_thread::sleep_for(3s);  // a few of the new leader's rollout looks (one a second)
  auto after_restart = f.State();
  REQUIRE(after_restart);
  CHECK(after_restart->phase == rollout::Phase::kHalted);
  CHECK(after_restart->wave == 2);
  CHECK(f.Entry(ClusterName(8)).first == 1);

  // The fix: the namespace on the failing clusters; their retries then succeed. Then resume.
  for (const auto& cluster : kFailingEarly) f.CreateNamespace(cluster, "team-a");
  REQUIRE_MESSAGE(WaitFor(
                      [&] {
                        for (const auto& c : kFailingEarly)
                          if (f.Entry(c).second != "Success") return false;
                        return true;
                      },
                      90s, 200ms),
                  f.Logs());
  auto [resume_code, resume_log] =
      ctl({"rollout", "resume", "sss/" + f.set_name}, "ctl-resume.log");
  REQUIRE_MESSAGE(resume_code == 0, resume_log);
  f.AwaitPhase(rollout::Phase::kComplete, 60s);
  REQUIRE_MESSAGE(WaitFor([&] { return all_at(2); }, 60s, 200ms), f.Logs());
  for (int i = 0; i < kRolloutClusters; ++i)
    CHECK(f.HasConfigMap(ClusterName(i), "team-a", "added"));
}
