#include "publisher/rollout_decision.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/time_format.h"

namespace syncbus::publisher {
namespace {

using rollout::Phase;
using rollout::RolloutSpec;
using rollout::RolloutState;

// How long since `since` (RFC 3339); nullopt when unreadable or empty.
std::optional<std::chrono::milliseconds> Since(const std::string& since, WallTime now) {
  auto t = ParseRfc3339(since);
  if (!t.ok()) return std::nullopt;
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - *t);
}

std::string Plural(size_t n, const char* one) {
  return fmt::format("{} {}{}", n, one, n == 1 ? "" : "s");
}

RolloutStep Start(const GatedSet& set, const RolloutSpec& spec,
                  const std::vector<RolloutCluster>& clusters, WallTime now) {
  std::vector<std::string> keys;
  keys.reserve(clusters.size());
  for (const RolloutCluster& c : clusters) keys.push_back(c.cd->meta.Key());
  RolloutState state;
  state.generation = set.generation;
  state.bounds = rollout::BoundsFor(spec, keys);
  state.waves = spec.by_selector ? static_cast<int>(spec.waves.size()) + 1
                                 : static_cast<int>(state.bounds.size());
  state.wave = 1;
  state.wave_started_at = FormatRfc3339(now);
  RolloutStep step;
  step.event = RolloutEvent{
      false, "RolloutStarted",
      fmt::format("rolling out generation {} to {} in {}; wave 1 released ({})", set.generation,
                  Plural(clusters.size(), "cluster"), Plural(state.waves, "wave"),
                  Plural(TallyWave(spec, state, 1, clusters).clusters, "cluster"))};
  step.write = std::move(state);
  return step;
}

RolloutStep Halt(RolloutState state, std::string message,
                 std::vector<rollout::FailingCluster> failing) {
  if (failing.size() > rollout::kMaxFailingListed) failing.resize(rollout::kMaxFailingListed);
  state.phase = Phase::kHalted;
  state.message = std::move(message);
  state.failing = std::move(failing);
  state.healthy_since.clear();
  RolloutStep step;
  std::string detail = state.message;
  if (!state.failing.empty()) {
    detail += "; " + state.failing.front().cluster + ": " + state.failing.front().message;
  }
  step.event = RolloutEvent{true, "RolloutHalted", std::move(detail)};
  step.write = std::move(state);
  return step;
}

RolloutStep Advance(RolloutState state, WallTime now) {
  RolloutStep step;
  state.healthy_since.clear();
  if (state.wave >= state.waves) {
    state.phase = Phase::kComplete;
    state.wave = state.waves;
    step.event = RolloutEvent{false, "RolloutComplete",
                              fmt::format("generation {} released to every wave ({})",
                                          state.generation, Plural(state.waves, "wave"))};
  } else {
    ++state.wave;
    state.wave_started_at = FormatRfc3339(now);
    step.event = RolloutEvent{false, "RolloutWaveReleased",
                              fmt::format("wave {} of {} released (generation {})", state.wave,
                                          state.waves, state.generation)};
  }
  step.write = std::move(state);
  return step;
}

// Judges the wave released last of a Progressing rollout.
RolloutStep Judge(const RolloutSpec& spec, const RolloutState& state,
                  const std::vector<RolloutCluster>& clusters, WallTime now) {
  const WaveTally tally = TallyWave(spec, state, state.wave, clusters);
  const int64_t budget = spec.BudgetOf(state.wave).For(tally.clusters);
  const std::string wave = fmt::format("wave {} of {}", state.wave, state.waves);
  if (static_cast<int64_t>(tally.failing.size()) > budget) {
    return Halt(state,
                fmt::format("{}: {} of {} failed; the wave tolerates {}", wave,
                            tally.failing.size(), Plural(tally.clusters, "cluster"), budget),
                tally.failing);
  }
  if (!tally.pending.empty()) {
    auto running = Since(state.wave_started_at, now);
    if (running && *running > spec.progress_deadline) {
      std::vector<rollout::FailingCluster> late;
      for (const std::string& key : tally.pending) {
        late.push_back({key, fmt::format("not synced at generation {}", state.generation)});
        if (late.size() == rollout::kMaxFailingListed) break;
      }
      return Halt(state,
                  fmt::format("{}: {} of {} not synced within the progress deadline {}", wave,
                              tally.pending.size(), Plural(tally.clusters, "cluster"),
                              FormatDuration(spec.progress_deadline)),
                  std::move(late));
    }
    return {};
  }
  if (tally.clusters == 0 || spec.healthy_for.count() == 0) return Advance(state, now);
  auto healthy = Since(state.healthy_since, now);
  if (!healthy) {
    RolloutState next = state;
    next.healthy_since = FormatRfc3339(now);
    RolloutStep step;
    step.write = std::move(next);
    return step;
  }
  if (*healthy >= spec.healthy_for) return Advance(state, now);
  return {};
}

}  // namespace

WaveTally TallyWave(const RolloutSpec& spec, const RolloutState& state, int wave,
                    const std::vector<RolloutCluster>& clusters) {
  WaveTally tally;
  for (const RolloutCluster& c : clusters) {
    if (rollout::WaveOf(spec, state, *c.cd) != wave) continue;
    if (!c.cd->SkipReason().empty()) {
      ++tally.skipped;
      continue;
    }
    ++tally.clusters;
    const std::string key = c.cd->meta.Key();
    if (c.entry == nullptr || c.entry->observed_generation < state.generation) {
      tally.pending.push_back(key);
      continue;
    }
    ++tally.done;
    if (c.entry->result == hive::SyncResult::kFailure) {
      tally.failing.push_back({key, std::string(c.entry->failure_message.view())});
    }
  }
  std::sort(tally.pending.begin(), tally.pending.end());
  std::sort(tally.failing.begin(), tally.failing.end(),
            [](const auto& a, const auto& b) { return a.cluster < b.cluster; });
  return tally;
}

bool RolloutActive(const GatedSet& set) {
  const auto& r = set.rollout;
  if (!r.state || r.state->generation != set.generation) return true;  // to start
  if (r.spec && r.state->wave == 0) return true;  // a spec that could not be read, now mended
  return r.state->phase == Phase::kProgressing;
}

RolloutStep DecideRollout(const GatedSet& set, const std::vector<RolloutCluster>& clusters,
                          WallTime now) {
  const rollout::SetRollout& r = set.rollout;
  if (!r.gated || !RolloutActive(set)) return {};
  const bool current = r.state && r.state->generation == set.generation;
  if (!r.spec) {
    if (current && r.state->phase == Phase::kHalted && r.state->wave == 0) return {};
    RolloutState halted;
    halted.generation = set.generation;
    return Halt(halted, "cannot roll out: " + r.spec_error, {});
  }
  if (!current || r.state->wave == 0) return Start(set, *r.spec, clusters, now);
  return Judge(*r.spec, *r.state, clusters, now);
}

}  // namespace syncbus::publisher
