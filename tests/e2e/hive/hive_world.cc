#include "tests/e2e/hive/hive_world.h"

#include <cstdlib>
#include <fstream>
#include <regex>

#include <doctest/doctest.h>
#include <signal.h>

#include "common/base64.h"
#include "consumer/set_applier.h"
#include "tests/support/files.h"
#include "tests/support/hive_objects.h"
#include "tests/support/kube_clients.h"
#include "tests/support/wait.h"

namespace syncbus::testing {
namespace {

namespace res = kube::resources;
using namespace std::chrono_literals;

// Every string in `j` with `token` replaced by PHASE.
Json Normalise(const Json& j, const std::string& token) {
  if (j.is_string()) {
    std::string s = j.get<std::string>();
    for (size_t at = s.find(token); at != std::string::npos; at = s.find(token, at + 1)) {
      s.replace(at, token.size(), kPhaseMarker);
    }
    return s;
  }
  if (j.is_array()) {
    Json out = Json::array();
    for (const auto& e : j) out.push_back(Normalise(e, token));
    return out;
  }
  if (j.is_object()) {
    Json out = Json::object();
    for (const auto& [k, v] : j.items()) {
      std::string key = k;
      for (size_t at = key.find(token); at != std::string::npos; at = key.find(token, at + 1)) {
        key.replace(at, token.size(), kPhaseMarker);
      }
      out[key] = Normalise(v, token);
    }
    return out;
  }
  return j;
}

// What a time says: set or not, and whether it is written with six fraction digits.
Json TimeShape(const Json& t) {
  if (!t.is_string()) return nullptr;
  const std::string& s = t.get_ref<const std::string&>();
  if (std::regex_match(s, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)"))) return "micro";
  if (std::regex_match(s, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"))) return "seconds";
  return "other: " + s;
}

Json Entries(const Json& list) {
  Json out = Json::array();
  if (!list.is_array()) return out;
  for (const auto& e : list) {
    Json n = {{"name", e.value("name", "")},
              {"observedGeneration", e.value("observedGeneration", int64_t{0})},
              {"result", e.value("result", "")},
              {"failureMessage", e.value("failureMessage", "")},
              {"resourcesToDelete", e.value("resourcesToDelete", Json::array())},
              {"lastTransitionTime",
               TimeShape(e.contains("lastTransitionTime") ? e["lastTransitionTime"] : Json())},
              {"firstSuccessTime",
               TimeShape(e.contains("firstSuccessTime") ? e["firstSuccessTime"] : Json())}};
    out.push_back(std::move(n));
  }
  return out;
}

Json OwnerRefs(const Json& meta) {
  Json out = Json::array();
  for (auto ref : meta.value("ownerReferences", Json::array())) {
    ref["uid"] = "UID";
    out.push_back(ref);
  }
  return out;
}

}  // namespace

Json ConfigMapObject(const std::string& ns, const std::string& name, Json data, Json labels) {
  Json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata", {{"name", name}}},
             {"data", std::move(data)}};
  if (!ns.empty()) cm["metadata"]["namespace"] = ns;
  if (!labels.empty()) cm["metadata"]["labels"] = std::move(labels);
  return cm;
}

Json Ok(Result<Json> r, const std::string& what) {
  REQUIRE_MESSAGE(r.ok(), what << ": " << r.status().ToString());
  return std::move(r).value();
}

std::shared_ptr<http::Transport> HiveWorld::transport() const {
  return TestTransport();
}

HiveWorld::HiveWorld(const std::string& name) : dir_(MakeTempDir("syncbus-" + name)) {
  std::string envtest = SourceDir() + "/scripts/envtest";
  int rc =
      std::system((envtest + " start --dir " + dir_ + "/envtest >" + dir_ + "/envtest.log 2>&1")
                      .c_str());  // NOLINT
  REQUIRE_MESSAGE(rc == 0, "scripts/envtest start failed: " << ReadFile(dir_ + "/envtest.log"));
  hub_kubeconfig_ = dir_ + "/envtest/hub-admin.kubeconfig";
  target_kubeconfig_ = dir_ + "/envtest/target-admin.kubeconfig";
  hub_ = ClientFromKubeconfig(hub_kubeconfig_);
  target_ = ClientFromKubeconfig(target_kubeconfig_);
}

HiveWorld::~HiveWorld() {
  StopSyncbus();
  hive_.reset();
  std::string envtest = SourceDir() + "/scripts/envtest";
  (void)std::system((envtest + " stop --dir " + dir_ + "/envtest >>" + dir_ + "/envtest.log 2>&1")
                        .c_str());  // NOLINT
}

void HiveWorld::CreateHubNamespace(const std::string& ns) {
  Ok(hub_->Apply(kube::Object(res::kNamespaces, "", ns),
                 {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}},
                 {"hive-tests", true}),
     "hub namespace " + ns);
}

void HiveWorld::CreateTargetNamespace(const std::string& ns) {
  Ok(target_->Apply(kube::Object(res::kNamespaces, "", ns),
                    {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}},
                    {"hive-tests", true}),
     "target namespace " + ns);
}

void HiveWorld::AddCluster(const std::string& ns, const std::string& name,
                           const ClusterOptions& o) {
  std::string kubeconfig = ReadFile(target_kubeconfig_);
  if (!o.server.empty()) {
    const size_t at = kubeconfig.find("server: ");
    REQUIRE(at != std::string::npos);
    const size_t line_start = kubeconfig.rfind('\n', at) + 1;
    std::string line = "server: " + o.server;
    if (!o.tls_server_name.empty())
      line += "\n" + std::string(at - line_start, ' ') + "tls-server-name: " + o.tls_server_name;
    kubeconfig.replace(at, kubeconfig.find('\n', at) - at, line);
  }
  Json secret = {{"apiVersion", "v1"},
                 {"kind", "Secret"},
                 {"metadata", {{"name", name + "-admin-kubeconfig"}, {"namespace", ns}}},
                 {"data", {{"kubeconfig", EncodeBase64(kubeconfig)}}}};
  Ok(hub_->Create(kube::Collection(res::kSecrets, ns), secret), "kubeconfig Secret");
  Json cd = {
      {"apiVersion", "hive.openshift.io/v1"},
      {"kind", "ClusterDeployment"},
      {"metadata",
       {{"name", name}, {"namespace", ns}, {"labels", o.labels}, {"annotations", o.annotations}}},
      {"spec",
       {{"baseDomain", "hive-tests.syncbus.io"},
        {"clusterName", name},
        {"platform", {{"none", Json::object()}}},
        {"installed", true},
        {"clusterMetadata",
         {{"clusterID", ns + "-" + name},
          {"infraID", name},
          {"adminKubeconfigSecretRef", {{"name", name + "-admin-kubeconfig"}}}}}}}};
  if (!o.control_plane.is_null()) cd["spec"]["controlPlaneConfig"] = o.control_plane;
  Json made = Ok(hub_->Create(kube::Collection(res::kClusterDeployments, ns), cd),
                 "ClusterDeployment " + name);
  if (!o.running) return;
  made["status"] = RunningClusterStatus(o.conditions);
  Ok(hub_->Update(kube::StatusOf(res::kClusterDeployments, ns, name), made),
     "ClusterDeployment status " + name);
}

void HiveWorld::PutSyncSet(const std::string& ns, const std::string& name,
                           const std::string& cluster, Json spec) {
  spec["clusterDeploymentRefs"] = Json::array({{{"name", cluster}}});
  Json ss = {{"apiVersion", "hive.openshift.io/v1"},
             {"kind", "SyncSet"},
             {"metadata", {{"name", name}, {"namespace", ns}}},
             {"spec", spec}};
  PutHubObject(res::kSyncSets, ss);
}

void HiveWorld::PutSelectorSyncSet(const std::string& name, Json spec) {
  PutHubObject(res::kSelectorSyncSets, {{"apiVersion", "hive.openshift.io/v1"},
                                        {"kind", "SelectorSyncSet"},
                                        {"metadata", {{"name", name}}},
                                        {"spec", spec}});
}

void HiveWorld::DeleteSyncSet(const std::string& ns, const std::string& name) {
  Status deleted = hub_->Delete(kube::Object(res::kSyncSets, ns, name), {});
  REQUIRE_MESSAGE(deleted.ok(), deleted.ToString());
}

void HiveWorld::PutHubObject(const kube::Resource& resource, const Json& object) {
  const std::string ns = resource.namespaced ? object["metadata"].value("namespace", "") : "";
  const std::string name = object["metadata"]["name"];
  auto current = hub_->Get(kube::Object(resource, ns, name));
  if (current.ok()) {
    Json next = object;
    next["metadata"]["resourceVersion"] = (*current)["metadata"]["resourceVersion"];
    Ok(hub_->Update(kube::Object(resource, ns, name), next), resource.kind + " " + name);
  } else {
    Ok(hub_->Create(kube::Collection(resource, ns), object), resource.kind + " " + name);
  }
}

void HiveWorld::PutTargetObject(const kube::Resource& resource, const Json& object) {
  const std::string ns = resource.namespaced ? object["metadata"].value("namespace", "") : "";
  Ok(target_->Create(kube::Collection(resource, ns), object),
     "target " + object["metadata"].dump());
}

int64_t HiveWorld::Generation(const kube::Resource& resource, const std::string& ns,
                              const std::string& name) {
  return Ok(hub_->Get(kube::Object(resource, ns, name)), name)["metadata"].value("generation",
                                                                                 int64_t{0});
}

void HiveWorld::StartHive(const std::string& hive_dir) {
  HiveManager::PrepareHub(*hub_, hive_dir);
  hive_log_.clear();
  hive_ = std::make_unique<HiveManager>(hive_dir, hub_kubeconfig_,
                                        dir_ + "/hive-" + std::to_string(daemons_.size()) + ".log");
}

void HiveWorld::StopHive() {
  if (!hive_) return;
  hive_->Stop();
  hive_log_ = hive_->Log();
  hive_.reset();
}

void HiveWorld::StartSyncbus(const std::string& ns, const std::string& resync) {
  if (!vhost_) vhost_ = std::make_unique<TestVhost>(NewTestVhost());
  // The namespaces of an installed syncbus (deploy/namespace.yaml, deploy/liveness): its own,
  // and the consumers' liveness Leases'.
  CreateHubNamespace("syncbus");
  CreateHubNamespace("syncbus-liveness");
  const std::string config = dir_ + "/syncbus.yaml";
  std::ofstream(config) << vhost_->ConfigYaml(", heartbeatSeconds: 10")
                        << "hub: {kubeconfig: " << hub_kubeconfig_ << "}\n"
                        << "log: {level: info}\n"
                        << "admin: {listen: \"127.0.0.1:0\"}\n"
                        << "topology: {retryTiers: [1s, 2s, 5s]}\n"
                        << "publisher: {namespace: " << ns
                        << (resync.empty() ? "" : ", resyncInterval: " + resync)
                        << ", leaderElection: {enabled: false}}\n"
                        << "consumer: {prefetch: 4, maxAttempts: 50}\n";
  for (const char* binary : {"publisher/syncbus-publisher", "consumer/syncbus-consumer"}) {
    std::string log = dir_ + "/" + std::string(binary).substr(std::string(binary).find('/') + 1) +
                      "-" + std::to_string(daemons_.size()) + ".log";
    Result<ChildProcess> p =
        ChildProcess::Start({BinaryDir() + "/" + binary, "--config", config}, log);
    REQUIRE_MESSAGE(p.ok(), p.status().ToString());
    daemons_.push_back(std::move(*p));
  }
}

void HiveWorld::StopSyncbus() {
  for (ChildProcess& d : daemons_) d.Stop(SIGTERM, 30s);
}

namespace {

std::string GetPage(const std::string& url) {
  http::Request request;
  request.url = url;
  Result<http::Response> response = TestTransport()->Call(request);
  REQUIRE_MESSAGE(response.ok(), url << ": " << response.status().ToString());
  REQUIRE_MESSAGE(response->status == 200, url << ": HTTP " << response->status);
  return response->body;
}

}  // namespace

std::string HiveWorld::HiveMetricsPage() {
  REQUIRE_MESSAGE(hive_ != nullptr, "Hive is not running");
  return GetPage("http://127.0.0.1:2112/metrics");
}

std::string HiveWorld::ConsumerMetricsPage() {
  std::smatch m;
  std::string log;
  for (const ChildProcess& d : daemons_) {
    log = d.Log();
    if (log.find("consumer admin endpoint listening") == std::string::npos) continue;
    if (std::regex_search(log, m,
                          std::regex("consumer admin endpoint listening.*port[=\":]+([0-9]+)")))
      break;
  }
  REQUIRE_MESSAGE(!m.empty(), "no consumer admin port in its log:\n" << log);
  return GetPage("http://127.0.0.1:" + m[1].str() + "/metrics");
}

std::string HiveWorld::SyncbusLogs() const {
  std::string all;
  for (const ChildProcess& d : daemons_) {
    std::string log = d.Log();
    all += log.substr(log.size() > 6000 ? log.size() - 6000 : 0) + "\n----\n";
  }
  return all;
}

Json HiveWorld::Snapshot(const std::string& ns, const std::string& cluster,
                         const std::string& phase_token) {
  Json out = {{"clusterSync", nullptr}, {"lease", nullptr}};
  auto cs = hub_->Get(kube::Object(res::kClusterSyncs, ns, cluster));
  if (cs.ok()) {
    const Json status = cs->value("status", Json::object());
    Json conditions = Json::array();
    for (const auto& c : status.value("conditions", Json::array())) {
      conditions.push_back({{"type", c.value("type", "")},
                            {"status", c.value("status", "")},
                            {"reason", c.value("reason", "")},
                            {"message", c.value("message", "")}});
    }
    // controlledByReplica is left out: Hive writes its StatefulSet ordinal, syncbus (whose
    // consumers are no such replicas) removes it.
    out["clusterSync"] = {
        {"ownerReferences", OwnerRefs((*cs)["metadata"])},
        {"syncSets", Entries(status.value("syncSets", Json::array()))},
        {"selectorSyncSets", Entries(status.value("selectorSyncSets", Json::array()))},
        {"conditions", conditions},
        {"firstSuccessTime",
         TimeShape(status.contains("firstSuccessTime") ? status["firstSuccessTime"] : Json())}};
  }
  auto lease = hub_->Get(kube::Object(res::kClusterSyncLeases, ns, cluster));
  if (lease.ok()) {
    out["lease"] = {{"ownerReferences", OwnerRefs((*lease)["metadata"])},
                    {"renewTime", TimeShape((*lease)["spec"].contains("renewTime")
                                                ? (*lease)["spec"]["renewTime"]
                                                : Json())}};
  }
  return Normalise(out, phase_token);
}

Json HiveWorld::TargetSnapshot(const std::vector<TargetRef>& objects,
                               const std::string& phase_token) {
  Json out = Json::object();
  for (const TargetRef& ref : objects) {
    auto got =
        target_->Get(kube::Object(ref.resource, ref.resource.namespaced ? ref.ns : "", ref.name));
    std::string key = ref.resource.kind + " " + ref.ns + "/" + ref.name;
    if (!got.ok()) {
      out[key] = nullptr;
      continue;
    }
    Json object = *got;
    Json& meta = object["metadata"];
    for (const char* drop :
         {"uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"})
      meta.erase(drop);
    object.erase("status");
    if (object.contains("spec") && object["spec"].is_object()) {
      for (const char* drop : {"clusterIP", "clusterIPs"}) object["spec"].erase(drop);  // allocated
    }
    out[key] = object;
  }
  return Normalise(out, phase_token);
}

bool HiveWorld::WaitSettled(const std::function<bool()>& converged,
                            const std::function<Json()>& snapshot,
                            std::chrono::milliseconds timeout, std::chrono::milliseconds quiet) {
  if (!WaitFor(converged, timeout, 250ms)) return false;
  Json last = snapshot();
  auto since = std::chrono::steady_clock::now();
  return WaitFor(
      [&] {
        Json now = snapshot();
        if (now != last) {
          last = now;
          since = std::chrono::steady_clock::now();
          return false;
        }
        return std::chrono::steady_clock::now() - since >= quiet;
      },
      timeout, 500ms);
}

bool HiveWorld::Converged(const std::string& ns, const std::string& cluster,
                          const std::vector<std::pair<std::string, std::string>>& sets) {
  auto cs = hub_->Get(kube::Object(res::kClusterSyncs, ns, cluster));
  if (!cs.ok() || !hub_->Get(kube::Object(res::kClusterSyncLeases, ns, cluster)).ok()) return false;
  const Json status = cs->value("status", Json::object());
  if (status.value("conditions", Json::array()).empty()) return false;
  size_t entries = status.value("syncSets", Json::array()).size() +
                   status.value("selectorSyncSets", Json::array()).size();
  if (entries != sets.size()) return false;
  for (const auto& [kind, name] : sets) {
    bool selector = kind == "SelectorSyncSet";
    int64_t generation =
        Generation(selector ? res::kSelectorSyncSets : res::kSyncSets, selector ? "" : ns, name);
    bool found = false;
    for (const auto& e : status.value(selector ? "selectorSyncSets" : "syncSets", Json::array())) {
      found = found || (e.value("name", "") == name &&
                        e.value("observedGeneration", int64_t{-1}) == generation);
    }
    if (!found) return false;
  }
  return true;
}

}  // namespace syncbus::testing
