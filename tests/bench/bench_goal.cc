#include "tests/bench/bench_goal.h"

#include <algorithm>

namespace syncbus::testing {

std::optional<double> Percentile(std::vector<double> samples, double q) {
  if (samples.empty()) return std::nullopt;
  std::sort(samples.begin(), samples.end());
  size_t i =
      std::min(samples.size() - 1, static_cast<size_t>(q * static_cast<double>(samples.size())));
  return samples[i];
}

std::string Verdict(std::optional<double> figure, double goal, bool at_most) {
  if (!figure) return "no data";
  return (at_most ? *figure <= goal : *figure >= goal) ? "met" : "MISSED";
}

}  // namespace syncbus::testing
