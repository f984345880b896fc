// ClusterSyncer: processes one sync request end to end — reads the cluster's ClusterDeployment,
// applicable SyncSets/SelectorSyncSets and admin kubeconfig fresh from the hub, applies the sets
// that need it to the target cluster (SyncSets then SelectorSyncSets by name; each set's
// resources in order, a failure stops the rest of that set; different sets in parallel), then
// stores the ClusterSync status (and the ClusterSyncLease after a full reapply). Returns only
// once the status is stored, so the caller may ack. Thread-safe: Sync() may run concurrently
// for different clusters; the caller keeps one cluster on one thread at a time.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "common/clock.h"
#include "common/hive/types.h"
#include "common/kube/client.h"
#include "common/sync_message.h"
#include "consumer/status_builder.h"
#include "consumer/target_clients.h"

namespace syncbus::consumer {

struct SyncerOptions {
  std::string field_manager = "syncbus";
  int parallel_sync_sets = 8;
};

struct SyncOutcome {
  enum class Kind {
    kSynced,        // sets applied (possibly with failures, see failed_sets) and status stored
    kUpToDate,      // nothing needed: no target traffic (duplicate or stale request)
    kSkipped,       // cluster gone, paused, deleting, not installed or unreachable
  };
  Kind kind = Kind::kSynced;
  std::string detail;                  // skip reason or failure summary
  int applies = 0;                     // successful object applies
  std::vector<std::string> failed_sets;
  bool transient = false;              // every failure may heal by itself (retry soon)
};

// Checked before every write (to a target or to the hub): a non-OK status means this process
// no longer owns the cluster (its per-cluster lease was lost) and must stop writing at once.
using SyncFence = std::function<Status()>;

class ClusterSyncer {
 public:
  ClusterSyncer(SyncerOptions options, kube::Client& hub, TargetClients& targets, Clock& clock,
                prometheus::Registry& registry);

  // Errors are failures to read the hub or store the status (the request must be retried);
  // apply failures on the target are recorded in the status and reported in the outcome.
  Result<SyncOutcome> Sync(const SyncRequest& request, const SyncFence& fence = nullptr);

 private:
  struct SetWork {
    SetKind kind;
    std::string name;
    int64_t generation;
    const hive::SyncSetCommonSpec* spec;
    bool needs_apply;
  };
  struct SetResult {
    bool success = true;
    bool transient = true;
    int applies = 0;
    std::string failure;
    std::vector<hive::SyncResourceReference> applied;
  };

  SetResult ApplySet(const SetWork& set, const Target& target, const SyncFence& fence);
  Status StoreStatus(const hive::ClusterDeployment& cd, const std::vector<SetOutcome>& outcomes);
  Status RenewLease(const hive::ClusterDeployment& cd);

  SyncerOptions options_;
  kube::Client& hub_;
  TargetClients& targets_;
  Clock& clock_;
  prometheus::Family<prometheus::Counter>& applied_;
  prometheus::Histogram& apply_seconds_;
};

}  // namespace syncbus::consumer
