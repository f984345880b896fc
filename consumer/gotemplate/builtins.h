// The functions a SyncSet template can call: Go's text/template builtins (and, or, not, len,
// index, slice, eq, ne, lt, le, gt, ge, print, printf, println, html, js, urlquery, call) and
// Hive's fromCDLabel, with Go's signatures (the executor checks arguments against them) and
// Go's results and error texts. Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/hive/label_selector.h"
#include "consumer/gotemplate/value.h"

namespace syncbus::consumer::gotemplate {

// How a parameter receives its argument (Go's parameter type): reflect.Value (any value, nil
// allowed), interface{} (the same here) or string (a string only).
enum class ParamType { kReflectValue, kAny, kString };

struct Signature {
  std::vector<ParamType> params;  // the last one is the element type when variadic
  bool variadic = false;
};

// Nullptr for a name that is not a function.
const Signature* FindFunction(std::string_view name);

struct CallResult {
  Value value;
  std::optional<std::string> error;  // the function's error (the executor adds "error calling f: ")
};

// Calls a builtin other than and/or (the executor short-circuits those). `callee` is the text
// Go's call builtin names its first argument with. A string result longer than max_bytes is
// an error.
CallResult CallFunction(std::string_view name, const std::vector<Value>& args,
                        const hive::Labels& labels, const std::string& callee, size_t max_bytes);

// The text html/js/urlquery escape: fmt.Sprint of the arguments, nil printed as "<no value>".
std::string EvalArgs(const std::vector<Value>& args);
std::string HtmlEscape(std::string_view s);
std::string JsEscape(std::string_view s);
std::string UrlQueryEscape(std::string_view s);

}  // namespace syncbus::consumer::gotemplate
