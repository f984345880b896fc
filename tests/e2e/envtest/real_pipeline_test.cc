// End to end on real API servers: the envtest fixture's kube-apiservers play the hub (Hive's
// CRDs) and every target cluster (one namespace each), with the real broker, one publisher and
// two consumers. The daemons authenticate as the service accounts that deploy/rbac.yaml binds,
// applied unchanged, so real RBAC must allow everything they do, previews included.
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include <doctest/doctest.h>
#include <signal.h>

#include "common/base64.h"
#include "common/bus/rollout.h"
#include "common/kube/client_impl.h"
#include "common/kube/config.h"
#include "common/yaml_json.h"
#include "consumer/rest_mapper.h"
#include "ctl/fleet_progress.h"
#include "tests/support/child_process.h"
#include "tests/support/envtest_env.h"
#include "tests/support/files.h"
#include "tests/support/hive_objects.h"
#include "tests/support/kube_clients.h"
#include "tests/support/test_broker.h"
#include "tests/support/wait.h"

using namespace syncbus;
using namespace syncbus::testing;
using namespace std::chrono_literals;
using kube::Collection;
using kube::Object;
namespace resources = kube::resources;

namespace {

constexpr int kClusters = 4;
constexpr char kTargetNamespaceLabel[] = "syncbus.io/target-namespace";
// Only this cluster carries the label the SelectorSyncSet selects: every cluster shares the one
// target API server, and a selected object has one namespace for all the clusters it selects.
constexpr int kSelectedCluster = 0;

std::string ClusterName(int i) {
  return "real-" + std::to_string(i);
}

Json ConfigMap(const std::string& name, const std::string& ns, const Json& data) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"data", data}};
}

struct RealPipeline : EnvtestClients {
  std::string dir = MakeTempDir("syncbus-e2e-envtest");
  TestVhost vhost = NewTestVhost();
  std::vector<ChildProcess> daemons;

  // Server-side applies every document of a deploy/ manifest, mapped through discovery.
  void ApplyManifest(const std::string& file) {
    Result<std::vector<Json>> docs = YamlDocumentsToJson(ReadFile(file));
    REQUIRE_MESSAGE(docs.ok(), file << ": " << docs.status().ToString());
    consumer::RestMapper mapper(*hub);
    for (const Json& doc : *docs) {
      Result<kube::Resource> resource =
          mapper.Map(doc["apiVersion"].get<std::string>(), doc["kind"].get<std::string>());
      REQUIRE_MESSAGE(resource.ok(), resource.status().ToString());
      const Json& meta = doc["metadata"];
      kube::ObjectRef ref =
          Object(*resource, resource->namespaced ? meta.value("namespace", "") : "",
                 meta["name"].get<std::string>());
      Result<Json> applied = hub->Apply(ref, doc, {"syncbus-tests", true});
      REQUIRE_MESSAGE(applied.ok(), ref.Describe() << ": " << applied.status().ToString());
    }
  }

  // syncbus's namespaces and rights as deploy/README.md installs them: deploy/'s namespace and
  // RBAC, and the consumers' liveness namespace and Role (deploy/liveness).
  void ApplyInstall() {
    for (const char* file :
         {"namespace.yaml", "rbac.yaml", "liveness/namespace.yaml", "liveness/rbac.yaml"})
      ApplyManifest(SourceDir() + "/deploy/" + file);
  }

  void Create(kube::Client& client, const kube::Resource& resource, const Json& object) {
    CreateObject(client, resource, object);
  }

  // One cluster: its hub namespace, ClusterDeployment, admin kubeconfig Secret (the target's),
  // a secretMappings source Secret, and its own namespace on the target.
  void AddCluster(int i) {
    const std::string name = ClusterName(i);
    Json ns = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}};
    Create(*hub, resources::kNamespaces, ns);
    Create(*target, resources::kNamespaces, ns);
    AddClusterDeployment(name,
                         {{"syncbus-e2e", i == kSelectedCluster ? "selected" : "yes"},
                          {kTargetNamespaceLabel, name}},
                         "5e1f0000-0000-4000-8000-00000000000" + std::to_string(i));
    Create(*hub, resources::kSecrets,
           {{"apiVersion", "v1"},
            {"kind", "Secret"},
            {"metadata", {{"name", "pull-secret-source"}, {"namespace", name}}},
            {"data", {{"token", EncodeBase64("s3cr3t-" + name)}}}});
    Create(*hub, resources::kSyncSets, UpsertSet(name));
    Create(*hub, resources::kSyncSets, SyncModeSet(name, {"s-1", "s-2"}, "v1"));
  }

  // A running ClusterDeployment `name` in its namespace (which exists) with `labels`, and its admin
  // kubeconfig Secret, the target's.
  void AddClusterDeployment(const std::string& name, const Json& labels,
                            const std::string& cluster_id) {
    Create(*hub, resources::kClusterDeployments,
           {{"apiVersion", "hive.openshift.io/v1"},
            {"kind", "ClusterDeployment"},
            {"metadata", {{"name", name}, {"namespace", name}, {"labels", labels}}},
            {"spec",
             {{"baseDomain", "envtest.syncbus.io"},
              {"clusterName", name},
              {"platform", {{"none", Json::object()}}},
              {"installed", true},
              {"clusterMetadata",
               {{"clusterID", cluster_id},
                {"infraID", name},
                {"adminKubeconfigSecretRef", {{"name", name + "-admin-kubeconfig"}}}}}}}});
    MarkClusterRunning(*hub, name, name);  // Hive syncs no other
    Create(*hub, resources::kSecrets,
           {{"apiVersion", "v1"},
            {"kind", "Secret"},
            {"metadata", {{"name", name + "-admin-kubeconfig"}, {"namespace", name}}},
            {"data", {{"kubeconfig", EncodeBase64(ReadFile(env.target_kubeconfig))}}}});
  }

  // Upsert mode: two ConfigMaps, a merge patch onto one of them, a secretMapping.
  static Json UpsertSet(const std::string& cluster) {
    return {{"apiVersion", "hive.openshift.io/v1"},
            {"kind", "SyncSet"},
            {"metadata", {{"name", "upsert"}, {"namespace", cluster}}},
            {"spec",
             {{"clusterDeploymentRefs", {{{"name", cluster}}}},
              {"resourceApplyMode", "Upsert"},
              {"resources",
               {ConfigMap("cm-a", cluster, {{"from", "upsert"}}),
                ConfigMap("cm-b", cluster, {{"from", "upsert"}})}},
              {"patches",
               {{{"apiVersion", "v1"},
                 {"kind", "ConfigMap"},
                 {"name", "cm-a"},
                 {"namespace", cluster},
                 {"patchType", "merge"},
                 {"patch", R"({"data":{"patched":"yes"}})"}}}},
              {"secretMappings",
               {{{"sourceRef", {{"name", "pull-secret-source"}}},
                 {"targetRef", {{"name", "pull-secret"}, {"namespace", cluster}}}}}}}}};
  }

  // Sync mode: what it stops listing is deleted from the target.
  static Json SyncModeSet(const std::string& cluster, const std::vector<std::string>& names,
                          const std::string& value) {
    Json items = Json::array();
    for (const std::string& name : names) items.push_back(ConfigMap(name, cluster, {{"v", value}}));
    return {{"apiVersion", "hive.openshift.io/v1"},
            {"kind", "SyncSet"},
            {"metadata", {{"name", "sync-mode"}, {"namespace", cluster}}},
            {"spec",
             {{"clusterDeploymentRefs", {{{"name", cluster}}}},
              {"resourceApplyMode", "Sync"},
              {"resources", items}}}};
  }

  // A SelectorSyncSet for the selected cluster, with a resource template reading one of its
  // ClusterDeployment's labels. (Templates cannot name the namespace: the real server validates
  // an embedded resource's metadata as it is written.)
  void AddSelectorSyncSet() {
    Json cm = ConfigMap("from-selector", ClusterName(kSelectedCluster),
                        {{"cluster", "{{ fromCDLabel \"syncbus.io/target-namespace\" }}"}});
    Create(*hub, resources::kSelectorSyncSets,
           {{"apiVersion", "hive.openshift.io/v1"},
            {"kind", "SelectorSyncSet"},
            {"metadata", {{"name", "syncbus-e2e-selector"}}},
            {"spec",
             {{"clusterDeploymentSelector", {{"matchLabels", {{"syncbus-e2e", "selected"}}}}},
              {"resourceApplyMode", "Sync"},
              {"enableResourceTemplates", true},
              {"resources", {cm}}}}});
  }

  void WriteConfig(const std::string& file, const std::string& kubeconfig,
                   int max_attempts = 5) const {
    std::ofstream(dir + "/" + file)
        << vhost.ConfigYaml(", heartbeatSeconds: 10") << "hub: {kubeconfig: " << kubeconfig << "}\n"
        << "log: {level: info}\n"
        << "admin: {listen: \"127.0.0.1:0\"}\n"
        << "topology: {retryTiers: [1s, 2s]}\n"
        << "publisher: {leaderElection: {enabled: true, leaseDuration: 6s, renewDeadline: 4s, "
           "retryPeriod: 1s}}\n"
        << "consumer: {prefetch: 4, maxAttempts: " << max_attempts << "}\n";
  }

  void StartDaemon(const std::string& binary, const std::string& config,
                   const std::vector<std::string>& args, const std::string& log) {
    std::vector<std::string> argv = {BinaryDir() + "/" + binary, "--config", dir + "/" + config};
    argv.insert(argv.end(), args.begin(), args.end());
    Result<ChildProcess> p = ChildProcess::Start(argv, dir + "/" + log);
    REQUIRE_MESSAGE(p.ok(), p.status().ToString());
    daemons.push_back(std::move(*p));
  }

  std::string Logs() const {
    std::string all;
    for (const ChildProcess& d : daemons) all += d.Log().substr(0, 6000) + "\n----\n";
    return all;
  }

  // Waits until every e2e cluster runs every set at its current generation, without failures.
  void WaitSynced(const std::string& when) {
    ctl::FleetProgress progress;
    bool synced = WaitFor(
        [&] {
          Result<ctl::FleetProgress> p = ctl::ReadProgress(*hub, "");
          if (!p.ok()) return false;
          progress = *p;
          return progress.done() && progress.clusters >= kClusters;
        },
        120s, 250ms);
    REQUIRE_MESSAGE(synced, when << ": synced " << progress.synced << "/" << progress.clusters
                                 << ", failing " << progress.failing << "\n"
                                 << Logs());
    CHECK(progress.failing == 0);
  }

  Json TargetConfigMap(const std::string& ns, const std::string& name) {
    Result<Json> cm = target->Get(Object(resources::kConfigMaps, ns, name));
    REQUIRE_MESSAGE(cm.ok(), ns << "/" << name << ": " << cm.status().ToString());
    return *cm;
  }
  bool TargetHas(const std::string& ns, const std::string& name) {
    Result<Json> cm = target->Get(Object(resources::kConfigMaps, ns, name));
    REQUIRE((cm.ok() || cm.status().code() == Code::kNotFound));
    return cm.ok();
  }

  // `syncbusctl preview -o json` of `set` (with the consumer's config): its exit code, and what
  // the one cluster asked answered, by object ("ns/name" -> its outcome).
  std::pair<int, std::map<std::string, Json>> Preview(const Json& set) {
    const std::string file = dir + "/preview-" + std::to_string(++previews) + ".yaml";
    std::ofstream(file) << set.dump(2);  // JSON is YAML
    Result<ChildProcess> run =
        ChildProcess::Start({BinaryDir() + "/ctl/syncbusctl", "preview", "-c",
                             dir + "/consumer.yaml", "-f", file, "-o", "json", "--timeout", "60s"},
                            file + ".out");
    REQUIRE_MESSAGE(run.ok(), run.status().ToString());
    std::optional<int> code = run->Stop(0, 90s);
    REQUIRE(code.has_value());
    // Standard error (its progress line) shares the log: the report is the document after it.
    const std::string out = run->Log();
    Json report = Json::parse(out.substr(std::min(out.find('{'), out.size())), nullptr, false);
    REQUIRE_MESSAGE(report.is_object(), out << "\n" << Logs());
    REQUIRE(report["replies"].size() == 1);
    const Json& reply = report["replies"][0];
    CHECK_MESSAGE(!reply.contains("error"), reply.dump());
    std::map<std::string, Json> objects;
    for (const Json& o : reply.value("objects", Json::array()))
      objects[o["namespace"].get<std::string>() + "/" + o["name"].get<std::string>()] = o;
    return {*code, objects};
  }
  int previews = 0;
};

}  // namespace

TEST_CASE("deploy/rbac.yaml grants the daemons what they use and refuses the rest") {
  RealPipeline p;
  p.ApplyInstall();
  std::unique_ptr<kube::ClientImpl> publisher = ClientFromKubeconfig(p.env.publisher_kubeconfig);
  std::unique_ptr<kube::ClientImpl> consumer = ClientFromKubeconfig(p.env.consumer_kubeconfig);
  std::unique_ptr<kube::ClientImpl> nobody = ClientFromKubeconfig(p.env.nobody_kubeconfig);

  CHECK(publisher->List(Collection(resources::kSyncSets), {}).ok());
  CHECK(consumer->List(Collection(resources::kSelectorSyncSets), {}).ok());
  Result<kube::ObjectList> refused = nobody->List(Collection(resources::kSyncSets), {});
  CHECK(refused.status().code() == Code::kUnauthorized);
  CHECK(refused.status().http_status() == 403);

  // A verb the roles leave out is refused: the publisher only reads ClusterSyncs, and neither
  // daemon may change the desired state.
  const std::string ns = "rbac-probe";
  p.Create(*p.hub, resources::kNamespaces,
           {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
  Json cluster_sync = {{"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
                       {"kind", "ClusterSync"},
                       {"metadata", {{"name", "probe"}, {"namespace", ns}}},
                       {"spec", Json::object()}};
  Result<Json> by_publisher =
      publisher->Create(Collection(resources::kClusterSyncs, ns), cluster_sync);
  CHECK(by_publisher.status().http_status() == 403);
  CHECK(consumer->Create(Collection(resources::kClusterSyncs, ns), cluster_sync).ok());
  Status delete_set = consumer->Delete(Object(resources::kSyncSets, ns, "any"), {});
  CHECK(delete_set.http_status() == 403);
  Result<Json> write_secret = consumer->Create(
      Collection(resources::kSecrets, ns),
      {{"apiVersion", "v1"}, {"kind", "Secret"}, {"metadata", {{"name", "x"}, {"namespace", ns}}}});
  CHECK(write_secret.status().http_status() == 403);
}

TEST_CASE(
    "a fleet on real API servers is synced, edits are previewed and propagate, Sync mode deletes") {
  RealPipeline p;
  p.ApplyInstall();
  for (int i = 0; i < kClusters; ++i) p.AddCluster(i);
  p.AddSelectorSyncSet();

  p.WriteConfig("publisher.yaml", p.env.publisher_kubeconfig);
  p.WriteConfig("consumer.yaml", p.env.consumer_kubeconfig);
  p.StartDaemon("publisher/syncbus-publisher", "publisher.yaml", {}, "publisher.log");
  p.StartDaemon("consumer/syncbus-consumer", "consumer.yaml", {"--name", "consumer-1"},
                "consumer-1.log");
  p.StartDaemon("consumer/syncbus-consumer", "consumer.yaml", {"--name", "consumer-2"},
                "consumer-2.log");
  p.WaitSynced("first sync");

  for (int i = 0; i < kClusters; ++i) {
    const std::string ns = ClusterName(i);
    INFO("cluster " << ns);
    Json cm_a = p.TargetConfigMap(ns, "cm-a");
    CHECK(cm_a["data"] == Json{{"from", "upsert"}, {"patched", "yes"}});
    CHECK(cm_a["metadata"]["labels"].value("hive.openshift.io/managed", "") == "true");
    CHECK(p.TargetHas(ns, "cm-b"));
    CHECK(p.TargetConfigMap(ns, "s-1")["data"]["v"] == "v1");
    CHECK(p.TargetHas(ns, "s-2"));
    if (i == kSelectedCluster) {
      CHECK(p.TargetConfigMap(ns, "from-selector")["data"]["cluster"] == ns);
    } else {
      CHECK_FALSE(p.TargetHas(ns, "from-selector"));
    }
    Result<Json> secret = p.target->Get(Object(resources::kSecrets, ns, "pull-secret"));
    REQUIRE_MESSAGE(secret.ok(), secret.status().ToString());
    CHECK((*secret)["data"]["token"] == EncodeBase64("s3cr3t-" + ns));

    // The ClusterSync status as the real server stored it.
    Result<Json> cluster_sync = p.hub->Get(Object(resources::kClusterSyncs, ns, ns));
    REQUIRE_MESSAGE(cluster_sync.ok(), cluster_sync.status().ToString());
    const Json& status = (*cluster_sync)["status"];
    REQUIRE(status["syncSets"].size() == 2);
    for (const Json& set : status["syncSets"]) CHECK(set["result"] == "Success");
    if (i == kSelectedCluster) {
      REQUIRE(status["selectorSyncSets"].size() == 1);
      CHECK(status["selectorSyncSets"][0]["name"] == "syncbus-e2e-selector");
      CHECK(status["selectorSyncSets"][0]["result"] == "Success");
    } else {
      CHECK(status.value("selectorSyncSets", Json::array()).empty());
    }
  }

  // An edit, previewed first: a ConfigMap changes and, in Sync mode, the one it no longer lists
  // is deleted. The same edit with an object in a namespace the cluster lacks is refused there,
  // with the real server's message, and stops the set's applies; the deletion still runs.
  const std::string edited = ClusterName(1);
  Json next = RealPipeline::SyncModeSet(edited, {"s-1"}, "v2");
  Json refused = next;
  refused["spec"]["resources"].push_back(ConfigMap("lost", "no-such-namespace", {{"v", "v2"}}));
  refused["spec"]["resources"].push_back(ConfigMap("after", edited, {{"v", "v2"}}));
  auto [refused_code, refusing] = p.Preview(refused);
  CHECK(refused_code == 1);
  REQUIRE(refusing.size() == 4);
  CHECK(refusing[edited + "/s-1"]["outcome"] == "changed");
  CHECK(refusing["no-such-namespace/lost"]["outcome"] == "refused");
  CHECK(refusing["no-such-namespace/lost"]["message"] ==
        "failed to apply resource 1: error when creating \"object\": namespaces "
        "\"no-such-namespace\" not found");
  CHECK(refusing[edited + "/after"]["outcome"] == "not-reached");
  CHECK(refusing[edited + "/s-2"]["outcome"] == "deleted");
  auto [code, said] = p.Preview(next);
  CHECK(code == 0);
  REQUIRE(said.size() == 2);
  CHECK(said[edited + "/s-1"]["outcome"] == "changed");
  CHECK(said[edited + "/s-1"]["diff"] == Json::array({"data.v: \"v1\" -> \"v2\""}));
  CHECK(said[edited + "/s-2"]["outcome"] == "deleted");
  // The previews wrote nothing.
  CHECK(p.TargetConfigMap(edited, "s-1")["data"]["v"] == "v1");
  CHECK(p.TargetHas(edited, "s-2"));
  CHECK_FALSE(p.TargetHas(edited, "after"));

  // The edit propagates as previewed: what a Sync-mode set no longer lists is deleted.
  Result<Json> current = p.hub->Get(Object(resources::kSyncSets, edited, "sync-mode"));
  REQUIRE(current.ok());
  next["metadata"] = (*current)["metadata"];
  REQUIRE(p.hub->Update(Object(resources::kSyncSets, edited, "sync-mode"), next).ok());
  CHECK(WaitFor([&] { return !p.TargetHas(edited, "s-2"); }, 60s, 250ms));
  p.WaitSynced("after the edit");
  CHECK(p.TargetConfigMap(edited, "s-1")["data"]["v"] == "v2");
  CHECK(p.TargetHas(ClusterName(2), "s-2"));  // other clusters keep theirs

  // A deleted Sync-mode set's objects are removed from its cluster.
  const std::string dropped = ClusterName(2);
  REQUIRE(p.hub->Delete(Object(resources::kSyncSets, dropped, "sync-mode"), {}).ok());
  CHECK(WaitFor([&] { return !p.TargetHas(dropped, "s-1") && !p.TargetHas(dropped, "s-2"); }, 60s,
                250ms));
  CHECK(p.TargetHas(dropped, "cm-a"));  // the Upsert set is untouched

  // Nothing the daemons did was refused by RBAC.
  for (const ChildProcess& d : p.daemons) {
    std::string log = d.Log();
    CHECK_MESSAGE(log.find("forbidden") == std::string::npos, log.substr(0, 4000));
    CHECK_MESSAGE(log.find("Forbidden") == std::string::npos, log.substr(0, 4000));
  }
  for (ChildProcess& d : p.daemons) CHECK(d.Stop(SIGTERM, 30s) == std::optional<int>(0));
}

namespace {

// The rollout's fleet: its own clusters (the hub is shared with the test above), labelled by wave,
// all applying one SelectorSyncSet whose objects share one namespace of the one target server.
// A cluster's failure is planted through a template: the edit's Service takes its type from the
// cluster's label "svc-type", which is invalid ("Bogus") on two of wave 2's three clusters.
constexpr int kRolloutClusters = 6;
const std::set<int> kCanaryWave = {0}, kEarlyWave = {1, 2, 3}, kFailingEarly = {1, 2};
constexpr char kRolloutSet[] = "syncbus-e2e-rollout";

std::string RolloutCluster(int i) {
  return "rollout-" + std::to_string(i);
}

void AddRolloutCluster(RealPipeline& p, int i) {
  const std::string name = RolloutCluster(i);
  Json ns = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}};
  p.Create(*p.hub, resources::kNamespaces, ns);
  Json labels = {{"syncbus-e2e-rollout", "yes"},
                 {"svc-type", kFailingEarly.count(i) ? "Bogus" : "ClusterIP"}};
  if (kCanaryWave.count(i)) labels["ring"] = "canary";
  if (kEarlyWave.count(i)) labels["ring"] = "early";
  p.AddClusterDeployment(name, labels,
                         "5e1f0000-0000-4000-8000-0000000001" + std::to_string(10 + i));
}

// The entries of `list` ("syncSets", "selectorSyncSets") in a ClusterSync's status; none while
// it has no status yet (the consumer creates it, then writes its status).
Json StatusEntries(const Json& cluster_sync, const char* list) {
  const Json status = cluster_sync.value("status", Json::object());
  return status.is_object() ? status.value(list, Json::array()) : Json::array();
}

// The cluster's entry for the rollout's set: {observedGeneration, result}; {0, ""} when none.
std::pair<int64_t, std::string> RolloutEntry(RealPipeline& p, const std::string& cluster) {
  Result<Json> cs = p.hub->Get(Object(resources::kClusterSyncs, cluster, cluster));
  if (!cs.ok()) return {0, ""};
  for (const Json& e : StatusEntries(*cs, "selectorSyncSets")) {
    if (e["name"] == kRolloutSet) return {e.value("observedGeneration", 0), e.value("result", "")};
  }
  return {0, ""};
}

std::optional<rollout::RolloutState> RolloutStateOf(RealPipeline& p);

// Waits up to `timeout` for the rollout to reach `phase`; returns its state (REQUIREs it).
rollout::RolloutState AwaitPhase(RealPipeline& p, rollout::Phase phase,
                                 std::chrono::seconds timeout) {
  std::optional<rollout::RolloutState> state;
  REQUIRE_MESSAGE(WaitFor(
                      [&] {
                        state = RolloutStateOf(p);
                        return state && state->phase == phase;
                      },
                      timeout, 250ms),
                  p.Logs());
  return *state;
}

std::optional<rollout::RolloutState> RolloutStateOf(RealPipeline& p) {
  Result<Json> set = p.hub->Get(Object(resources::kSelectorSyncSets, "", kRolloutSet));
  REQUIRE_MESSAGE(set.ok(), set.status().ToString());
  Json annotations = (*set)["metadata"].value("annotations", Json::object());
  if (!annotations.contains(rollout::kStateAnnotation)) return std::nullopt;
  auto state = rollout::ParseState(annotations[rollout::kStateAnnotation].get<std::string>());
  REQUIRE_MESSAGE(state.ok(), state.status().ToString());
  return *state;
}

}  // namespace

TEST_CASE(
    "on real API servers a rollout in three waves halts on wave 2, leaves wave 3 alone, resumes") {
  RealPipeline p;
  p.ApplyInstall();
  for (int i = 0; i < kRolloutClusters; ++i) AddRolloutCluster(p, i);
  p.Create(*p.target, resources::kNamespaces,
           {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "rollout-e2e"}}}});
  Json set = {{"apiVersion", "hive.openshift.io/v1"},
              {"kind", "SelectorSyncSet"},
              {"metadata", {{"name", kRolloutSet}}},
              {"spec",
               {{"clusterDeploymentSelector", {{"matchLabels", {{"syncbus-e2e-rollout", "yes"}}}}},
                {"resourceApplyMode", "Upsert"},
                {"enableResourceTemplates", true},
                {"resources", {ConfigMap("rollout-cm", "rollout-e2e", {{"v", "1"}})}}}}};
  p.Create(*p.hub, resources::kSelectorSyncSets, set);
  // Failing clusters retry for a minute, so that the fix reaches them without a replay.
  p.WriteConfig("publisher.yaml", p.env.publisher_kubeconfig, 30);
  p.WriteConfig("consumer.yaml", p.env.consumer_kubeconfig, 30);
  p.StartDaemon("publisher/syncbus-publisher", "publisher.yaml", {}, "publisher.log");
  for (const char* name : {"consumer-1", "consumer-2"})
    p.StartDaemon("consumer/syncbus-consumer", "consumer.yaml", {"--name", name},
                  std::string(name) + ".log");
  auto all_at = [&](int64_t generation) {
    for (int i = 0; i < kRolloutClusters; ++i) {
      if (RolloutEntry(p, RolloutCluster(i)) !=
          std::pair<int64_t, std::string>{generation, "Success"})
        return false;
    }
    return true;
  };
  REQUIRE_MESSAGE(WaitFor([&] { return all_at(1); }, 120s, 250ms), p.Logs());

  // The edit, with the rollout annotation: a Service whose type comes from the cluster's label.
  Result<Json> current = p.hub->Get(Object(resources::kSelectorSyncSets, "", kRolloutSet));
  REQUIRE(current.ok());
  Json edited = *current;
  edited["metadata"].erase("managedFields");
  edited["metadata"]["annotations"][rollout::kSpecAnnotation] =
      R"({"waves": [{"selector": {"matchLabels": {"ring": "canary"}}},
                    {"selector": {"matchLabels": {"ring": "early"}}}],
          "maxFailures": 1, "healthyFor": "2s", "progressDeadline": "5m"})";
  edited["spec"]["resources"].push_back(
      {{"apiVersion", "v1"},
       {"kind", "Service"},
       {"metadata", {{"name", "rollout-svc"}, {"namespace", "rollout-e2e"}}},
       {"spec", {{"type", "{{ fromCDLabel \"svc-type\" }}"}, {"ports", {{{"port", 80}}}}}}});
  Result<Json> updated =
      p.hub->Update(Object(resources::kSelectorSyncSets, "", kRolloutSet), edited);
  REQUIRE_MESSAGE(updated.ok(), updated.status().ToString());
  REQUIRE((*updated)["metadata"]["generation"] == 2);

  std::optional<rollout::RolloutState> state = AwaitPhase(p, rollout::Phase::kHalted, 120s);
  CHECK(state->generation == 2);
  CHECK(state->wave == 2);
  CHECK(state->waves == 3);
  CHECK(state->message == "wave 2 of 3: 2 of 3 clusters failed; the wave tolerates 1");
  REQUIRE(state->failing.size() == 2);
  CHECK(state->failing[0].cluster == "rollout-1/rollout-1");
  CHECK(state->failing[1].cluster == "rollout-2/rollout-2");
  // The real server's refusal of the Service's type.
  CHECK_MESSAGE(state->failing[0].message.find("Bogus") != std::string::npos,
                state->failing[0].message);
  for (int i = 0; i < kRolloutClusters; ++i) {
    CAPTURE(i);
    auto [generation, result] = RolloutEntry(p, RolloutCluster(i));
    if (kCanaryWave.count(i) || kEarlyWave.count(i)) {
      CHECK(generation == 2);
      CHECK(result == (kFailingEarly.count(i) ? "Failure" : "Success"));
    } else {  // wave 3: as Hive's readers expect of a cluster not yet given generation 2
      CHECK(generation == 1);
      CHECK(result == "Success");
    }
  }
  // The Event follows the state it records (written after it, tried again if the hub did not take
  // it): a reader that saw the state may look before it is there.
  auto halt_event = [&] {
    Result<kube::ObjectList> events = p.hub->List(Collection(resources::kEvents, "default"), {});
    REQUIRE(events.ok());
    for (const Json& e : events->items) {
      if (e["involvedObject"].value("name", "") == kRolloutSet &&
          e.value("reason", "") == "RolloutHalted" && e.value("type", "") == "Warning")
        return true;
    }
    return false;
  };
  CHECK_MESSAGE(WaitFor(halt_event, 30s, 250ms), p.Logs());

  // The publisher killed while halted: its successor takes the lease and keeps the halt.
  REQUIRE(p.daemons[0].Stop(SIGKILL, 10s).has_value());
  p.StartDaemon("publisher/syncbus-publisher", "publisher.yaml", {}, "publisher-2.log");
  ChildProcess& successor = p.daemons.back();
  REQUIRE_MESSAGE(
      WaitFor([&] { return successor.Log().find("connected to the broker") != std::string::npos; },
              60s, 100ms),
      p.Logs());
  std::this_thread::sleep_for(3s);  // a few of the new leader's rollout looks (one a second)
  state = RolloutStateOf(p);
  REQUIRE(state);
  CHECK(state->phase == rollout::Phase::kHalted);
  CHECK(state->wave == 2);
  CHECK(RolloutEntry(p, RolloutCluster(5)).first == 1);

  // The fix (the clusters' label), their retries succeed, and the rollout is resumed.
  for (int i : kFailingEarly) {
    Json patch = {{"metadata", {{"labels", {{"svc-type", "ClusterIP"}}}}}};
    Result<Json> relabelled =
        p.hub->Patch(Object(resources::kClusterDeployments, RolloutCluster(i), RolloutCluster(i)),
                     kube::PatchType::kMerge, patch.dump());
    REQUIRE_MESSAGE(relabelled.ok(), relabelled.status().ToString());
  }
  REQUIRE_MESSAGE(WaitFor(
                      [&] {
                        for (int i : kFailingEarly)
                          if (RolloutEntry(p, RolloutCluster(i)).second != "Success") return false;
                        return true;
                      },
                      90s, 250ms),
                  p.Logs());
  rollout::RolloutState resumed = *RolloutStateOf(p);
  resumed.phase = rollout::Phase::kProgressing;
  resumed.message.clear();
  resumed.failing.clear();
  Json resume = {{"metadata",
                  {{"annotations", {{rollout::kStateAnnotation, rollout::EncodeState(resumed)}}}}}};
  Result<Json> written = p.hub->Patch(Object(resources::kSelectorSyncSets, "", kRolloutSet),
                                      kube::PatchType::kMerge, resume.dump());
  REQUIRE_MESSAGE(written.ok(), written.status().ToString());
  AwaitPhase(p, rollout::Phase::kComplete, 90s);
  REQUIRE_MESSAGE(WaitFor([&] { return all_at(2); }, 90s, 250ms), p.Logs());
  const kube::Resource services{"", "v1", "services", "Service", true};
  CHECK(p.target->Get(Object(services, "rollout-e2e", "rollout-svc")).ok());
  for (const ChildProcess& d : p.daemons) {
    std::string log = d.Log();
    CHECK_MESSAGE(log.find("forbidden") == std::string::npos, log.substr(0, 4000));
  }
  for (size_t i = 1; i < p.daemons.size(); ++i)
    CHECK(p.daemons[i].Stop(SIGTERM, 30s) == std::optional<int>(0));
}
