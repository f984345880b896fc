// Which clusters a set's generation is released to, from the set's rollout annotations
// (rollout.h) alone, so that publisher, consumers and syncbusctl agree without asking each other.
// A set without syncbus.io/rollout is not gated (Hive's behaviour). A gated set is held back from
// a cluster — neither applied, reapplied nor removed there, its ClusterSync entry kept as it is —
// until the rollout state for the set's current generation releases the cluster's wave; with an
// unreadable spec, or no state for the current generation yet, it is held back from every cluster.
// Pure functions; thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/bus/rollout.h"
#include "common/hive/desired_state.h"
#include "common/hive/types.h"

namespace syncbus::rollout {

enum class Release { kUngated, kReleased, kHeld };

// The set's rollout, as its annotations say.
struct SetRollout {
  bool gated = false;                 // syncbus.io/rollout is present
  std::optional<RolloutSpec> spec;    // when gated and readable
  std::string spec_error;             // when gated and unreadable: why
  std::optional<RolloutState> state;  // a readable syncbus.io/rollout-state, if any
};
SetRollout RolloutOf(const hive::ObjectMeta& set);

// The wave (1-based) a cluster belongs to in `state`'s rollout of `spec`.
int WaveOf(const RolloutSpec& spec, const RolloutState& state, const hive::ClusterDeployment& cd);

// Whether the generation `set_generation` of a set with `rollout` is released to `cd`.
Release ReleaseOf(const SetRollout& rollout, int64_t set_generation,
                  const hive::ClusterDeployment& cd);
Release ReleaseOf(const hive::ObjectMeta& set, const hive::ClusterDeployment& cd);

// Takes out of `sync_sets` and `selector_sync_sets` (a cluster's candidates) the sets held back
// from `cd`, and returns them (for hive::ComputeDesired's `held`).
std::vector<hive::DesiredSet> TakeHeld(
    const hive::ClusterDeployment& cd, std::vector<const hive::SyncSet*>& sync_sets,
    std::vector<const hive::SelectorSyncSet*>& selector_sync_sets);

// The bounds of a rollout by count or percentage over the set's clusters ("namespace/name"):
// bound k is the rank (RankOf) of the last cluster wave k takes; the last is the largest rank.
// Empty for a rollout by selector.
std::vector<uint64_t> BoundsFor(const RolloutSpec& spec, const std::vector<std::string>& clusters);

}  // namespace syncbus::rollout
