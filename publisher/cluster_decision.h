// What the publisher does about one cluster in a round. From the cluster's view of the hub
// (hub_snapshot.h), what the ledger knows of it (sync_ledger.h) and how the round met it (a
// start-up round, a bulk edit, the outstanding cap), DecideCluster says the cluster's state and
// whether to send a request now, leave it to the request outstanding (coalesce: latest wins),
// leave it to the consumer's retries, or defer it; and for a request, its lane, reason and
// whether it is a full reapply. Pure functions; thread-compatible.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "common/bus/sync_message.h"
#include "common/bus/sync_reason.h"
#include "common/bus/topology.h"
#include "common/clock.h"
#include "publisher/hub_snapshot.h"
#include "publisher/sync_decision.h"
#include "publisher/sync_ledger.h"

namespace syncbus::publisher {

enum class ClusterAction {
  kNone,            // in sync or skipped: nothing to send, and nothing outstanding any more
  kCoalesce,        // the request outstanding will make the consumer read the newest state
  kLeaveToRetries,  // failing, published within the timeout: the consumer's retries own it
  kDefer,           // resync work beyond the outstanding cap: it waits as pending
  kSend,
};

// What the ledger knows of the cluster, once a processed request has been cleared.
struct ClusterFacts {
  const OutstandingRequest* outstanding = nullptr;  // null: none
  std::optional<SteadyTime> last_published;
  // The source-Secret versions the cluster runs; null for a skipped cluster (not looked at).
  const hive::SecretVersions* applied_secrets = nullptr;
};

// How the round meets the cluster.
struct RoundFacts {
  bool startup = false;      // start-up work: a start-up round, or left pending by one
  bool bulk = false;         // dirty by a bulk edit (or deferred as one), by no single edit
  bool cap_reached = false;  // outstanding requests, this round's new ones included, at the cap
  WallTime now_wall;
  SteadyTime now;
};

struct DecisionPolicy {
  ReapplyPolicy reapply;
  std::chrono::milliseconds outstanding_timeout{std::chrono::minutes(30)};
};

struct ClusterDecision {
  ClusterState state = ClusterState::kInSync;
  ClusterAction action = ClusterAction::kNone;
  // kSend and kDefer: a bulk edit's change (resync lane; stays bulk while deferred).
  bool bulk_change = false;
  // kSend:
  SyncReason reason = SyncReason::kStartup;
  amqp::Lane lane = amqp::Lane::kChange;
  bool full_reapply = false;
  bool promote = false;  // a change overtaking the cluster's request queued on the resync lane
};

// For cluster `key` ("namespace/name"), which exists (view.cd).
ClusterDecision DecideCluster(const std::string& key, const ClusterView& view,
                              const ClusterFacts& cluster, const RoundFacts& round,
                              const DecisionPolicy& policy);

// Whether the outstanding request has been processed: the ClusterSync shows its snapshot
// processed, and for a full reapply the lease was renewed at or after the publish.
bool RequestProcessed(const OutstandingRequest& request, const ClusterView& view);

// When the cluster's next full reapply is due; nullopt for a deleted or skipped cluster, or one
// never applied (the decision asks for a sync anyway).
std::optional<WallTime> NextReapply(const std::string& key, const ClusterView& view,
                                    const ReapplyPolicy& policy);

// The source-Secret versions a cluster seen for the first time is assumed to run: the current
// ones, unless a Secret was written after its last full reapply (while no publisher watched).
hive::SecretVersions AssumedAppliedSecrets(const ClusterView& view);

// The request a kSend decision publishes for cluster `key` ("namespace/name"): its desired
// `revision`, how far the cache had got (`seen`) and its kubeconfig Secret's version, as the
// cluster's view had them.
SyncRequest RequestFor(const std::string& key, const std::string& revision, const HubVersions& seen,
                       const std::string& kubeconfig_version, const ClusterDecision& decision,
                       WallTime now);

}  // namespace syncbus::publisher
