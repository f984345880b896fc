// Executes parsed templates as Go's text/template does with dot = nil: actions, pipelines,
// variables, if/else/range/with/template/block/break/continue, Go's builtins and fromCDLabel,
// with Go's output and Go's error texts ("template: cdParams:1:3: executing "cdParams" at
// <index "a" 5>: error calling index: index out of range: 5").
// A template is user input, so execution is bounded: template calls nest at most
// kMaxTemplateDepth deep (Go: 100000, far past what a thread's stack holds here), walks nest at
// most kMaxExecNesting deep, and a Budget
// caps the output bytes and the evaluation steps (a {{range}} over a huge integer, or a
// recursion that prints nothing, stops with an error instead of running on).
// Execute is thread-safe for distinct Budgets; the Namespace is read-only during execution.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "common/hive/label_selector.h"
#include "common/status.h"
#include "consumer/gotemplate/ast.h"

namespace syncbus::consumer::gotemplate {

inline constexpr int kMaxTemplateDepth = 500;
// Nested walks (control structures inside templates calling templates...) stop here, so that
// nesting multiplied by template depth cannot exhaust a thread's stack.
inline constexpr int kMaxExecNesting = 3000;

// Limits shared by every string of one document (one SyncSet resource or patch).
struct Budget {
  size_t max_output_bytes = size_t{2} * 1024 * 1024;  // per rendered and intermediate string
  size_t max_total_output_bytes = size_t{8} * 1024 * 1024;
  int64_t max_steps = 1'000'000;  // nodes walked plus commands evaluated
  size_t total_output_bytes = 0;
  int64_t steps = 0;
};

// The templates {{template "name"}} can reach: name -> tree.
using Namespace = std::map<std::string, std::shared_ptr<const Tree>>;

// Runs templates[name] with dot = nil. The error is Go's message (or, for a syncbus bound, one
// in the same form).
Result<std::string> Execute(const Namespace& templates, const std::string& name,
                            const hive::Labels& labels, Budget& budget);

}  // namespace syncbus::consumer::gotemplate
