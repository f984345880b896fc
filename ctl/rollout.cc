#include "ctl/rollout.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/time_format.h"
#include "ctl/text_table.h"

namespace syncbus::ctl {
namespace {

constexpr size_t kFailuresShown = 10;

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// "TIME (AGE ago)", or "-".
std::string When(const std::string& rfc3339, WallTime now) {
  if (rfc3339.empty()) return "-";
  auto t = ParseRfc3339(rfc3339);
  if (!t.ok()) return rfc3339;
  return rfc3339 + " (" + FormatAge(std::chrono::duration_cast<std::chrono::seconds>(now - *t)) +
         " ago)";
}

std::string Takes(const rollout::RolloutSpec& spec, const Json& selectors, int wave) {
  if (wave < 1 || static_cast<size_t>(wave) > spec.waves.size()) return "the rest";
  const rollout::WaveSpec& w = spec.waves[static_cast<size_t>(wave - 1)];
  if (w.clusters) return fmt::format("{} cluster{}", *w.clusters, *w.clusters == 1 ? "" : "s");
  if (w.percent) return fmt::format("{}%", *w.percent);
  const Json& s = selectors.is_array() && selectors.size() >= static_cast<size_t>(wave)
                      ? selectors[static_cast<size_t>(wave - 1)]
                      : Json();
  return s.is_null() ? "selector" : s.dump();
}

}  // namespace

std::string SetRef::Ref() const {
  return kind == hive::SetKind::kSyncSet ? "syncset/" + ns + "/" + name : "selectorsyncset/" + name;
}

std::string SetRef::Describe() const {
  return kind == hive::SetKind::kSyncSet ? "SyncSet " + ns + "/" + name : "SelectorSyncSet " + name;
}

Result<SetRef> ParseSetRef(std::string_view text) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    size_t slash = text.find('/', start);
    parts.emplace_back(text.substr(start, slash == std::string_view::npos ? slash : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  const std::string kind = Lower(parts.front());
  const bool empty_part =
      std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); });
  SetRef ref;
  if ((kind == "syncset" || kind == "ss") && parts.size() == 3 && !empty_part) {
    ref.kind = hive::SetKind::kSyncSet;
    ref.ns = parts[1];
    ref.name = parts[2];
    return ref;
  }
  if ((kind == "selectorsyncset" || kind == "sss") && parts.size() == 2 && !empty_part) {
    ref.name = parts[1];
    return ref;
  }
  return InvalidArgument("set \"" + std::string(text) +
                         "\": write it as syncset/NAMESPACE/NAME (ss/...) or "
                         "selectorsyncset/NAME (sss/...)");
}

std::string RolloutView::Phase() const {
  if (!spec) return "Halted";
  if (!Current()) return "Starting";
  return std::string(rollout::PhaseName(state->phase));
}

std::string RolloutView::Message() const {
  if (!spec) return spec_error;
  if (!Current()) {
    std::string why = state ? "the state is for generation " + std::to_string(state->generation)
                      : state_error.empty() ? "no state yet"
                                            : "the state is unreadable (" + state_error + ")";
    return why + "; the publisher starts generation " + std::to_string(generation) + " at wave 1";
  }
  return state->message;
}

Json RolloutView::ToJson() const {
  Json waves_json = Json::array();
  for (const auto& w : waves) {
    Json failures = Json::array();
    for (const auto& f : w.failures)
      failures.push_back({{"cluster", f.cluster}, {"message", f.message}});
    waves_json.push_back({{"wave", w.wave},
                          {"takes", w.takes},
                          {"released", w.released},
                          {"maxFailures", w.max_failures},
                          {"clusters", w.clusters},
                          {"synced", w.synced},
                          {"failing", w.failing},
                          {"pending", w.pending},
                          {"skipped", w.skipped},
                          {"failingClusters", std::move(failures)}});
  }
  Json j = {{"set", set.Ref()},
            {"kind", set.kind == hive::SetKind::kSyncSet ? "SyncSet" : "SelectorSyncSet"},
            {"name", set.name},
            {"generation", generation},
            {"phase", Phase()},
            {"waves", std::move(waves_json)}};
  if (!set.ns.empty()) j["namespace"] = set.ns;
  if (std::string m = Message(); !m.empty()) j["message"] = m;
  if (spec) {
    j["healthyFor"] = FormatDuration(spec->healthy_for);
    j["progressDeadline"] = FormatDuration(spec->progress_deadline);
  }
  if (state) j["state"] = Json::parse(rollout::EncodeState(*state));
  if (!state_error.empty()) j["stateError"] = state_error;
  return j;
}

Result<RolloutViewBuilder> RolloutViewBuilder::Create(const SetRef& ref, const Json& set) {
  RolloutViewBuilder b;
  b.ref_ = ref;
  const hive::ObjectMeta* meta = nullptr;
  if (ref.kind == hive::SetKind::kSyncSet) {
    auto ss = hive::SyncSet::FromJson(set);
    if (!ss.ok()) return ss.status().Annotate("reading " + ref.Describe());
    b.ss_ = std::move(*ss);
    meta = &b.ss_->meta;
  } else {
    auto sss = hive::SelectorSyncSet::FromJson(set);
    if (!sss.ok()) return sss.status().Annotate("reading " + ref.Describe());
    b.sss_ = std::move(*sss);
    meta = &b.sss_->meta;
  }
  auto spec = meta->annotations.find(rollout::kSpecAnnotation);
  if (spec == meta->annotations.end()) {
    return NotFound(ref.Describe() + " has no " + rollout::kSpecAnnotation +
                    " annotation: it is not rolled out in waves (every cluster gets each "
                    "generation at once, as under Hive)");
  }
  RolloutView& v = b.view_;
  v.set = ref;
  v.generation = meta->generation;
  const rollout::SetRollout r = rollout::RolloutOf(*meta);
  v.spec = r.spec;
  v.spec_error = r.spec_error;
  v.state = r.state;
  if (auto state = meta->annotations.find(rollout::kStateAnnotation);
      state != meta->annotations.end() && !r.state) {
    v.state_error = rollout::ParseState(state->second).status().message();
  }
  Json written = Json::parse(spec->second, nullptr, false);
  b.wave_selectors_ = Json::array();
  if (written.is_object() && written.contains("waves") && written["waves"].is_array()) {
    for (const Json& w : written["waves"])
      b.wave_selectors_.push_back(w.is_object() ? w.value("selector", Json()) : Json());
  }
  return b;
}

void RolloutViewBuilder::AddClusterSync(const Json& cluster_sync) {
  auto cs = hive::ClusterSync::FromJson(cluster_sync);
  if (!cs.ok()) return;
  if (ref_.kind == hive::SetKind::kSyncSet && cs->meta.ns != ref_.ns) return;
  const auto& list =
      ref_.kind == hive::SetKind::kSyncSet ? cs->status.sync_sets : cs->status.selector_sync_sets;
  for (const auto& e : list) {
    if (e.name != ref_.name) continue;
    hive::SyncStatus entry = e;
    entry.resources_to_delete = {};
    entries_[cs->meta.Key()] = std::move(entry);
  }
}

void RolloutViewBuilder::AddCluster(const Json& cluster_deployment) {
  auto cd = hive::ClusterDeployment::FromJson(cluster_deployment);
  if (!cd.ok()) return;
  const bool applies = ss_ ? hive::AppliesTo(*ss_, *cd) : hive::AppliesTo(*sss_, *cd);
  if (!applies) return;
  std::string skip = cd->SkipReason();
  clusters_.push_back({std::move(*cd), std::move(skip)});
}

RolloutView RolloutViewBuilder::Finish() && {
  RolloutView v = std::move(view_);
  std::sort(clusters_.begin(), clusters_.end(),
            [](const Cluster& a, const Cluster& b) { return a.cd.meta.Key() < b.cd.meta.Key(); });
  if (!v.spec) return v;  // no waves to show: held back from every cluster
  // The waves of the rollout under way, or those the publisher would start with now.
  rollout::RolloutState state;
  if (v.Current()) {
    state = *v.state;
  } else {
    std::vector<std::string> keys;
    for (const Cluster& c : clusters_) keys.push_back(c.cd.meta.Key());
    state.generation = v.generation;
    state.bounds = rollout::BoundsFor(*v.spec, keys);
    state.waves = v.spec->by_selector ? static_cast<int>(v.spec->waves.size()) + 1
                                      : static_cast<int>(state.bounds.size());
  }
  std::vector<int> wave_of;
  int waves = state.waves;
  for (const Cluster& c : clusters_) {
    wave_of.push_back(rollout::WaveOf(*v.spec, state, c.cd));
    waves = std::max(waves, wave_of.back());
  }
  v.waves.resize(static_cast<size_t>(std::max(waves, 0)));
  for (int k = 1; k <= waves; ++k) {
    WaveView& w = v.waves[static_cast<size_t>(k - 1)];
    w.wave = k;
    w.takes = Takes(*v.spec, wave_selectors_, k);
    w.released = v.Current() && (state.phase == rollout::Phase::kComplete || k <= state.wave);
  }
  for (size_t i = 0; i < clusters_.size(); ++i) {
    const Cluster& c = clusters_[i];
    WaveView& w = v.waves[static_cast<size_t>(wave_of[i] - 1)];
    ++w.clusters;
    if (!c.skip_reason.empty()) {
      ++w.skipped;
      continue;
    }
    auto e = entries_.find(c.cd.meta.Key());
    // Done at the rollout's generation or a later one, as the publisher judges a wave.
    if (e == entries_.end() || e->second.observed_generation < state.generation) {
      ++w.pending;
    } else if (e->second.result == hive::SyncResult::kFailure) {
      ++w.failing;
      w.failures.push_back({c.cd.meta.Key(), e->second.failure_message});
    } else {
      ++w.synced;
    }
  }
  for (WaveView& w : v.waves) w.max_failures = v.spec->BudgetOf(w.wave).For(w.clusters);
  return v;
}

Result<RolloutView> ComputeRolloutView(const SetRef& ref, const Json& set,
                                       const std::vector<Json>& cluster_deployments,
                                       const std::vector<Json>& cluster_syncs) {
  auto b = RolloutViewBuilder::Create(ref, set);
  if (!b.ok()) return b.status();
  for (const Json& cs : cluster_syncs) b->AddClusterSync(cs);
  for (const Json& cd : cluster_deployments) b->AddCluster(cd);
  return std::move(*b).Finish();
}

std::string FormatRolloutView(const RolloutView& v, WallTime now, bool wide) {
  std::string out = "rollout:  " + v.set.Describe() + ", generation " +
                    std::to_string(v.generation) + "\nphase:    " + v.Phase();
  if (v.Current()) {
    out += " at wave " + std::to_string(v.state->wave) + " of " + std::to_string(v.state->waves);
  }
  out += "\n";
  if (std::string m = v.Message(); !m.empty()) out += "message:  " + m + "\n";
  // The clusters the publisher named when it halted (late ones too, which are not failing).
  if (v.Current()) {
    for (size_t i = 0; i < v.state->failing.size(); ++i) {
      const auto& f = v.state->failing[i];
      out += std::string(i == 0 ? "halted on:     " : "               ") + f.cluster + ": " +
             f.message + "\n";
    }
  }
  if (v.Current()) {
    out += "wave started:  " + When(v.state->wave_started_at, now) + "\n";
    out += "healthy since: " + When(v.state->healthy_since, now) + "\n";
  }
  if (v.spec) {
    out += "healthy for:   " + FormatDuration(v.spec->healthy_for) +
           " before the next wave; progress deadline " + FormatDuration(v.spec->progress_deadline) +
           " per wave\n";
  }
  if (v.waves.empty()) return out;
  std::vector<std::vector<std::string>> rows = {{"WAVE", "TAKES", "RELEASED", "CLUSTERS", "SYNCED",
                                                 "FAILING", "PENDING", "SKIPPED", "MAX-FAILURES"}};
  for (const WaveView& w : v.waves) {
    rows.push_back({std::to_string(w.wave), w.takes, w.released ? "yes" : "no",
                    std::to_string(w.clusters), std::to_string(w.synced), std::to_string(w.failing),
                    std::to_string(w.pending), std::to_string(w.skipped),
                    std::to_string(w.max_failures)});
  }
  out += "\n" + FormatTable(rows);
  std::vector<std::vector<std::string>> failing = {{"WAVE", "FAILING-CLUSTER", "MESSAGE"}};
  size_t more = 0;
  for (const WaveView& w : v.waves) {
    for (const auto& f : w.failures) {
      if (!wide && failing.size() > kFailuresShown) {
        ++more;
        continue;
      }
      failing.push_back({std::to_string(w.wave), f.cluster, f.message});
    }
  }
  if (failing.size() > 1) {
    out += "\n" + FormatTable(failing);
    if (more > 0)
      out += "+" + std::to_string(more) + " more failing clusters (-o wide lists all)\n";
  }
  return out;
}

const char* RolloutActionName(RolloutAction action) {
  return action == RolloutAction::kResume ? "resume" : "abort";
}

Result<rollout::RolloutState> NextState(const RolloutView& current, RolloutAction action,
                                        WallTime now) {
  const std::string what =
      std::string(RolloutActionName(action)) + " the rollout of " + current.set.Describe();
  if (!current.state) {
    return InvalidArgument(
        "cannot " + what + ": it has no state yet (" +
        (current.state_error.empty() ? "the publisher has not started it" : current.state_error) +
        ")");
  }
  if (!current.Current()) {
    return InvalidArgument("cannot " + what + ": its state is for generation " +
                           std::to_string(current.state->generation) + ", the set is at " +
                           std::to_string(current.generation) +
                           " (the publisher starts the new generation at wave 1)");
  }
  rollout::RolloutState next = *current.state;
  const rollout::Phase phase = next.phase;
  const std::string is = " it is " + std::string(rollout::PhaseName(phase));
  if (action == RolloutAction::kResume) {
    if (!current.spec) {
      return InvalidArgument("cannot " + what + ": its " + rollout::kSpecAnnotation +
                             " annotation is unreadable (" + current.spec_error +
                             "); correct the annotation, and the publisher starts again");
    }
    if (phase != rollout::Phase::kHalted && phase != rollout::Phase::kAborted) {
      return InvalidArgument("cannot " + what + ":" + is +
                             " (resume takes a rollout that is Halted or Aborted)");
    }
    next.phase = rollout::Phase::kProgressing;
    next.message.clear();
    next.failing.clear();
    next.healthy_since.clear();
    next.wave_started_at = FormatRfc3339(now);
    return next;
  }
  if (phase != rollout::Phase::kProgressing && phase != rollout::Phase::kHalted) {
    return InvalidArgument("cannot " + what + ":" + is +
                           " (abort takes a rollout that is Progressing or Halted)");
  }
  next.phase = rollout::Phase::kAborted;
  next.message = "aborted by syncbusctl at " + FormatRfc3339(now);
  return next;
}

std::string StatePatch(const rollout::RolloutState& state, const std::string& resource_version) {
  Json patch = {{"metadata",
                 {{"resourceVersion", resource_version},
                  {"annotations", {{rollout::kStateAnnotation, rollout::EncodeState(state)}}}}}};
  return patch.dump();
}

}  // namespace syncbus::ctl
