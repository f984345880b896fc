// Fleet generation: deterministic objects, created through ApiServer::Call.
#include "tests/kubesim/fleet.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "common/base64.h"

namespace syncbus::kubesim {
namespace {

constexpr const char* kRegions[] = {"us-east-1", "eu-west-1", "ap-southeast-2"};
constexpr const char* kTiers[] = {"gold", "silver", "bronze"};

std::string Padded(int value, int width) {
  std::string digits = std::to_string(value);
  if (static_cast<int>(digits.size()) < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

int NameWidth(int count, int minimum) {
  int width = static_cast<int>(std::to_string(std::max(count - 1, 0)).size());
  return std::max(width, minimum);
}

Status Create(ApiServer& api, const std::string& path, const Json& object) {
  ApiResponse response = api.Call("POST", path, object);
  if (response.status == 201 || response.status == 200) return Status::Ok();
  std::string name = object["metadata"].value("name", "");
  return Status(Code::kInvalidArgument, "creating " + object.value("kind", "object") + " " + name +
                                            " on " + path + ": HTTP " +
                                            std::to_string(response.status) + " " + response.body)
      .WithHttpStatus(response.status);
}

// Marks a fleet ClusterDeployment installed and reachable, as Hive's controllers do for a running
// cluster (its Unreachable condition False, status.installedTimestamp): Hive syncs nothing else.
Status SetRunning(ApiServer& api, const std::string& path) {
  Json patch = {{"status",
                 {{"installedTimestamp", "2024-01-01T00:00:00Z"},
                  {"conditions", Json::array({{{"type", "Unreachable"},
                                               {"status", "False"},
                                               {"reason", "ClusterReachable"},
                                               {"message", "cluster is reachable"},
                                               {"lastTransitionTime", "2024-01-01T00:00:00Z"},
                                               {"lastProbeTime", "2024-01-01T00:00:00Z"}}})}}}};
  ApiResponse response = api.Call("PATCH", path + "/status", patch, "application/merge-patch+json");
  if (response.status == 200) return Status::Ok();
  return Status(Code::kInvalidArgument, "marking " + path + " running: HTTP " +
                                            std::to_string(response.status) + " " + response.body)
      .WithHttpStatus(response.status);
}

Json ConfigMap(const FleetSpec& spec, const std::string& name, int index,
               const std::string& owner) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", FleetResourceNamespace(spec, index)}}},
          {"data",
           {{"owner", owner},
            {"index", std::to_string(index)},
            {"payload", "simulated configuration " + name},
            {"mode", "fleet"}}}};
}

Json Resources(const FleetSpec& spec, const std::string& set_prefix, const std::string& owner) {
  Json resources = Json::array();
  int width = NameWidth(spec.resources, 2);
  for (int r = 0; r < spec.resources; ++r) {
    resources.push_back(ConfigMap(spec, set_prefix + "-cm-" + Padded(r, width), r, owner));
  }
  return resources;
}

Json ClusterDeployment(int index, const std::string& name) {
  char cluster_id[40];
  std::snprintf(cluster_id, sizeof(cluster_id), "5e1f0000-0000-4000-8000-%012d", index);
  return {{"apiVersion", "hive.openshift.io/v1"},
          {"kind", "ClusterDeployment"},
          {"metadata",
           {{"name", name},
            {"namespace", name},
            {"labels",
             {{kFleetLabel, kFleetLabelValue},
              {"region", kRegions[index % 3]},
              {"tier", kTiers[(index / 3) % 3]},
              {"cluster-index", std::to_string(index)}}}}},
          {"spec",
           {{"baseDomain", "sim.syncbus.io"},
            {"clusterName", name},
            {"platform", {{"none", Json::object()}}},
            {"installed", true},
            {"clusterMetadata",
             {{"clusterID", cluster_id},
              {"infraID", name + "-sim"},
              {"adminKubeconfigSecretRef", {{"name", name + "-admin-kubeconfig"}}}}}}}};
}

// "http://127.0.0.1:8080" with host "a.localhost" -> "http://a.localhost:8080".
std::string WithHost(const std::string& url, const std::string& host) {
  size_t start = url.find("://");
  start = start == std::string::npos ? 0 : start + 3;
  size_t end = url.find_first_of(":/", start);
  if (end == std::string::npos) end = url.size();
  return url.substr(0, start) + host + url.substr(end);
}

}  // namespace

Status FleetSpec::Validate() const {
  if (clusters < 0 || syncsets < 0 || selector_syncsets < 0 || resources < 0 ||
      namespaces_per_cluster < 0) {
    return InvalidArgument("fleet sizes must not be negative");
  }
  return Status::Ok();
}

std::string FleetClusterName(int index, int clusters) {
  return "cluster-" + Padded(index, NameWidth(clusters, 4));
}

std::vector<std::string> FleetClusterNames(int clusters) {
  std::vector<std::string> names;
  names.reserve(std::max(clusters, 0));
  for (int i = 0; i < clusters; ++i) names.push_back(FleetClusterName(i, clusters));
  return names;
}

std::string FleetResourceNamespace(const FleetSpec& spec, int index) {
  if (spec.namespaces_per_cluster <= 0) return "default";
  return "sim-ns-" +
         Padded(index % spec.namespaces_per_cluster, NameWidth(spec.namespaces_per_cluster, 2));
}

std::string MakeKubeconfig(const std::string& name, const std::string& server,
                           const ClientAuth& auth) {
  std::string user;
  if (!auth.token.empty()) user += "    token: \"" + auth.token + "\"\n";
  if (!auth.client_cert_pem.empty()) {
    user += "    client-certificate-data: " + EncodeBase64(auth.client_cert_pem) + "\n";
  }
  if (!auth.client_key_pem.empty()) {
    user += "    client-key-data: " + EncodeBase64(auth.client_key_pem) + "\n";
  }
  user = user.empty() ? "  user: {}\n" : "  user:\n" + user;
  std::string ca = auth.ca_pem.empty()
                       ? std::string()
                       : "    certificate-authority-data: " + EncodeBase64(auth.ca_pem) + "\n";
  return "apiVersion: v1\n"
         "kind: Config\n"
         "clusters:\n"
         "- name: " +
         name +
         "\n"
         "  cluster:\n"
         "    server: \"" +
         server + "\"\n" + ca +
         "users:\n"
         "- name: " +
         name + "-admin\n" + user +
         "contexts:\n"
         "- name: " +
         name +
         "\n"
         "  context:\n"
         "    cluster: " +
         name +
         "\n"
         "    user: " +
         name +
         "-admin\n"
         "current-context: " +
         name + "\n";
}

std::string FleetSummary::ToString(const FleetSpec& spec) const {
  return "fleet: " + std::to_string(clusters) + " clusters, " + std::to_string(spec.syncsets) +
         " SyncSets per cluster and " + std::to_string(spec.selector_syncsets) +
         " SelectorSyncSets of " + std::to_string(spec.resources) + " ConfigMaps each; " +
         std::to_string(hub_objects) + " hub objects, " + std::to_string(target_namespaces) +
         " target namespaces in " + std::to_string(elapsed.count()) + " ms";
}

Result<FleetSummary> PopulateHub(ApiServer& hub, const FleetSpec& spec, const std::string& base_url,
                                 const ClientAuth& auth) {
  return PopulateHub(hub, spec, base_url, [&auth](const std::string&) { return auth; });
}

Result<FleetSummary> PopulateHub(ApiServer& hub, const FleetSpec& spec, const std::string& base_url,
                                 const ClusterAuth& auth) {
  SYNCBUS_RETURN_IF_ERROR(spec.Validate());
  if (spec.host_per_cluster && base_url.rfind("http://", 0) != 0) {
    return InvalidArgument("a host per cluster needs a plain http:// simulator, not " + base_url);
  }
  auto start = std::chrono::steady_clock::now();
  FleetSummary summary;
  summary.clusters = spec.clusters;
  for (const char* ns : {kSyncbusNamespace, kLivenessNamespace}) {
    if (spec.clusters == 0) break;
    Status made =
        Create(hub, "/api/v1/namespaces",
               {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
    if (!made.ok() && made.http_status() != 409) return made;  // there already: as installed
    ++summary.hub_objects;
  }
  int set_width = NameWidth(spec.syncsets, 2);
  for (int i = 0; i < spec.clusters; ++i) {
    std::string name = FleetClusterName(i, spec.clusters);
    SYNCBUS_RETURN_IF_ERROR(
        Create(hub, "/api/v1/namespaces",
               {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}}));
    SYNCBUS_RETURN_IF_ERROR(
        Create(hub, "/apis/hive.openshift.io/v1/namespaces/" + name + "/clusterdeployments",
               ClusterDeployment(i, name)));
    SYNCBUS_RETURN_IF_ERROR(SetRunning(
        hub, "/apis/hive.openshift.io/v1/namespaces/" + name + "/clusterdeployments/" + name));
    std::string server = spec.host_per_cluster ? WithHost(base_url, name + ".localhost") : base_url;
    Result<ClientAuth> cluster_auth = auth(name);
    if (!cluster_auth.ok()) return cluster_auth.status().Annotate("credentials of " + name);
    std::string kubeconfig = MakeKubeconfig(name, server + "/clusters/" + name, *cluster_auth);
    SYNCBUS_RETURN_IF_ERROR(
        Create(hub, "/api/v1/namespaces/" + name + "/secrets",
               {{"apiVersion", "v1"},
                {"kind", "Secret"},
                {"metadata", {{"name", name + "-admin-kubeconfig"}, {"namespace", name}}},
                {"type", "Opaque"},
                {"data", {{"kubeconfig", EncodeBase64(kubeconfig)}}}}));
    summary.hub_objects += 3;
    for (int s = 0; s < spec.syncsets; ++s) {
      std::string set = "ss-" + Padded(s, set_width);
      std::string set_name = name + "-" + set;
      SYNCBUS_RETURN_IF_ERROR(Create(hub,
                                     "/apis/hive.openshift.io/v1/namespaces/" + name + "/syncsets",
                                     {{"apiVersion", "hive.openshift.io/v1"},
                                      {"kind", "SyncSet"},
                                      {"metadata", {{"name", set_name}, {"namespace", name}}},
                                      {"spec",
                                       {{"clusterDeploymentRefs", Json::array({{{"name", name}}})},
                                        {"resourceApplyMode", "Upsert"},
                                        {"resources", Resources(spec, set, set_name)}}}}));
      ++summary.hub_objects;
    }
  }
  int selector_width = NameWidth(spec.selector_syncsets, 2);
  for (int k = 0; k < spec.selector_syncsets; ++k) {
    std::string set = "sss-" + Padded(k, selector_width);
    std::string set_name = "fleet-" + set;
    SYNCBUS_RETURN_IF_ERROR(Create(
        hub, "/apis/hive.openshift.io/v1/selectorsyncsets",
        {{"apiVersion", "hive.openshift.io/v1"},
         {"kind", "SelectorSyncSet"},
         {"metadata", {{"name", set_name}}},
         {"spec",
          {{"clusterDeploymentSelector", {{"matchLabels", {{kFleetLabel, kFleetLabelValue}}}}},
           {"resourceApplyMode", "Upsert"},
           {"resources", Resources(spec, set, set_name)}}}}));
    ++summary.hub_objects;
  }
  summary.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  return summary;
}

Result<int> SeedTarget(ApiServer& target, const FleetSpec& spec) {
  int created = 0;
  for (int n = 0; n < spec.namespaces_per_cluster; ++n) {
    std::string name = "sim-ns-" + Padded(n, NameWidth(spec.namespaces_per_cluster, 2));
    SYNCBUS_RETURN_IF_ERROR(
        Create(target, "/api/v1/namespaces",
               {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}}));
    ++created;
  }
  return created;
}

}  // namespace syncbus::kubesim
