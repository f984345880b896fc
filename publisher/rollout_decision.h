// What the publisher's leader does next about one set's rollout in waves (common/bus/rollout.h),
// from the set's annotations and the clusters it applies to: start it (a generation it has no
// state for yet: wave 1, or a halt when the spec cannot be read), judge the wave released last
// (halt on too many failures or a missed deadline; record when it became healthy; release the
// next wave, or complete, once it stayed healthy long enough), or nothing (halted, aborted,
// complete, or waiting). Pure functions; thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/bus/rollout_release.h"
#include "common/clock.h"
#include "common/hive/desired_state.h"
#include "common/hive/types.h"
#include "publisher/sync_report.h"

namespace syncbus::publisher {

// A set with syncbus.io/rollout, as the hub has it.
struct GatedSet {
  hive::SetKind kind = hive::SetKind::kSyncSet;
  std::string ns;  // a SyncSet's
  std::string name;
  int64_t generation = 0;
  rollout::SetRollout rollout;
};

// A cluster the set applies to now: its ClusterDeployment and its ClusterSync's entry for the set
// (null: none).
struct RolloutCluster {
  const hive::ClusterDeployment* cd = nullptr;
  const ReportedSet* entry = nullptr;
};

// One wave, counted: its clusters (skipped ones apart), those done at the rollout's generation,
// and of those the failing ones.
struct WaveTally {
  size_t clusters = 0;  // not skipped
  size_t skipped = 0;
  size_t done = 0;                               // an entry at (at least) the generation
  std::vector<rollout::FailingCluster> failing;  // done with result Failure, by key
  std::vector<std::string> pending;              // not done, by key
};
WaveTally TallyWave(const rollout::RolloutSpec& spec, const rollout::RolloutState& state, int wave,
                    const std::vector<RolloutCluster>& clusters);

struct RolloutEvent {
  bool warning = false;
  std::string reason;  // RolloutStarted, RolloutWaveReleased, RolloutComplete, RolloutHalted
  std::string message;
};

struct RolloutStep {
  std::optional<rollout::RolloutState> write;  // the new state to write, if any
  std::optional<RolloutEvent> event;
};

RolloutStep DecideRollout(const GatedSet& set, const std::vector<RolloutCluster>& clusters,
                          WallTime now);

// Whether DecideRollout may do anything about `set` without new cluster facts: a state for the
// current generation that is not Progressing needs no look at its clusters.
bool RolloutActive(const GatedSet& set);

}  // namespace syncbus::publisher
