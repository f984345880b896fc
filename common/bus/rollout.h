// Rollouts in waves, opt-in per set: the annotation an operator writes on a SyncSet or a
// SelectorSyncSet (syncbus.io/rollout: which waves, the failures a wave tolerates, how long a wave
// must stay healthy) and the state the publisher's leader keeps beside it on the same object
// (syncbus.io/rollout-state: the generation it rolls out, the last wave released, halted or not).
// Publisher, consumers and syncbusctl read both from the hub, so they agree on which clusters a
// set's generation is released to (rollout_release.h). Pure value types and codecs;
// thread-compatible.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/hive/label_selector.h"
#include "common/json.h"
#include "common/status.h"

namespace syncbus::rollout {

inline constexpr char kSpecAnnotation[] = "syncbus.io/rollout";
inline constexpr char kStateAnnotation[] = "syncbus.io/rollout-state";

// How many failing clusters a wave tolerates: a count, or a percentage of the wave's clusters
// (rounded down).
struct FailureBudget {
  int64_t count = 0;
  std::optional<double> percent;
  int64_t For(size_t wave_clusters) const;
};

// One wave: a number of clusters, a percentage of the set's clusters (rounded up, at least one),
// or the clusters a label selector picks (those an earlier wave took aside). Every wave of a set
// is of one sort; clusters that no wave takes form one more wave at the end ("the rest"), which
// a rollout by count leaves out when the waves written take every cluster.
struct WaveSpec {
  std::optional<int64_t> clusters;
  std::optional<double> percent;
  std::optional<hive::LabelSelector> selector;
  std::optional<FailureBudget> max_failures;  // the set's when absent
};

struct RolloutSpec {
  std::vector<WaveSpec> waves;  // as written, without "the rest"
  bool by_selector = false;
  FailureBudget max_failures;  // per wave, default 0
  // How long a wave must stay done and within its budget before the next is released.
  std::chrono::milliseconds healthy_for{std::chrono::minutes(5)};
  // How long a wave may take to be done (every cluster of it synced) before the rollout halts.
  std::chrono::milliseconds progress_deadline{std::chrono::minutes(30)};

  FailureBudget BudgetOf(int wave) const;  // 1-based; "the rest" has the set's
};

// Parses the annotation's JSON, e.g.
//   {"waves": [{"clusters": 1}, {"clusters": "25%"}], "maxFailures": 0, "healthyFor": "10m"}
//   {"waves": [{"selector": {"matchLabels": {"ring": "canary"}}}], "maxFailures": "10%"}
// Errors say what is wrong in the operator's terms.
Result<RolloutSpec> ParseSpec(std::string_view annotation);

enum class Phase { kProgressing, kHalted, kAborted, kComplete };
std::string_view PhaseName(Phase phase);  // "Progressing", "Halted", "Aborted", "Complete"

struct FailingCluster {
  std::string cluster;  // "namespace/name"
  std::string message;
};

// What the publisher's leader records, and syncbusctl changes (resume, abort).
struct RolloutState {
  int64_t generation = 0;  // the set's generation this rollout releases
  int wave = 0;            // waves 1..wave are released; 0: none yet
  int waves = 0;           // how many waves the rollout has
  Phase phase = Phase::kProgressing;
  // Waves by count or percentage: wave k takes the clusters whose rank (RankOf) is above
  // bounds[k-2] and at most bounds[k-1]; the last bound is the largest rank there is, so a
  // cluster that appears later has a wave too. Empty for waves by selector.
  std::vector<uint64_t> bounds;
  std::string wave_started_at;          // RFC 3339: when `wave` was released (or resumed)
  std::string healthy_since;            // RFC 3339: since when `wave` is done and within its budget
  std::string message;                  // why it halted, in a sentence
  std::vector<FailingCluster> failing;  // the failing clusters of the halted wave (the first few)
};

inline constexpr size_t kMaxFailingListed = 10;

Result<RolloutState> ParseState(std::string_view annotation);
std::string EncodeState(const RolloutState& state);

// The stable rank of a cluster ("namespace/name") in every count or percentage rollout: the same
// clusters go first for every set, so a canary cluster is every set's canary.
uint64_t RankOf(std::string_view cluster_key);

}  // namespace syncbus::rollout
