#include "common/bus/rollout.h"

#include <cmath>
#include <set>

#include <fmt/format.h>

#include "common/digest.h"
#include "common/time_format.h"

namespace syncbus::rollout {
namespace {

Status Invalid(const std::string& what) {
  return Status(Code::kInvalidArgument,
                "rollout annotation " + std::string(kSpecAnnotation) + ": " + what);
}

// "25%" -> 25; anything else is not a percentage.
std::optional<double> Percent(const Json& v) {
  if (!v.is_string()) return std::nullopt;
  const std::string& text = v.get_ref<const std::string&>();
  if (text.size() < 2 || text.back() != '%') return std::nullopt;
  try {
    size_t used = 0;
    double p = std::stod(text.substr(0, text.size() - 1), &used);
    if (used != text.size() - 1) return std::nullopt;
    return p;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

Result<FailureBudget> ParseBudget(const Json& v, const std::string& field) {
  FailureBudget budget;
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    budget.count = v.get<int64_t>();
    return budget;
  }
  if (auto p = Percent(v); p && *p >= 0 && *p <= 100) {
    budget.percent = *p;
    return budget;
  }
  return Invalid(field + " must be a count (0 or more) or a percentage (\"10%\"), not " + v.dump());
}

Result<std::chrono::milliseconds> ParseSpan(const Json& v, const std::string& field) {
  if (!v.is_string()) return Invalid(field + " must be a duration (\"10m\"), not " + v.dump());
  auto d = ParseGoDuration(v.get<std::string>());
  if (!d.ok() || d->count() < 0) {
    return Invalid(field + " must be a duration (\"10m\"), not " + v.dump());
  }
  return *d;
}

Result<WaveSpec> ParseWave(const Json& w, size_t index) {
  const std::string at = fmt::format("waves[{}]", index);
  if (!w.is_object()) return Invalid(at + " must be an object");
  WaveSpec wave;
  for (const auto& [key, v] : w.items()) {
    if (key == "clusters") {
      if (v.is_number_integer() && v.get<int64_t>() >= 1) {
        wave.clusters = v.get<int64_t>();
      } else if (auto p = Percent(v); p && *p > 0 && *p <= 100) {
        wave.percent = *p;
      } else {
        return Invalid(at +
                       ".clusters must be a count (1 or more) or a percentage (\"25%\"), not " +
                       v.dump());
      }
    } else if (key == "selector") {
      auto selector = hive::LabelSelector::FromJson(v);
      if (!selector.ok()) return Invalid(at + ".selector: " + selector.status().message());
      wave.selector = std::move(*selector);
    } else if (key == "maxFailures") {
      auto budget = ParseBudget(v, at + ".maxFailures");
      if (!budget.ok()) return budget.status();
      wave.max_failures = *budget;
    } else {
      return Invalid(at + " has an unknown field \"" + key +
                     "\" (known: clusters, selector, maxFailures)");
    }
  }
  const bool by_count = wave.clusters || wave.percent;
  if (by_count == wave.selector.has_value()) {
    return Invalid(at + " needs exactly one of clusters and selector");
  }
  return wave;
}

const char* const kPhaseNames[] = {"Progressing", "Halted", "Aborted", "Complete"};

}  // namespace

int64_t FailureBudget::For(size_t wave_clusters) const {
  if (!percent) return count;
  return static_cast<int64_t>(std::floor(static_cast<double>(wave_clusters) * *percent / 100.0));
}

FailureBudget RolloutSpec::BudgetOf(int wave) const {
  if (wave >= 1 && static_cast<size_t>(wave) <= waves.size() && waves[wave - 1].max_failures) {
    return *waves[wave - 1].max_failures;
  }
  return max_failures;
}

Result<RolloutSpec> ParseSpec(std::string_view annotation) {
  Json j = Json::parse(annotation, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Invalid("not a JSON object");
  RolloutSpec spec;
  bool has_waves = false;
  for (const auto& [key, v] : j.items()) {
    if (key == "waves") {
      if (!v.is_array() || v.empty()) return Invalid("waves must be a list of at least one wave");
      for (size_t i = 0; i < v.size(); ++i) {
        auto wave = ParseWave(v[i], i);
        if (!wave.ok()) return wave.status();
        spec.waves.push_back(std::move(*wave));
      }
      has_waves = true;
    } else if (key == "maxFailures") {
      auto budget = ParseBudget(v, "maxFailures");
      if (!budget.ok()) return budget.status();
      spec.max_failures = *budget;
    } else if (key == "healthyFor") {
      auto span = ParseSpan(v, "healthyFor");
      if (!span.ok()) return span.status();
      spec.healthy_for = *span;
    } else if (key == "progressDeadline") {
      auto span = ParseSpan(v, "progressDeadline");
      if (!span.ok()) return span.status();
      spec.progress_deadline = *span;
    } else {
      return Invalid("unknown field \"" + key +
                     "\" (known: waves, maxFailures, healthyFor, progressDeadline)");
    }
  }
  if (!has_waves) return Invalid("waves is missing");
  spec.by_selector = spec.waves.front().selector.has_value();
  for (const WaveSpec& w : spec.waves) {
    if (w.selector.has_value() != spec.by_selector) {
      return Invalid("waves mix clusters and selector; give every wave the same sort");
    }
  }
  if (spec.progress_deadline.count() == 0) return Invalid("progressDeadline must be above 0");
  return spec;
}

std::string_view PhaseName(Phase phase) {
  return kPhaseNames[static_cast<int>(phase)];
}

Result<RolloutState> ParseState(std::string_view annotation) {
  auto bad = [](const std::string& what) {
    return Status(Code::kInvalidArgument,
                  "rollout state " + std::string(kStateAnnotation) + ": " + what);
  };
  Json j = Json::parse(annotation, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  RolloutState s;
  try {
    s.generation = j.at("generation").get<int64_t>();
    s.wave = j.at("wave").get<int>();
    s.waves = j.at("waves").get<int>();
    const std::string phase = j.at("phase").get<std::string>();
    bool known = false;
    for (int i = 0; i < static_cast<int>(std::size(kPhaseNames)); ++i) {
      if (phase == kPhaseNames[i]) {
        s.phase = static_cast<Phase>(i);
        known = true;
      }
    }
    if (!known) return bad("unknown phase \"" + phase + "\"");
    for (const auto& b : j.value("bounds", Json::array())) {
      s.bounds.push_back(std::stoull(b.get<std::string>(), nullptr, 16));
    }
    s.wave_started_at = j.value("waveStartedAt", "");
    s.healthy_since = j.value("healthySince", "");
    s.message = j.value("message", "");
    for (const auto& f : j.value("failing", Json::array())) {
      s.failing.push_back({f.at("cluster").get<std::string>(), f.value("message", "")});
    }
  } catch (const std::exception& e) {
    return bad(e.what());
  }
  if (s.wave < 0 || s.waves < 0 || s.wave > s.waves) return bad("wave outside 0..waves");
  if (!s.bounds.empty() && static_cast<int>(s.bounds.size()) != s.waves) {
    return bad("bounds do not match waves");
  }
  return s;
}

std::string EncodeState(const RolloutState& s) {
  Json j = {{"generation", s.generation},
            {"wave", s.wave},
            {"waves", s.waves},
            {"phase", std::string(PhaseName(s.phase))}};
  if (!s.bounds.empty()) {
    Json bounds = Json::array();
    for (uint64_t b : s.bounds) bounds.push_back(fmt::format("{:016x}", b));
    j["bounds"] = std::move(bounds);
  }
  if (!s.wave_started_at.empty()) j["waveStartedAt"] = s.wave_started_at;
  if (!s.healthy_since.empty()) j["healthySince"] = s.healthy_since;
  if (!s.message.empty()) j["message"] = s.message;
  if (!s.failing.empty()) {
    Json failing = Json::array();
    for (const auto& f : s.failing)
      failing.push_back({{"cluster", f.cluster}, {"message", f.message}});
    j["failing"] = std::move(failing);
  }
  return j.dump();
}

uint64_t RankOf(std::string_view cluster_key) {
  return StableHash64("rollout-rank|" + std::string(cluster_key));
}

}  // namespace syncbus::rollout
