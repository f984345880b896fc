#include "tests/support/metric_names.h"

#include <doctest/doctest.h>

using namespace syncbus::testing;
using Names = std::set<std::string>;

TEST_CASE("PromQL metric names: selectors only, not functions, keywords, labels or variables") {
  CHECK(PromqlMetricNames("up") == Names{"up"});
  CHECK(PromqlMetricNames(R"q(sum by (queue, le) (rate(foo_bucket{job="a", le!~"x|y"}[5m])))q") ==
        Names{"foo_bucket"});
  CHECK(PromqlMetricNames(
            R"q(histogram_quantile(0.99, sum(rate(a_bucket[$__rate_interval])) by (le)))q") ==
        Names{"a_bucket"});
  CHECK(
      PromqlMetricNames("max without(instance) (a) / on (namespace) group_left () b > bool 0.5") ==
      Names{"a", "b"});
  CHECK(PromqlMetricNames("sum(a offset 1h30m) or absent(b) unless c and d @ start()") ==
        Names{"a", "b", "c", "d"});
  CHECK(PromqlMetricNames(
            "deriv(sum by (ns) (max by (ns, q) (x{q=~\"w[.](a|b)\"}))[15m:1m]) > 0") == Names{"x"});
  CHECK(PromqlMetricNames(R"q(label_replace(a, "dst", "$1", "src", "(.*)") * 1e-3 + Inf - NaN)q") ==
        Names{"a"});
  CHECK(PromqlMetricNames(R"q({__name__="named", job="j"} + count_values("v", b) + topk(3, c))q") ==
        Names{"named", "b", "c"});
  CHECK(PromqlMetricNames("a{namespace=\"$namespace\", pod=~\"${pod:regex}\"} / [[old]]") ==
        Names{"a"});
  CHECK(PromqlMetricNames(R"q(sum(max by (queue) (<<.Series>>{queue=~"w",<<.LabelMatchers>>})))q")
            .empty());
  CHECK(PromqlMetricNames("vector(1) # a comment naming no_metric").empty());
}

TEST_CASE("Grafana variable queries: the PromQL inside label_values and query_result") {
  CHECK(GrafanaVariableExpr("label_values(syncbus_publisher_leader, namespace)") ==
        "syncbus_publisher_leader");
  CHECK(GrafanaVariableExpr("label_values(a{job=\"x\"}, pod)") == "a{job=\"x\"}");
  CHECK(GrafanaVariableExpr("label_values(namespace)").empty());
  CHECK(GrafanaVariableExpr("query_result(topk(3, a))") == "topk(3, a)");
  CHECK(GrafanaVariableExpr("sum(a)") == "sum(a)");
}

TEST_CASE("exported metrics: TYPE lines and samples, a histogram counted by its series") {
  const char* page =
      "# HELP requests_total Requests\n"
      "# TYPE requests_total counter\n"
      "requests_total{code=\"200\"} 3\n"
      "# TYPE latency_seconds histogram\n"
      "latency_seconds_bucket{le=\"0.1\"} 1\n"
      "latency_seconds_sum 0.05\n"
      "latency_seconds_count 1\n"
      "# TYPE empty_family gauge\n"
      "# TYPE rpc_seconds summary\n"
      "untyped_sample 1\n";
  auto exported = ExportedMetrics(page);
  CHECK(exported.at("requests_total") == "counter");
  CHECK(exported.at("latency_seconds") == "histogram");
  CHECK(exported.at("untyped_sample") == "untyped");
  for (const char* name :
       {"requests_total", "latency_seconds_bucket", "latency_seconds_sum", "latency_seconds_count",
        "empty_family", "untyped_sample", "rpc_seconds_sum", "rpc_seconds_count"}) {
    CHECK_MESSAGE(IsExported(name, exported), name);
  }
  // The bare histogram name selects nothing; a misspelling or a suffix of something else is not
  // exported either.
  for (const char* name : {"latency_seconds", "rpc_seconds", "rpc_seconds_bucket", "request_total",
                           "requests_total_bucket", "empty_family_count"}) {
    CHECK_MESSAGE(!IsExported(name, exported), name);
  }
}
