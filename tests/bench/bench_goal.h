// Benchmark figures against their goals, as the benchmarks print them: a percentile of samples
// that may be empty, and a verdict that is never "met" without data. Pure functions;
// thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace syncbus::testing {

// The q-quantile (0..1) of `samples`; nullopt when there are none.
std::optional<double> Percentile(std::vector<double> samples, double q);

// "met" or "MISSED" for a figure that must be at most (`at_most`) or at least `goal`;
// "no data" when the figure is unknown: a run that measured nothing has met nothing.
std::string Verdict(std::optional<double> figure, double goal, bool at_most = true);

}  // namespace syncbus::testing
