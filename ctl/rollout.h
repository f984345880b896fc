// `syncbusctl rollout status|resume|abort SET`: a set's rollout in waves as the hub shows it (per
// wave its clusters, released or not, synced at the rollout's generation, failing, pending,
// skipped), computed from listed objects with the daemons' own rules (common/bus/rollout_release.h)
// so that it agrees with what the publisher releases, and the state changes an operator makes
// (resume, abort). Pure functions and a builder fed page by page; thread-compatible.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/bus/rollout_release.h"
#include "common/clock.h"
#include "common/hive/desired_state.h"
#include "common/hive/types.h"
#include "common/json.h"
#include "common/status.h"

namespace syncbus::ctl {

// A set as the command line names it: syncset/NAMESPACE/NAME (ss/...) or selectorsyncset/NAME
// (sss/...).
struct SetRef {
  hive::SetKind kind = hive::SetKind::kSelectorSyncSet;
  std::string ns;  // SyncSet only
  std::string name;

  std::string Ref() const;       // "syncset/NAMESPACE/NAME", "selectorsyncset/NAME"
  std::string Describe() const;  // "SyncSet NAMESPACE/NAME", "SelectorSyncSet NAME"
};
// kInvalidArgument says how to write it.
Result<SetRef> ParseSetRef(std::string_view text);

struct WaveView {
  int wave = 0;       // 1-based
  std::string takes;  // "1 cluster", "25%", the selector's JSON, "the rest"
  bool released = false;
  int64_t max_failures = 0;  // the wave's budget for its clusters now
  size_t clusters = 0, synced = 0, failing = 0, pending = 0, skipped = 0;
  std::vector<rollout::FailingCluster> failures;  // its failing clusters, sorted
};

struct RolloutView {
  SetRef set;
  int64_t generation = 0;  // the set's current generation
  std::optional<rollout::RolloutSpec> spec;
  std::string spec_error;  // unreadable syncbus.io/rollout: why
  std::optional<rollout::RolloutState> state;
  std::string state_error;  // syncbus.io/rollout-state present but unreadable: why
  std::vector<WaveView> waves;

  // The state is for the set's current generation (otherwise the publisher has yet to start it).
  bool Current() const { return state && state->generation == generation; }
  // Progressing, Halted, Aborted, Complete, or Starting (no state for this generation yet);
  // Halted with an unreadable annotation.
  std::string Phase() const;
  std::string Message() const;
  Json ToJson() const;
};

// Feeds a set's clusters and their ClusterSyncs (the ClusterSyncs first) into its RolloutView.
class RolloutViewBuilder {
 public:
  // `set`: the SyncSet or SelectorSyncSet as read from the hub. kInvalidArgument when it cannot
  // be read, kNotFound (saying so) when it has no syncbus.io/rollout annotation.
  static Result<RolloutViewBuilder> Create(const SetRef& ref, const Json& set);

  void AddClusterSync(const Json& cluster_sync);
  // A ClusterDeployment: counted when the set applies to it.
  void AddCluster(const Json& cluster_deployment);
  RolloutView Finish() &&;

 private:
  struct Cluster {
    hive::ClusterDeployment cd;
    std::string skip_reason;
  };
  RolloutViewBuilder() = default;

  SetRef ref_;
  std::optional<hive::SyncSet> ss_;
  std::optional<hive::SelectorSyncSet> sss_;
  Json wave_selectors_;  // the annotation's waves[].selector, for display
  RolloutView view_;
  std::map<std::string, hive::SyncStatus> entries_;  // cluster "ns/name" -> the set's entry
  std::vector<Cluster> clusters_;
};

// The view of `set`'s rollout over `cluster_deployments` and `cluster_syncs` (any order).
Result<RolloutView> ComputeRolloutView(const SetRef& ref, const Json& set,
                                       const std::vector<Json>& cluster_deployments,
                                       const std::vector<Json>& cluster_syncs);

// The table `rollout status` prints: the rollout's phase, wave, times, message and the clusters a
// halt named, a row per wave, then the failing clusters of the released waves with their messages
// (all with `wide`, else the first 10).
std::string FormatRolloutView(const RolloutView& view, WallTime now, bool wide);

enum class RolloutAction { kResume, kAbort };
const char* RolloutActionName(RolloutAction action);  // "resume", "abort"

// The state `action` writes over the set's `current` one at `now`, or why the rollout does not
// allow it (kInvalidArgument): resume from Halted or Aborted (phase Progressing, message, failing
// and healthySince cleared, waveStartedAt now: the deadline starts again); abort from Progressing
// or Halted (phase Aborted, "aborted by syncbusctl at TIME"). A state that is not for the set's
// current generation, or a set whose annotation is unreadable (resume), is refused too.
Result<rollout::RolloutState> NextState(const RolloutView& current, RolloutAction action,
                                        WallTime now);

// The JSON merge patch that writes `state` on a set read at `resource_version`: conditional, so
// that it fails with 409 Conflict when the publisher's leader wrote the set meanwhile.
std::string StatePatch(const rollout::RolloutState& state, const std::string& resource_version);

}  // namespace syncbus::ctl
