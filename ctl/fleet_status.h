// `syncbusctl status`: the fleet at a glance, from three sources — the hub (what each cluster's
// ClusterSync reports against its sets' generations), the trace stream (where each cluster's
// newest request is) and the dead-letter index (what syncbus.dead holds; authoritative for
// "parked").
// Each cluster lands in exactly one state, the first that applies:
//   skipped   the hub says nothing will be applied (paused, deleting, not installed, unreachable)
//   parked    a request of the cluster is in the dead-letter queue
//   in-flight its newest request is on a consumer
//   retrying  its newest request waits in a retry tier
//   pending   its newest request is queued on a lane, or the hub shows it behind with no request
//             seen in the trace window (the publisher has not decided yet, or the window is short,
//             or a set's rollout in waves holds its new generation back from the cluster)
//   failed    the hub reports a set failing at its current generation
//   synced    every applicable set at its current generation with Success
// Beside the states, the sets rolled out in waves: each with its phase and wave, a halted one with
// its message and failing clusters.
// Pure functions over what the command read; thread-compatible.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/bus/trace_event.h"
#include "common/clock.h"
#include "common/json.h"
#include "ctl/dead_letters.h"
#include "ctl/fleet_progress.h"
#include "ctl/request_timeline.h"

namespace syncbus::ctl {

enum class FleetState { kSynced, kPending, kInFlight, kRetrying, kParked, kFailed, kSkipped };
inline constexpr FleetState kFleetStates[] = {
    FleetState::kSynced, FleetState::kPending, FleetState::kInFlight, FleetState::kRetrying,
    FleetState::kParked, FleetState::kFailed,  FleetState::kSkipped};
const char* FleetStateName(
    FleetState state);  // synced, pending, in-flight, retrying, parked, failed, skipped

struct ClusterStatus {
  std::string key;
  FleetState state = FleetState::kPending;
  WallTime since{};    // how long it has been in this state (epoch = unknown)
  std::string detail;  // queue, consumer, tier, skip or failure reason
};

struct StateSummary {
  size_t count = 0;
  std::string oldest;  // the cluster longest in this state
  WallTime oldest_since{};
  std::map<std::string, size_t>
      breakdown;  // retrying: by tier; skipped: by reason; parked: by reason
};

struct FleetStatus {
  std::vector<ClusterStatus> clusters;  // sorted by key
  std::map<FleetState, StateSummary> states;
  std::map<std::string, uint32_t> queues;  // ready messages per queue
  size_t trace_events = 0;
  WallTime trace_since{};
  std::vector<RolloutSummary> rollouts;  // as FleetProgress lists them

  Json ToJson(WallTime now, bool with_clusters) const;
};

// One cluster's state from the hub's view and its newest request's position.
ClusterStatus ClusterStateOf(const ClusterHubState& hub, const RequestPosition& position);

// `trace` in time order (any clusters); `parked` as the dead-letter index lists it; `queues` the
// ready messages per queue, read after both. A request the trace leaves queued on a queue that
// was empty since is not there: its later events are missing (a trace is diagnostics and can
// lose some), so the hub's view decides.
FleetStatus ComputeFleetStatus(const FleetProgress& hub, const std::vector<TraceEvent>& trace,
                               const std::vector<DeadLetter>& parked,
                               std::map<std::string, uint32_t> queues = {});

// STATE CLUSTERS OLDEST SINCE DETAIL, then the rollouts (SET PHASE WAVE HELD MESSAGE, with the
// failing clusters of a halted one), the queue depths and the trace window.
std::string FormatFleetStatus(const FleetStatus& status, WallTime now);

// One cluster: its request's position, lease, and sets.
struct ClusterReport {
  std::string key;
  std::string skip_reason;
  FleetState state = FleetState::kPending;
  RequestPosition position;
  std::string lease_holder;   // "" = none
  std::string lease_renewed;  // RFC 3339
  int lease_seconds = 0;
  // The holder stored the cluster's status after taking the lease (ClusterSync newer than the
  // Lease): that write gave the lease back (consumer.clusterLease.releaseByStatus).
  bool lease_released_by_status = false;
  std::vector<SetState> sets;
  std::vector<TraceEvent> recent;  // its events in the trace window

  Json ToJson(WallTime now) const;
};
std::string FormatClusterReport(const ClusterReport& report, WallTime now);

}  // namespace syncbus::ctl
