// ClusterSyncer: processes one sync request end to end: read, plan, run, record.
//   1. read: the cluster's state (its ClusterDeployment, applicable sets and ClusterSync) from a
//      HubReader — the consumer's watch-fed mirror, or the hub itself (hub_reader.h);
//   2. plan (sync_plan.h, the one room for it): which sets to apply and which removed sets'
//      objects to delete, and whether anything is written at all; then, with what the plan
//      needs read — the source Secrets of the sets' secretMappings, fresh from the hub, and the
//      cluster's discovery — the steps of each set in Hive's order;
//   3. run the steps (set_applier.h): the removed SyncSets' deletions, the SyncSets by name, the
//      removed SelectorSyncSets' deletions, the SelectorSyncSets by name, one after the other,
//      except that sets nobody could tell apart run side by side (up to
//      options.parallel_sync_sets at once), on the target cluster, whose client comes from its
//      admin kubeconfig Secret (read only when the cluster has no trusted client:
//      target_clients.h) and the ClusterDeployment's API URL and IP overrides. A fake cluster
//      (hive.openshift.io/fake-cluster) gets no traffic and every step succeeds;
//   4. record: one ClusterSync status write (created, as Hive does, for every eligible cluster,
//      with or without sets), with the resourceVersion of the state read (a 409 re-reads and
//      merges). The caller's fence claims the cluster before the first write, on its
//      ClusterSyncLease (consumer/cluster_lease.h), which a full reapply's claim renews: so the
//      ClusterSync is made first, before the claim, when the cluster has none.
// Target requests are non-blocking and shared by all clusters through one RequestLimiter; Sync()
// blocks its caller until the status is stored, so the caller may ack. Thread-safe: Sync() may
// run concurrently for different clusters; the caller keeps one cluster on one thread at a time.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "common/bus/sync_message.h"
#include "common/bus/trace_event.h"
#include "common/clock.h"
#include "common/hive/types.h"
#include "common/kube/client.h"
#include "consumer/hive_metrics.h"
#include "consumer/hub_inputs.h"
#include "consumer/hub_reader.h"
#include "consumer/request_limiter.h"
#include "consumer/set_applier.h"
#include "consumer/status_builder.h"
#include "consumer/sync_plan.h"
#include "consumer/target_clients.h"

namespace syncbus::consumer {

struct SyncerOptions {
  std::string field_manager = "syncbus";
  int parallel_sync_sets = 8;  // independent sets of one cluster in progress at once
  // Update-operation field managers whose fields an Apply takes over (set_applier.h).
  std::set<std::string> take_over_managers = {"hive6-clustersync", "Go-http-client",
                                              "kubectl-client-side-apply"};
  int max_in_flight = 2000;  // target requests across all clusters
  int per_cluster_in_flight = 20;
  double per_cluster_qps = 50;  // 0 = no rate limit
  std::chrono::milliseconds request_timeout{30000};
  std::chrono::milliseconds cluster_deadline{std::chrono::minutes(10)};  // one Sync's target work
  prometheus::Counter* kubeconfig_reads =
      nullptr;  // counts the kubeconfig Secrets read (null: none)
};

struct SyncOutcome {
  enum class Kind {
    kSynced,    // sets applied (possibly with failures, see failed_sets) and status stored
    kUpToDate,  // nothing needed: no target traffic (duplicate or stale request)
    kSkipped,   // cluster gone, paused, deleting, not installed or unreachable
  };
  Kind kind = Kind::kSynced;
  std::string detail;                     // skip reason or failure summary
  int applies = 0;                        // successful object applies
  double slowest_set_serial_seconds = 0;  // the largest sum of one set's request latencies
  double target_seconds = 0;              // wall time of the target work (deletions + applies)
  double prepare_seconds = 0;  // hub reads, kubeconfig, discovery: until the target work starts
  double store_seconds = 0;    // status write (and lease renewal) after the target work
  std::vector<std::string> failed_sets;
  bool transient = false;                    // every failure may heal by itself (retry soon)
  std::chrono::milliseconds retry_after{0};  // the longest Retry-After a target sent with a failure
  std::vector<TraceSet> sets;  // every set applied or removed (generation 0), for the trace
  std::string status_version;  // the ClusterSync as this sync stored it ("": not written)
  bool recovered = false;      // its ClusterSync showed a failing set; this sync stored none
};

class ClusterSyncer {
 public:
  // `hub` serves the writes and the reads that are not the cluster's state; `reader` the state.
  ClusterSyncer(SyncerOptions options, kube::Client& hub, HubReader& reader, TargetClients& targets,
                Clock& clock, prometheus::Registry& registry);

  // Errors are failures to read the hub or store the status (the request must be retried);
  // apply failures on the target are recorded in the status and reported in the outcome.
  // `fence` (see set_applier.h) is checked before every write, to the target or the hub; its
  // first call, on the caller's thread once the plan needs a write and the cluster has its
  // ClusterSync, takes the cluster's claim (cluster_lease.h's ClusterClaim), which is also what
  // writes its ClusterSyncLease. Without a fence nothing claims the cluster and its
  // ClusterSyncLease is not written.
  Result<SyncOutcome> Sync(const SyncRequest& request, const SyncFence& fence = nullptr);

  RequestLimiter::Stats limiter_stats() const { return limiter_.stats(); }

 private:
  Result<SyncOutcome> SyncOnce(const SyncRequest& request, const SyncFence& fence);
  // The cluster a sync runs its steps on (step 3).
  struct Scene {
    const SyncRequest& request;
    const hive::ClusterDeployment& cd;
    const SyncFence& fence;
  };
  // Step 3: runs the steps through `target` (none for a fake cluster), fills in their outcomes
  // and the figures of `outcome`.
  Status Run(const Scene& scene, const std::optional<Target>& target, ClusterSteps& steps,
             SyncOutcome& outcome);
  // The cluster's client: the kept one (target_clients.h's Trusted) or one built from its admin
  // kubeconfig Secret, read now.
  Result<Target> OpenTarget(const SyncRequest& request, const hive::ClusterDeployment& cd);
  // Unavailable when the cluster answers nothing: its discovery of what `plan` applies (or, all
  // of that cached, GET /version) met only connection failures, timeouts or 5xx. Hive reads the
  // cluster's schema before it writes anything and writes nothing when that fails.
  Status TargetAnswers(const std::string& key, const Target& target, const SyncPlan& plan,
                       const ClusterState& state);
  // What the runs of one cluster share: its client (none for a fake cluster), the limiter, the
  // deadline, the fence, and the observers of this syncer's and Hive's metrics.
  TargetSession OpenSession(const Scene& scene, const std::optional<Target>& target);
  // Runs `plans` side by side where `waits_for` allows (at most options_.parallel_sync_sets at
  // once), and waits for all of them.
  std::vector<SetRunResult> RunAll(const TargetSession& session, std::vector<SetPlan> plans,
                                   std::vector<std::vector<size_t>> waits_for);
  // Step 4. `known`: the ClusterSync as the state had it (null: none), merged into first.
  // `stored_version`: the resourceVersion written (untouched when nothing needed writing);
  // `metas`: each outcome's set (null for removed ones), for Hive's metrics; `created`: set when
  // this call made the ClusterSync.
  Status StoreStatus(const hive::ClusterDeployment& cd, const std::vector<SetOutcome>& outcomes,
                     const std::vector<const hive::ObjectMeta*>& metas,
                     std::shared_ptr<const hive::ClusterSync> known, std::string& stored_version,
                     bool& created);
  // The cluster's ClusterSync, made now (owned by the ClusterDeployment, no status yet) or, when
  // another writer made it first, read; `created` is set when this call made it. The mirror
  // takes it in at once.
  Result<std::shared_ptr<const hive::ClusterSync>> MakeClusterSync(
      const hive::ClusterDeployment& cd, bool* created = nullptr);

  SyncerOptions options_;
  kube::Client& hub_;
  HubReader& reader_;
  TargetClients& targets_;
  HubInputs inputs_;
  Clock& clock_;
  RequestLimiter limiter_;
  HiveMetrics hive_metrics_;
  prometheus::Family<prometheus::Counter>& applied_;
  prometheus::Counter& applied_success_;  // applied_'s two series, looked up once
  prometheus::Counter& applied_failure_;
  prometheus::Histogram& apply_seconds_;
};

}  // namespace syncbus::consumer
