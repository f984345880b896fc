// LognormalLatency: simulated request latency drawn from a lognormal distribution fitted to a
// median and a 99th percentile (the measured real-cluster figures are p50 27 ms, p99 230 ms).
// Value type; thread-compatible (the Random passed to Sample carries the mutable state).
#pragma once

#include <chrono>

#include "common/random.h"
#include "common/status.h"

namespace syncbus::kubesim {

// The standard normal quantile function (inverse CDF) for p in (0, 1); relative error < 1.2e-9.
double InverseNormalCdf(double p);

class LognormalLatency {
 public:
  // InvalidArgument unless 0 < p50_ms <= p99_ms.
  static Result<LognormalLatency> Fit(double p50_ms, double p99_ms);

  // The q-quantile in milliseconds, q in (0, 1).
  double QuantileMs(double q) const;
  // One draw, in milliseconds (inverse-CDF sampling: one Uniform() per draw).
  double SampleMs(Random& random) const;
  // One draw rounded to whole milliseconds (what a timer can wait).
  std::chrono::milliseconds Sample(Random& random) const;

  double mu() const { return mu_; }
  double sigma() const { return sigma_; }

 private:
  LognormalLatency(double mu, double sigma) : mu_(mu), sigma_(sigma) {}
  double mu_;     // mean of ln(latency in ms)
  double sigma_;  // standard deviation of ln(latency in ms)
};

}  // namespace syncbus::kubesim
