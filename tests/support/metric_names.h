// Metric names for the test that the dashboard, the alerts and the autoscaling rule refer only to
// metrics that exist: the names a PromQL expression selects, the names a Prometheus text
// exposition page exports, and which referenced names no page exports. Pure functions;
// thread-safe.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>

namespace syncbus::testing {

// The metric names `expr` selects: identifiers used as series selectors (standing alone or
// followed by `{`) and `__name__="..."` matchers. Not: functions and aggregations, keywords
// (by, without, on, ignoring, group_left/right, and, or, unless, bool, offset, Inf, NaN),
// label names (inside `{}` and in by/on/... lists), strings, numbers and durations, ranges
// `[...]`, and template variables of Grafana ($var, ${var}, [[var]]) and prometheus-adapter
// (<<.Series>>, <<.LabelMatchers>>).
std::set<std::string> PromqlMetricNames(std::string_view expr);

// The PromQL inside a Grafana query variable's query: label_values(EXPR, label) -> EXPR,
// label_values(label) -> "", query_result(EXPR) -> EXPR, anything else as it is.
std::string GrafanaVariableExpr(std::string_view query);

// Name -> type ("counter", "gauge", "histogram", "summary", "untyped") of everything a text
// exposition page exports: the `# TYPE` lines and the names of the samples (a sample without a
// TYPE line is "untyped"; _bucket/_sum/_count samples of a histogram keep their own names).
std::map<std::string, std::string> ExportedMetrics(std::string_view page);

// Whether `name` is exported: a sample or TYPE name of a counter, gauge or untyped metric, or
// <base>_bucket / _sum / _count of an exported histogram <base> (_sum / _count of a summary).
// The bare name of a histogram is not: it selects no series.
bool IsExported(const std::string& name, const std::map<std::string, std::string>& exported);

}  // namespace syncbus::testing
