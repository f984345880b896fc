// Fleet generator: writes a simulated Hive fleet through the ApiServer's REST semantics (so every
// object passes the same validation as over HTTP): per cluster a Namespace, a ClusterDeployment
// (installed and reachable, as Hive's controllers mark a running cluster), its admin kubeconfig
// Secret and S SyncSets, plus K SelectorSyncSets for the whole fleet; the
// target clusters get their extra namespaces. Pure functions over the ApiServers passed in.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "tests/kubesim/api_server.h"

namespace syncbus::kubesim {

struct FleetSpec {
  int clusters = 0;
  int syncsets = 0;           // SyncSets per cluster: cluster-NNNN-ss-MM
  int selector_syncsets = 0;  // cluster-scoped, selecting every fleet cluster: fleet-sss-MM
  int resources = 0;          // ConfigMaps per SyncSet / SelectorSyncSet
  // Extra namespaces on each target (sim-ns-MM); resource RR then lands in sim-ns-(RR mod M)
  // instead of default.
  int namespaces_per_cluster = 0;
  // Admin kubeconfigs name each cluster's own host, <name>.localhost (loopback: clients such as
  // libcurl resolve *.localhost themselves), so clients keep a connection pool per cluster as
  // they would against real clusters instead of one pool for the whole fleet. Plain HTTP only
  // (the simulator's certificate does not name those hosts).
  bool host_per_cluster = false;

  Status Validate() const;
};

// Labels every fleet ClusterDeployment carries (the SelectorSyncSets select on the first).
inline constexpr const char* kFleetLabel = "syncbus.io/fleet";
inline constexpr const char* kFleetLabelValue = "sim";

// "cluster-0007": zero-padded to 4 digits (more when the fleet needs them), from 0.
std::string FleetClusterName(int index, int clusters);
std::vector<std::string> FleetClusterNames(int clusters);
// The target namespace that resource `index` of a set lands in.
std::string FleetResourceNamespace(const FleetSpec& spec, int index);

// How clients reach the simulator: bearer token (empty = none) and, for HTTPS, the PEM of the
// certificate authority to trust (empty = plain HTTP or the system store); optionally a client
// certificate and its private key (PEM, both or neither).
struct ClientAuth {
  std::string token;
  std::string ca_pem;
  std::string client_cert_pem;
  std::string client_key_pem;
};
// The ClientAuth of one cluster's admin kubeconfig, by cluster name.
using ClusterAuth = std::function<Result<ClientAuth>(const std::string& cluster)>;

// A kubeconfig (YAML) for one API server: `server` is its base URL.
std::string MakeKubeconfig(const std::string& name, const std::string& server,
                           const ClientAuth& auth);

struct FleetSummary {
  int clusters = 0;
  int hub_objects = 0;  // namespaces, ClusterDeployments, Secrets, SyncSets, SelectorSyncSets
  int target_namespaces = 0;
  std::chrono::milliseconds elapsed{0};
  // "fleet: 1000 clusters, 0 SyncSets and 60 SelectorSyncSets of 10 ConfigMaps; ..."
  std::string ToString(const FleetSpec& spec) const;
};

// The namespace syncbus runs in on a hub where it is installed (deploy/namespace.yaml): the
// consumers' cluster Leases and the publisher's leader Lease live there.
inline constexpr char kSyncbusNamespace[] = "syncbus";
// The consumers' liveness Leases' namespace on such a hub (deploy/liveness/namespace.yaml).
inline constexpr char kLivenessNamespace[] = "syncbus-liveness";

// Writes the hub side: with at least one cluster, first the namespaces kSyncbusNamespace and
// kLivenessNamespace (unless they exist), as an installed syncbus has them. Each admin kubeconfig
// points at `base_url` +
// "/clusters/<name>" (with host_per_cluster, base_url's host replaced by <name>.localhost) with
// `auth(<name>)`.
Result<FleetSummary> PopulateHub(ApiServer& hub, const FleetSpec& spec, const std::string& base_url,
                                 const ClusterAuth& auth);
// The same with one ClientAuth for every cluster.
Result<FleetSummary> PopulateHub(ApiServer& hub, const FleetSpec& spec, const std::string& base_url,
                                 const ClientAuth& auth);
// Creates the extra namespaces on one target cluster; returns how many.
Result<int> SeedTarget(ApiServer& target, const FleetSpec& spec);

}  // namespace syncbus::kubesim
