// A series of a prometheus::Registry as a test reads it. Thread-safe as the registry is.
#pragma once

#include <map>
#include <string>

#include <prometheus/registry.h>

namespace syncbus::testing {

// The value of the series of `family` with exactly `labels`: a counter's or gauge's value, a
// histogram's sample count; 0 when there is no such series.
double MetricSample(prometheus::Registry& registry, const std::string& family,
                    const std::map<std::string, std::string>& labels);

}  // namespace syncbus::testing
