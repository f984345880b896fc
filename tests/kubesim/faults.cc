// Fault settings, their JSON form, and the per-request draw.
#include "tests/kubesim/faults.h"

#include <cmath>

#include "common/random_impl.h"

namespace syncbus::kubesim {
namespace {

bool IsRate(double r) {
  return std::isfinite(r) && r >= 0 && r <= 1;
}

// FNV-1a: a stable per-cluster offset for the random streams.
uint64_t HashName(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

Result<double> NumberField(const Json& json, const char* key, double fallback) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) return fallback;
  if (!it->is_number()) return InvalidArgument(std::string(key) + " must be a number");
  return it->get<double>();
}

}  // namespace

Status FaultSpec::Validate() const {
  if (has_latency()) {
    auto fitted = LognormalLatency::Fit(latency_p50_ms, latency_p99_ms);
    if (!fitted.ok()) return fitted.status();
  }
  const std::pair<const char*, double> rates[] = {{"errorRate", error_rate},
                                                  {"throttleRate", throttle_rate},
                                                  {"timeoutRate", timeout_rate},
                                                  {"dropRate", drop_rate}};
  double total = 0;
  for (const auto& [name, rate] : rates) {
    if (!IsRate(rate)) return InvalidArgument(std::string(name) + " must be within [0, 1]");
    total += rate;
  }
  if (total > 1 + 1e-9) return InvalidArgument("fault rates add up to more than 1");
  if (retry_after_seconds < 0) return InvalidArgument("retryAfterSeconds must not be negative");
  return Status::Ok();
}

Result<FaultSpec> FaultSpec::FromJson(const Json& json) {
  if (!json.is_object()) return InvalidArgument("fault settings must be a JSON object");
  FaultSpec spec;
  if (auto it = json.find("latency"); it != json.end() && !it->is_null()) {
    if (!it->is_object()) return InvalidArgument("latency must be an object {p50Ms, p99Ms}");
    auto p50 = NumberField(*it, "p50Ms", 0);
    if (!p50.ok()) return p50.status();
    auto p99 = NumberField(*it, "p99Ms", *p50);
    if (!p99.ok()) return p99.status();
    spec.latency_p50_ms = *p50;
    spec.latency_p99_ms = *p99;
  }
  struct Rate {
    const char* key;
    double* field;
  };
  for (Rate r : {Rate{"errorRate", &spec.error_rate}, Rate{"throttleRate", &spec.throttle_rate},
                 Rate{"timeoutRate", &spec.timeout_rate}, Rate{"dropRate", &spec.drop_rate}}) {
    auto value = NumberField(json, r.key, 0);
    if (!value.ok()) return value.status();
    *r.field = *value;
  }
  auto retry = NumberField(json, "retryAfterSeconds", spec.retry_after_seconds);
  if (!retry.ok()) return retry.status();
  spec.retry_after_seconds = static_cast<int>(std::lround(*retry));
  SYNCBUS_RETURN_IF_ERROR(spec.Validate());
  return spec;
}

Json FaultSpec::ToJson() const {
  Json json = {{"errorRate", error_rate},
               {"throttleRate", throttle_rate},
               {"retryAfterSeconds", retry_after_seconds},
               {"timeoutRate", timeout_rate},
               {"dropRate", drop_rate}};
  json["latency"] =
      has_latency() ? Json{{"p50Ms", latency_p50_ms}, {"p99Ms", latency_p99_ms}} : Json(nullptr);
  return json;
}

const char* FaultActionName(FaultAction action) {
  switch (action) {
    case FaultAction::kNone: return "none";
    case FaultAction::kError500: return "error500";
    case FaultAction::kError503: return "error503";
    case FaultAction::kThrottle: return "throttle";
    case FaultAction::kTimeout: return "timeout";
    case FaultAction::kDrop: return "drop";
  }
  return "unknown";
}

FaultDecision DecideFault(const FaultSpec& spec, const LognormalLatency* latency, Random& random) {
  FaultDecision decision;
  if (latency != nullptr) decision.delay = latency->Sample(random);
  double faulty = spec.error_rate + spec.throttle_rate + spec.timeout_rate + spec.drop_rate;
  if (faulty <= 0) return decision;
  double u = random.Uniform();
  if (u < spec.error_rate) {
    decision.action = random.Uniform() < 0.5 ? FaultAction::kError500 : FaultAction::kError503;
  } else if ((u -= spec.error_rate) < spec.throttle_rate) {
    decision.action = FaultAction::kThrottle;
    decision.retry_after_seconds = spec.retry_after_seconds;
  } else if ((u -= spec.throttle_rate) < spec.timeout_rate) {
    decision.action = FaultAction::kTimeout;
  } else if ((u -= spec.timeout_rate) < spec.drop_rate) {
    decision.action = FaultAction::kDrop;
  }
  return decision;
}

Result<FaultTable::Entry> FaultTable::MakeEntry(const FaultSpec& spec) {
  SYNCBUS_RETURN_IF_ERROR(spec.Validate());
  Entry entry;
  entry.spec = spec;
  if (spec.has_latency()) {
    auto fitted = LognormalLatency::Fit(spec.latency_p50_ms, spec.latency_p99_ms);
    if (!fitted.ok()) return fitted.status();
    entry.latency = *fitted;
  }
  return entry;
}

Status FaultTable::SetDefault(const FaultSpec& spec) {
  auto entry = MakeEntry(spec);
  if (!entry.ok()) return entry.status();
  std::lock_guard lock(mu_);
  default_ = std::move(*entry);
  overrides_.clear();
  return Status::Ok();
}

Status FaultTable::Set(const std::string& cluster, const FaultSpec& spec) {
  auto entry = MakeEntry(spec);
  if (!entry.ok()) return entry.status();
  std::lock_guard lock(mu_);
  overrides_[cluster] = std::move(*entry);
  return Status::Ok();
}

FaultSpec FaultTable::Get(const std::string& cluster) const {
  std::lock_guard lock(mu_);
  auto it = overrides_.find(cluster);
  return it == overrides_.end() ? default_.spec : it->second.spec;
}

Random& FaultTable::StreamLocked(const std::string& cluster) {
  auto& stream = streams_[cluster];
  if (!stream) stream = std::make_unique<SeededRandom>(seed_ ^ HashName(cluster));
  return *stream;
}

FaultDecision FaultTable::Decide(const std::string& cluster) {
  std::lock_guard lock(mu_);
  auto it = overrides_.find(cluster);
  const Entry& entry = it == overrides_.end() ? default_ : it->second;
  if (!entry.latency && entry.spec.error_rate + entry.spec.throttle_rate + entry.spec.timeout_rate +
                                entry.spec.drop_rate <=
                            0) {
    return {};
  }
  return DecideFault(entry.spec, entry.latency ? &*entry.latency : nullptr, StreamLocked(cluster));
}

Status FaultTable::Apply(const Json& body, const std::function<bool(const std::string&)>& known) {
  auto spec = FaultSpec::FromJson(body);
  if (!spec.ok()) return spec.status();
  std::vector<std::string> clusters = {"*"};
  if (auto it = body.find("clusters"); it != body.end() && !it->is_null()) {
    if (!it->is_array() || it->empty()) {
      return InvalidArgument("clusters must be a non-empty array of names or \"*\"");
    }
    clusters.clear();
    for (const Json& name : *it) {
      if (!name.is_string()) return InvalidArgument("clusters must hold strings");
      std::string n = name.get<std::string>();
      if (n != "*" && !known(n)) return NotFound("no cluster named " + n);
      clusters.push_back(std::move(n));
    }
  }
  auto entry = MakeEntry(*spec);
  if (!entry.ok()) return entry.status();
  std::lock_guard lock(mu_);
  for (const std::string& cluster : clusters) {
    if (cluster == "*") {
      default_ = *entry;
      overrides_.clear();
    }
  }
  for (const std::string& cluster : clusters) {
    if (cluster != "*") overrides_[cluster] = *entry;
  }
  return Status::Ok();
}

Json FaultTable::ToJson() const {
  std::lock_guard lock(mu_);
  Json clusters = Json::object();
  for (const auto& [name, entry] : overrides_) clusters[name] = entry.spec.ToJson();
  return {{"default", default_.spec.ToJson()}, {"clusters", std::move(clusters)}};
}

}  // namespace syncbus::kubesim
