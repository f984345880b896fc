#include "ctl/metrics_scrape.h"

#include <cstdlib>

namespace syncbus::ctl {

double SumMetric(std::string_view page, std::string_view metric, std::string_view label_filter) {
  double sum = 0;
  size_t pos = 0;
  while (pos < page.size()) {
    size_t end = page.find('\n', pos);
    if (end == std::string_view::npos) end = page.size();
    std::string_view line = page.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#' || line.substr(0, metric.size()) != metric) continue;
    std::string_view rest = line.substr(metric.size());
    if (!rest.empty() && rest[0] != '{' && rest[0] != ' ') continue;  // a longer metric name
    if (!label_filter.empty() && rest.find(label_filter) == std::string_view::npos) continue;
    size_t space = rest.rfind(' ');
    if (space == std::string_view::npos) continue;
    sum += std::strtod(std::string(rest.substr(space + 1)).c_str(), nullptr);
  }
  return sum;
}

Result<double> ScrapeSum(http::Transport& transport, const std::vector<std::string>& urls,
                         std::string_view metric, std::string_view label_filter) {
  double total = 0;
  for (const auto& url : urls) {
    http::Request req;
    req.url = url;
    req.timeout = std::chrono::seconds(5);
    auto resp = transport.Call(req);
    if (!resp.ok()) return resp.status().Annotate("scraping " + url);
    if (resp->status != 200)
      return Unavailable("scraping " + url + ": HTTP " + std::to_string(resp->status));
    total += SumMetric(resp->body, metric, label_filter);
  }
  return total;
}

}  // namespace syncbus::ctl
