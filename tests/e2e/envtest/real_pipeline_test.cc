// End to end on real API servers: the envtest fixture's kube-apiservers play the hub (Hive's
// CRDs) and every target cluster (one namespace each), with the real broker, one publisher and
// two consumers. The daemons authenticate as the service accounts that deploy/rbac.yaml binds,
// applied unchanged, so real RBAC must allow everything they do, previews included.
#include <fstream>
#include <map>
#include <optional>
#include <utility>

#include <doctest/doctest.h>
#include <signal.h>

#include "common/base64.h"
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
    Create(*hub, resources::kClusterDeployments,
           {{"apiVersion", "hive.openshift.io/v1"},
            {"kind", "ClusterDeployment"},
            {"metadata",
             {{"name", name},
              {"namespace", name},
              {"labels",
               {{"syncbus-e2e", i == kSelectedCluster ? "selected" : "yes"},
                {kTargetNamespaceLabel, name}}}}},
            {"spec",
             {{"baseDomain", "envtest.syncbus.io"},
              {"clusterName", name},
              {"platform", {{"none", Json::object()}}},
              {"installed", true},
              {"clusterMetadata",
               {{"clusterID", "5e1f0000-0000-4000-8000-00000000000" + std::to_string(i)},
                {"infraID", name},
                {"adminKubeconfigSecretRef", {{"name", name + "-admin-kubeconfig"}}}}}}}});
    MarkClusterRunning(*hub, name, name);  // Hive syncs no other
    Create(*hub, resources::kSecrets,
           {{"apiVersion", "v1"},
            {"kind", "Secret"},
            {"metadata", {{"name", name + "-admin-kubeconfig"}, {"namespace", name}}},
            {"data", {{"kubeconfig", EncodeBase64(ReadFile(env.target_kubeconfig))}}}});
    Create(*hub, resources::kSecrets,
           {{"apiVersion", "v1"},
            {"kind", "Secret"},
            {"metadata", {{"name", "pull-secret-source"}, {"namespace", name}}},
            {"data", {{"token", EncodeBase64("s3cr3t-" + name)}}}});
    Create(*hub, resources::kSyncSets, UpsertSet(name));
    Create(*hub, resources::kSyncSets, SyncModeSet(name, {"s-1", "s-2"}, "v1"));
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

  void WriteConfig(const std::string& file, const std::string& kubeconfig) const {
    std::ofstream(dir + "/" + file)
        << vhost.ConfigYaml(", heartbeatSeconds: 10") << "hub: {kubeconfig: " << kubeconfig << "}\n"
        << "log: {level: info}\n"
        << "admin: {listen: \"127.0.0.1:0\"}\n"
        << "topology: {retryTiers: [1s, 2s]}\n"
        << "publisher: {leaderElection: {enabled: true, leaseDuration: 6s, renewDeadline: 4s, "
           "retryPeriod: 1s}}\n"
        << "consumer: {prefetch: 4, maxAttempts: 5}\n";
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
  p.ApplyManifest(SourceDir() + "/deploy/namespace.yaml");
  p.ApplyManifest(SourceDir() + "/deploy/rbac.yaml");
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
  p.ApplyManifest(SourceDir() + "/deploy/namespace.yaml");
  p.ApplyManifest(SourceDir() + "/deploy/rbac.yaml");
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
