#include "tests/support/metric_sample.h"

namespace syncbus::testing {

double MetricSample(prometheus::Registry& registry, const std::string& family,
                    const std::map<std::string, std::string>& labels) {
  for (const auto& f : registry.Collect()) {
    if (f.name != family) continue;
    for (const auto& m : f.metric) {
      std::map<std::string, std::string> got;
      for (const auto& l : m.label) got[l.name] = l.value;
      if (got != labels) continue;
      switch (f.type) {
        case prometheus::MetricType::Histogram:
          return static_cast<double>(m.histogram.sample_count);
        case prometheus::MetricType::Gauge: return m.gauge.value;
        default: return m.counter.value;
      }
    }
  }
  return 0;
}

}  // namespace syncbus::testing
