// Fault injection for the simulator: per-cluster settings (latency, 5xx errors, 429 throttling,
// timeouts, dropped connections) and the per-request draw, reproducible from a seed. Shared by
// the socket server and the in-process transport. FaultSpec is a value type; FaultTable is
// thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/random.h"
#include "common/status.h"
#include "tests/kubesim/latency.h"

namespace syncbus::kubesim {

// What to inject into one cluster's requests. Rates are per-request probabilities; together
// they must not exceed 1.
struct FaultSpec {
  double latency_p50_ms = 0;  // both zero: no added latency
  double latency_p99_ms = 0;
  double error_rate = 0;     // 500 InternalError or 503 ServiceUnavailable, half each
  double throttle_rate = 0;  // 429 TooManyRequests with Retry-After
  int retry_after_seconds = 1;
  double timeout_rate = 0;  // never answered: the client gives up
  double drop_rate = 0;     // connection dropped without an answer

  bool has_latency() const { return latency_p50_ms > 0 || latency_p99_ms > 0; }
  Status Validate() const;
  // {"latency": {"p50Ms", "p99Ms"}, "errorRate", "throttleRate", "retryAfterSeconds",
  //  "timeoutRate", "dropRate"}; absent fields take the defaults above.
  static Result<FaultSpec> FromJson(const Json& json);
  Json ToJson() const;
};

enum class FaultAction { kNone, kError500, kError503, kThrottle, kTimeout, kDrop };
const char* FaultActionName(FaultAction action);

struct FaultDecision {
  FaultAction action = FaultAction::kNone;
  std::chrono::milliseconds delay{0};  // wait this long before acting (or answering)
  int retry_after_seconds = 0;         // kThrottle
};

// One draw for one request: the action from one Uniform(), the 500/503 choice from another,
// the latency from a third. `latency` must be the spec's fitted distribution (or null).
FaultDecision DecideFault(const FaultSpec& spec, const LognormalLatency* latency, Random& random);

// Per-cluster fault settings with a default ("*") and one seeded random stream per cluster, so
// a cluster's sequence of draws depends only on the seed and its own requests.
class FaultTable {
 public:
  // Starts with no faults anywhere.
  explicit FaultTable(uint64_t seed) : seed_(seed) {}

  // Replaces the default and clears every per-cluster override.
  Status SetDefault(const FaultSpec& spec);
  // Overrides one cluster ("hub" for the hub).
  Status Set(const std::string& cluster, const FaultSpec& spec);
  FaultSpec Get(const std::string& cluster) const;
  FaultDecision Decide(const std::string& cluster);

  // The control API's PUT /_sim/faults body: {"clusters": ["name" | "*"], ...FaultSpec}. Names
  // that `known` rejects are NotFound; nothing changes unless the whole body is valid.
  Status Apply(const Json& body, const std::function<bool(const std::string&)>& known);
  // {"default": spec, "clusters": {name: spec}}.
  Json ToJson() const;

 private:
  struct Entry {
    FaultSpec spec;
    std::optional<LognormalLatency> latency;
  };
  static Result<Entry> MakeEntry(const FaultSpec& spec);
  Random& StreamLocked(const std::string& cluster);

  const uint64_t seed_;
  mutable std::mutex mu_;
  Entry default_;
  std::map<std::string, Entry> overrides_;
  std::map<std::string, std::unique_ptr<Random>> streams_;
};

}  // namespace syncbus::kubesim
