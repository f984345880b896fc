// The parser of Go's text/template/parse with the function names a SyncSet template can call
// (Go's builtins and fromCDLabel): builds the trees of one template text (the main template
// plus every {{define}} / {{block}}), with Go's error texts ("template: cdParams:2: unexpected
// EOF"). Nesting (parentheses and control structures) is bounded by kMaxParseNesting so that
// user input cannot exhaust the stack. Pure function; thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "common/status.h"
#include "consumer/gotemplate/ast.h"

namespace syncbus::consumer::gotemplate {

// Deeper nesting of parentheses and {{if}}/{{range}}/{{with}}/{{define}}/{{block}} fails the parse
// (Go allows 10000 nested parentheses and unbounded blocks; no real template nests past ten).
inline constexpr int kMaxParseNesting = 200;

// Go's treeSet: template name -> tree.
using TreeSet = std::map<std::string, std::shared_ptr<const Tree>>;

// Go's parse.Parse(name, text, "", "", fromCDLabel+builtins). The error is Go's message.
Result<TreeSet> Parse(const std::string& name, std::shared_ptr<const std::string> text);

}  // namespace syncbus::consumer::gotemplate
