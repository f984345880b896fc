// SyncEventSink: what the consumer tells the hub's users about a cluster's syncs, as Kubernetes
// Events on its ClusterSync (`kubectl describe clustersync`): a sync failed and will be retried,
// a request was parked in the dead-letter queue, a sync succeeded after failures. Never on a
// sync that succeeds like the one before it, so steady state costs the hub no Event write.
// The delivery loop calls Record() on its session thread: implementations must not block.
#pragma once

#include <optional>
#include <string>

#include "common/bus/sync_message.h"
#include "common/status.h"
#include "consumer/cluster_syncer.h"

namespace syncbus::consumer {

struct SyncEvent {
  enum class Kind {
    kFailed,     // Warning SyncFailed: an attempt failed; the request waits in a delay queue
    kParked,     // Warning SyncParked: the request went to the dead-letter queue
    kRecovered,  // Normal SyncRecovered: every set applied after a failure
  };
  Kind kind = Kind::kFailed;
  std::string ns, name;  // the cluster
  std::string message;   // human readable, without credentials
};

// "Warning"/"Normal" and the Event's reason of `kind`.
const char* SyncEventType(SyncEvent::Kind kind);
const char* SyncEventReason(SyncEvent::Kind kind);

// The Event of a failed attempt `attempt` (1 for a fresh request) of `request`: kFailed, or kParked
// when the request goes to the dead-letter queue. Its message: each failing set with its error, or
// the error that stopped the sync, without credentials. Repeats of one failure carry one message,
// so the recorder counts them on one Event.
SyncEvent FailureEvent(const SyncRequest& request, const Result<SyncOutcome>& outcome, bool parked,
                       int attempt);
// kParked for a request parked before it ran (`why`: it ended unsettled too often).
SyncEvent PoisonEvent(const SyncRequest& request, const std::string& why);
// kRecovered for a sync that stored its sets after failures (its ClusterSync showed a failing
// set, or earlier attempts of the request failed); nullopt for any other outcome.
std::optional<SyncEvent> RecoveryEvent(const SyncRequest& request, const SyncOutcome& outcome,
                                       int attempt);

class SyncEventSink {
 public:
  virtual ~SyncEventSink() = default;
  virtual void Record(SyncEvent event) = 0;
};

}  // namespace syncbus::consumer
