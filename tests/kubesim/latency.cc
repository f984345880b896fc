// LognormalLatency: fitting and inverse-CDF sampling.
#include "tests/kubesim/latency.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace syncbus::kubesim {
namespace {

// z such that P(Z <= z) = 0.99 for a standard normal Z.
constexpr double kZ99 = 2.3263478740408408;

}  // namespace

// Acklam's rational approximations: a central region and two tails.
double InverseNormalCdf(double p) {
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                 -2.759285104469687e+02, 1.383577518672690e+02,
                                 -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                 -1.556989798598866e+02, 6.680131188771972e+01,
                                 -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                 -2.400758277161838e+00, -2.549732539343734e+00,
                                 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                 2.445134137142996e+00, 3.754408661907416e+00};
  constexpr double kLow = 0.02425;
  if (p <= 0) return -std::numeric_limits<double>::infinity();
  if (p >= 1) return std::numeric_limits<double>::infinity();
  auto tail = [&](double q) {
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  };
  if (p < kLow) return tail(std::sqrt(-2 * std::log(p)));
  if (p > 1 - kLow) return -tail(std::sqrt(-2 * std::log1p(-p)));
  double q = p - 0.5;
  double r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

Result<LognormalLatency> LognormalLatency::Fit(double p50_ms, double p99_ms) {
  if (!(p50_ms > 0) || !(p99_ms >= p50_ms) || !std::isfinite(p99_ms)) {
    return InvalidArgument("latency needs 0 < p50 <= p99 (got p50 " + std::to_string(p50_ms) +
                           " ms, p99 " + std::to_string(p99_ms) + " ms)");
  }
  double mu = std::log(p50_ms);
  return LognormalLatency(mu, (std::log(p99_ms) - mu) / kZ99);
}

double LognormalLatency::QuantileMs(double q) const {
  return std::exp(mu_ + sigma_ * InverseNormalCdf(q));
}

double LognormalLatency::SampleMs(Random& random) const {
  // Uniform() is in [0, 1): nudge 0 into the open interval.
  double u = std::max(random.Uniform(), std::numeric_limits<double>::min());
  return QuantileMs(u);
}

std::chrono::milliseconds LognormalLatency::Sample(Random& random) const {
  return std::chrono::milliseconds(std::llround(SampleMs(random)));
}

}  // namespace syncbus::kubesim
