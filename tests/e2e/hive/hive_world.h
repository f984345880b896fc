// The world of the tests that run syncbus beside upstream Hive: a private pair of real API
// servers (scripts/envtest: a hub with Hive's CRDs and a target), the clusters and sets of the
// scenarios, either runner (Hive's controller manager, or syncbus's publisher and consumer on the
// broker fixture) and a snapshot of what a runner left: the ClusterSync and ClusterSyncLease of a
// cluster and objects on the target, normalised so that the two runners' snapshots compare (names
// carry a phase token, replaced by PHASE; uids, versions and times reduced to what they say).
// Thread-compatible: one test at a time.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/kube/client_impl.h"
#include "tests/support/child_process.h"
#include "tests/support/hive_manager.h"
#include "tests/support/test_broker.h"

namespace syncbus::testing {

// The token that makes names unique per phase ("hd-hive", "hd-sb"); PHASE in snapshots.
inline constexpr char kPhaseMarker[] = "PHASE";

// The value of `r`; fails the test (naming `what`) when it is an error.
Json Ok(Result<Json> r, const std::string& what = "");

// A ConfigMap in `ns` ("": none) with `data` and, when not empty, `labels`.
Json ConfigMapObject(const std::string& ns, const std::string& name, Json data,
                     Json labels = Json::object());

struct TargetRef {
  kube::Resource resource;
  std::string ns, name;
};

class HiveWorld {
 public:
  // Starts the private API servers (needs $KUBEBUILDER_ASSETS) and prepares the hub for Hive.
  explicit HiveWorld(const std::string& name);
  ~HiveWorld();

  kube::ClientImpl& hub() { return *hub_; }
  kube::ClientImpl& target() { return *target_; }
  std::shared_ptr<http::Transport> transport() const;
  const std::string& dir() const { return dir_; }
  const std::string& hub_kubeconfig() const { return hub_kubeconfig_; }

  void CreateHubNamespace(const std::string& ns);
  void CreateTargetNamespace(const std::string& ns);
  struct ClusterOptions {
    Json labels = Json::object(), annotations = Json::object();
    // Installed, its Unreachable condition False and installedTimestamp set, as Hive's
    // controllers mark a running cluster.
    bool running = true;
    Json control_plane = nullptr;     // spec.controlPlaneConfig
    Json conditions = Json::array();  // more status conditions (running clusters)
    // The admin kubeconfig's server instead of the target's, and the name its certificate is
    // checked for (kubeconfig tls-server-name).
    std::string server, tls_server_name;
  };
  // A ClusterDeployment `name` in `ns` whose admin kubeconfig reaches the target.
  void AddCluster(const std::string& ns, const std::string& name, const ClusterOptions& options);
  void AddCluster(const std::string& ns, const std::string& name) {
    AddCluster(ns, name, ClusterOptions{});
  }
  // Creates or replaces (a new generation) a SyncSet for cluster `cluster` / a SelectorSyncSet.
  void PutSyncSet(const std::string& ns, const std::string& name, const std::string& cluster,
                  Json spec);
  void PutSelectorSyncSet(const std::string& name, Json spec);
  void DeleteSyncSet(const std::string& ns, const std::string& name);
  void PutHubObject(const kube::Resource& resource, const Json& object);
  void PutTargetObject(const kube::Resource& resource, const Json& object);
  int64_t Generation(const kube::Resource& resource, const std::string& ns,
                     const std::string& name);

  // Runners. Only one runs at a time.
  void StartHive(const std::string& hive_dir);
  void StopHive();
  std::string HiveLog() const { return hive_ ? hive_->Log() : hive_log_; }
  // syncbus's publisher (watching `ns` only) and one consumer, admin credentials, on a fresh vhost.
  // `resync`: the full reapply interval ("" = the default).
  void StartSyncbus(const std::string& ns, const std::string& resync = "");
  void StopSyncbus();
  std::string SyncbusLogs() const;
  // The Prometheus page of the running Hive manager (its fixed port 2112) / syncbus consumer.
  std::string HiveMetricsPage();
  std::string ConsumerMetricsPage();

  // The cluster's ClusterSync and ClusterSyncLease, normalised; {"clusterSync": null} when none.
  Json Snapshot(const std::string& ns, const std::string& cluster, const std::string& phase_token);
  // Target objects, normalised (null for an absent one).
  Json TargetSnapshot(const std::vector<TargetRef>& objects, const std::string& phase_token);

  // Waits until `converged()` holds and then until `snapshot()` stays the same for `quiet`.
  bool WaitSettled(const std::function<bool()>& converged, const std::function<Json()>& snapshot,
                   std::chrono::milliseconds timeout,
                   std::chrono::milliseconds quiet = std::chrono::seconds(3));
  // The cluster's ClusterSync reports every set of `sets` ({"SyncSet"|"SelectorSyncSet", name})
  // at its current generation, no other entry, a Failed condition, and a lease exists.
  bool Converged(const std::string& ns, const std::string& cluster,
                 const std::vector<std::pair<std::string, std::string>>& sets);

 private:
  std::string dir_, hub_kubeconfig_, target_kubeconfig_;
  std::unique_ptr<kube::ClientImpl> hub_, target_;
  std::unique_ptr<HiveManager> hive_;
  std::string hive_log_;
  std::unique_ptr<TestVhost> vhost_;
  std::vector<ChildProcess> daemons_;
};

}  // namespace syncbus::testing
