// The rig of the Hive conformance suite: upstream Hive's clustersync_controller_test.go, case by
// case, on a hub and a target API server. The cases are linked twice: conformance_hive_simulator
// (syncbus-kubesim in the test process, over HTTPS; simulator_servers.cc) and
// conformance_hive_apiserver (the envtest fixture's real hub and target; apiserver_servers.cc).
//
// One Rig per case: a hub namespace and a ClusterDeployment named as in Hive's tests
// (test-cluster-deployment), whose admin kubeconfig reaches the target. Names that other cases
// could share on the servers get a per-case prefix: target namespaces (T()), cluster-scoped hub
// objects and label values (U()). Reconcile() is what syncbus does for the cluster next — the
// publisher's decision (sync_decision.h) and, when it sends a request, the consumer's sync
// (ClusterSyncer) — which is what Hive's Reconcile is. Check() asserts what Hive's
// reconcileTest.run asserts. Not thread-safe; one case at a time per Rig.
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <prometheus/registry.h>

#include "common/clock.h"
#include "common/http/transport.h"
#include "common/json.h"
#include "common/kube/client_impl.h"
#include "consumer/cluster_lease.h"
#include "consumer/cluster_syncer.h"

namespace syncbus::conformance::hive {

// The servers of one binary.
struct Servers {
  kube::ClusterConfig hub, target;  // admin
  std::string target_kubeconfig;    // YAML reaching the target, for admin kubeconfig Secrets
  std::shared_ptr<http::Transport> transport;
  // Real kube-apiservers: every request costs a round trip through etcd and admission, so the
  // longest cases check a sample of what the simulator checks in full.
  bool real_apiserver = false;
  virtual ~Servers() = default;
};
std::unique_ptr<Servers> StartServers();

inline constexpr char kCdName[] = "test-cluster-deployment";
// Hive's timeInThePast, as the API stores it.
inline constexpr char kTimeInThePast[] = "2020-01-02T03:04:05Z";
// Objects on the target labelled so make their deletion fail (a webhook that cannot be called).
inline constexpr char kFailDeleteLabel[] = "hive-conformance.syncbus.io/fail-delete";

// Hive's buildSyncStatus and its options: Success at generation 1, first success now.
struct SyncStatus {
  enum class When { kNow, kPast, kNone, kAt };
  std::string name;
  int64_t observed_generation = 1;
  bool success = true;
  std::string failure_message;
  std::vector<Json> resources_to_delete;  // {apiVersion, kind, namespace, name}
  When last_transition = When::kNow;
  When first_success = When::kNow;
  std::string first_success_at;  // kAt

  explicit SyncStatus(std::string n) : name(std::move(n)) {}
  SyncStatus& Generation(int64_t g) {
    observed_generation = g;
    return *this;
  }
  SyncStatus& Failure(std::string message) {
    success = false;
    failure_message = std::move(message);
    return *this;
  }
  SyncStatus& ResourcesToDelete(std::vector<Json> refs) {
    resources_to_delete = std::move(refs);
    return *this;
  }
  SyncStatus& TransitionInThePast() {
    last_transition = When::kPast;
    return *this;
  }
  SyncStatus& FirstSuccessInThePast() {
    first_success = When::kPast;
    return *this;
  }
  SyncStatus& NoFirstSuccess() {
    first_success = When::kNone;
    return *this;
  }
  SyncStatus& FirstSuccessAt(std::string t) {
    first_success = When::kAt;
    first_success_at = std::move(t);
    return *this;
  }
  // As stored (kNow becomes kTimeInThePast: only expectations may say "now").
  Json ToJson() const;
};

Json ConfigMapRef(const std::string& ns, const std::string& name);
Json SecretRef(const std::string& ns, const std::string& name);
Json ConfigMap(const std::string& ns, const std::string& name);
Json SecretMapping(const std::string& source_name, const std::string& target_ns,
                   const std::string& target_name);
// Hive's two resourceApplyModes of one test as doctest sub-cases, under Hive's sub-case names:
// true in the `sync` one.
inline bool ApplyModeSubcases(const char* upsert = "Upsert", const char* sync = "Sync") {
  bool in_sync = false;
  SUBCASE(upsert) {}
  SUBCASE(sync) {
    in_sync = true;
  }
  return in_sync;
}

// A set's `resources`: the objects, in order.
Json Resources(std::initializer_list<Json> objects);
// Hive's "now": the wall clock (what the controller reads).
inline WallTime Now() {
  return RealClock().WallNow();
}

// What Hive's reconcileTest.run expects.
struct Expect {
  std::string failed_message;  // "" = success
  std::vector<SyncStatus> sync_sets, selector_sync_sets;
  bool unchanged_lease_renew_time = false;
  bool requeue = false;  // a failure retried soon (Hive: requeue without delay)
  bool no_work = false;  // no ClusterSync, no lease

  Expect& Failed(std::string message) {
    failed_message = std::move(message);
    return *this;
  }
  Expect& SyncSets(std::vector<SyncStatus> s) {
    sync_sets = std::move(s);
    return *this;
  }
  Expect& SelectorSyncSets(std::vector<SyncStatus> s) {
    selector_sync_sets = std::move(s);
    return *this;
  }
  Expect& LeaseUnchanged(bool unchanged = true) {
    unchanged_lease_renew_time = unchanged;
    return *this;
  }
  Expect& Requeue() {
    requeue = true;
    return *this;
  }
  Expect& NoWork() {
    no_work = true;
    return *this;
  }

  // Hive's status for one SyncSet that fails with `message` and never succeeded.
  static Expect FailingSyncSet(const std::string& name, const std::string& message) {
    return Expect()
        .Failed("SyncSet " + name + " is failing")
        .SyncSets({SyncStatus(name).Failure(message).NoFirstSuccess()});
  }
};

struct Reconciled {
  bool sent = false;  // the publisher sends a request (the consumer works)
  bool full_reapply = false;
  Status sync_status;  // the consumer's Sync (error: nothing was recorded)
  consumer::SyncOutcome outcome;
  WallTime start, end;  // Hive's window for "now": [start, end] truncated to seconds
  std::string lease_renew_time_before;
};

class Rig {
 public:
  Rig();
  ~Rig();

  kube::ClientImpl& hub() { return *hub_; }
  kube::ClientImpl& target() { return *target_; }
  std::shared_ptr<http::Transport> transport() const { return servers_->transport; }
  bool real_apiserver() const { return servers_->real_apiserver; }
  const std::string& ns() const { return ns_; }
  // A target namespace (or other target object name) of this case.
  std::string T(const std::string& name) const { return prefix_ + "-" + name; }
  // A cluster-scoped hub name or a label value of this case.
  std::string U(const std::string& name) const { return prefix_ + "-" + name; }

  // Hive's cdBuilder and its options.
  struct Cd {
    Json labels = Json::object();
    Json annotations = Json::object();
    bool installed = true;
    std::optional<std::string> unreachable = "False";  // nullopt: no Unreachable condition
    bool installed_timestamp = true;                   // status.installedTimestamp
    std::string installed_at;                          // "" = now
    bool deleted = false;                              // deletionTimestamp (with a finalizer)
    Json control_plane = nullptr;                      // spec.controlPlaneConfig
    Json extra_conditions = Json::array();

    Cd& Labels(Json l) {
      labels = std::move(l);
      return *this;
    }
    Cd& Annotations(Json a) {
      annotations = std::move(a);
      return *this;
    }
    Cd& InstalledAt(std::string t) {
      installed_at = std::move(t);
      return *this;
    }
    Cd& ControlPlane(Json c) {
      control_plane = std::move(c);
      return *this;
    }
    Cd& ExtraConditions(Json c) {
      extra_conditions = std::move(c);
      return *this;
    }
  };
  void CreateCd(const Cd& options);
  void CreateCd() { CreateCd(Cd{}); }
  // Where most of Hive's cases start: the ClusterDeployment, an empty ClusterSync, and the
  // target namespace T(`ns`), whose name is returned.
  std::string Start(const std::string& ns);
  std::string cd_uid() const { return cd_uid_; }
  // Hive's clusterSyncBuilder: owned by the ClusterDeployment; with these entries and conditions.
  void CreateClusterSync(const std::vector<SyncStatus>& sync_sets = {},
                         const std::vector<SyncStatus>& selector_sync_sets = {},
                         Json conditions = nullptr);
  std::string cluster_sync_uid() const { return cluster_sync_uid_; }
  // Hive's buildSyncLease; renewTime "0001-01-01T00:00:00.000000Z" stands for "no renew time"
  // (the CRD requires the field).
  void CreateLease(WallTime renew);
  void CreateLease(const std::string& renew_time);
  // A SyncSet for the cluster at `generation` (the spec is written generation times).
  void CreateSyncSet(const std::string& name, Json spec, int64_t generation = 1);
  void CreateSelectorSyncSet(const std::string& name, Json spec, int64_t generation = 1);
  void CreateHubSecret(const std::string& ns, const std::string& name, const Json& data);
  // A namespace on the target.
  void CreateTargetNamespace(const std::string& name);
  // A hub namespace besides the cluster's (a Secret source elsewhere).
  void CreateHubNamespace(const std::string& name);
  void CreateTargetObject(const kube::Resource& resource, const Json& object);
  // Every DELETE of a target ConfigMap labelled kFailDeleteLabel fails (once per server).
  void FailLabelledDeletes();

  Reconciled Reconcile();
  void Check(const Reconciled& r, const Expect& expect);

  Json GetClusterSync();  // null when absent
  Json GetLease();
  Json TargetGet(const kube::Resource& resource, const std::string& ns, const std::string& name);
  std::vector<Json> Entries(const char* list);  // status.syncSets / selectorSyncSets

  prometheus::Registry& registry() { return registry_; }

 private:
  std::unique_ptr<Servers> servers_;
  std::string prefix_, ns_;
  std::unique_ptr<kube::ClientImpl> hub_, target_;
  std::string cd_uid_, cluster_sync_uid_;
  prometheus::Registry registry_;
  std::unique_ptr<consumer::TargetClients> targets_;
  std::unique_ptr<consumer::DirectHubReader> reader_;
  std::unique_ptr<consumer::ClusterLeases>
      leases_;  // each sync claims its cluster, as a consumer's
  std::unique_ptr<consumer::ClusterSyncer> syncer_;
};

// The value of `r`; fails the case (naming `what`) when it is an error.
Json Ok(Result<Json> r, const std::string& what);

// "2024-01-02T03:04:05Z" lies in [start, end].
bool Between(const std::string& time, WallTime start, WallTime end);

}  // namespace syncbus::conformance::hive
