// Sums one counter across Prometheus text-format pages (the consumers' /metrics), for the
// demo's summary line. Pure parsing plus blocking HTTP reads; thread-compatible.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/http/transport.h"
#include "common/status.h"

namespace syncbus::ctl {

// Sum of every sample of `metric` whose labels contain `label_filter` (e.g. result="success"),
// in one exposition page.
double SumMetric(std::string_view page, std::string_view metric, std::string_view label_filter);

// Fetches each URL and sums; unreachable endpoints are errors.
Result<double> ScrapeSum(http::Transport& transport, const std::vector<std::string>& urls,
                         std::string_view metric, std::string_view label_filter);

}  // namespace syncbus::ctl
