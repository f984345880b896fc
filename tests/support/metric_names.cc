#include "tests/support/metric_names.h"

#include <cctype>
#include <regex>

namespace syncbus::testing {
namespace {

bool IsIdentStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}
bool IsIdentChar(char c) {
  return IsIdentStart(c) || std::isdigit(static_cast<unsigned char>(c));
}

// Index just past the string literal opening at `i` (quote at text[i]).
size_t SkipString(std::string_view text, size_t i) {
  char quote = text[i++];
  while (i < text.size() && text[i] != quote) i += (text[i] == '\\' && quote != '`') ? 2 : 1;
  return std::min(i + 1, text.size());
}

// Index just past the bracket closing the one opening at `i`, skipping strings inside.
size_t SkipBracketed(std::string_view text, size_t i, char open, char close) {
  int depth = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == '"' || c == '\'' || c == '`') {
      i = SkipString(text, i);
      continue;
    }
    if (c == open) ++depth;
    if (c == close && --depth == 0) return i + 1;
    ++i;
  }
  return i;
}

size_t SkipSpaces(std::string_view text, size_t i) {
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  return i;
}

// `__name__="x"` matchers inside a selector's braces.
void NameMatchers(std::string_view braces, std::set<std::string>& out) {
  static const std::regex kNameMatcher(R"re(__name__\s*=\s*"([a-zA-Z_:][a-zA-Z0-9_:]*)")re");
  std::string text(braces);
  for (std::sregex_iterator it(text.begin(), text.end(), kNameMatcher), end; it != end; ++it) {
    out.insert((*it)[1].str());
  }
}

const std::set<std::string>& Keywords() {
  static const std::set<std::string> kKeywords = {
      // binary operators and modifiers
      "and", "or", "unless", "bool", "offset", "atan2", "inf", "nan",
      // aggregation operators: may be followed by `by (...)` before their parenthesis
      "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk",
      "topk", "quantile", "limitk", "limit_ratio"};
  return kKeywords;
}

// Keywords followed by a parenthesised list of label names.
const std::set<std::string>& LabelListKeywords() {
  static const std::set<std::string> kLists = {"by",       "without",    "on",
                                               "ignoring", "group_left", "group_right"};
  return kLists;
}

}  // namespace

std::set<std::string> PromqlMetricNames(std::string_view expr) {
  std::set<std::string> names;
  size_t i = 0;
  while (i < expr.size()) {
    char c = expr[i];
    if (c == '"' || c == '\'' || c == '`') {
      i = SkipString(expr, i);
    } else if (c == '#') {  // a comment, to the end of the line
      while (i < expr.size() && expr[i] != '\n') ++i;
    } else if (c == '{') {
      size_t end = SkipBracketed(expr, i, '{', '}');
      NameMatchers(expr.substr(i, end - i), names);
      i = end;
    } else if (c == '[') {  // a range or subquery, or a Grafana [[variable]]
      i = SkipBracketed(expr, i, '[', ']');
    } else if (c == '$') {  // a Grafana variable: $name or ${name...}
      ++i;
      if (i < expr.size() && expr[i] == '{') {
        i = SkipBracketed(expr, i, '{', '}');
      } else {
        while (i < expr.size() && IsIdentChar(expr[i])) ++i;
      }
    } else if (c == '<' && i + 1 < expr.size() && expr[i + 1] == '<') {  // <<.Series>>
      size_t end = expr.find(">>", i + 2);
      i = end == std::string_view::npos ? expr.size() : end + 2;
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < expr.size() &&
                std::isdigit(static_cast<unsigned char>(expr[i + 1])))) {
      // A number (1, 0.5, 1e-3, 0x1f) or a duration (5m, 1h30m).
      while (i < expr.size() &&
             (std::isalnum(static_cast<unsigned char>(expr[i])) || expr[i] == '.' ||
              ((expr[i] == '+' || expr[i] == '-') && (expr[i - 1] == 'e' || expr[i - 1] == 'E')))) {
        ++i;
      }
    } else if (IsIdentStart(c)) {
      size_t start = i;
      while (i < expr.size() && IsIdentChar(expr[i])) ++i;
      std::string ident(expr.substr(start, i - start));
      std::string lower = ident;
      for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      size_t next = SkipSpaces(expr, i);
      bool call = next < expr.size() && expr[next] == '(';
      if (LabelListKeywords().count(lower)) {
        if (call) i = SkipBracketed(expr, next, '(', ')');
      } else if (!Keywords().count(lower) && !call) {
        names.insert(ident);
      }
    } else {
      ++i;
    }
  }
  return names;
}

std::string GrafanaVariableExpr(std::string_view query) {
  static const std::regex kLabelValues(
      R"re(^\s*label_values\(\s*([\s\S]*?)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$)re");
  static const std::regex kLabelOnly(R"re(^\s*label_values\(\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$)re");
  static const std::regex kQueryResult(R"re(^\s*query_result\(([\s\S]*)\)\s*$)re");
  std::string text(query);
  std::smatch m;
  if (std::regex_match(text, m, kLabelValues)) return m[1].str();
  if (std::regex_match(text, kLabelOnly)) return "";
  if (std::regex_match(text, m, kQueryResult)) return m[1].str();
  return text;
}

std::map<std::string, std::string> ExportedMetrics(std::string_view page) {
  std::map<std::string, std::string> exported;
  size_t pos = 0;
  while (pos < page.size()) {
    size_t end = page.find('\n', pos);
    if (end == std::string_view::npos) end = page.size();
    std::string_view line = page.substr(pos, end - pos);
    pos = end + 1;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::string_view rest = line.substr(7);
      size_t space = rest.find(' ');
      if (space == std::string_view::npos) continue;
      std::string type(rest.substr(space + 1));
      while (!type.empty() && std::isspace(static_cast<unsigned char>(type.back())))
        type.pop_back();
      exported[std::string(rest.substr(0, space))] = type;
    } else if (!line.empty() && line[0] != '#') {
      size_t n = 0;
      while (n < line.size() && IsIdentChar(line[n])) ++n;
      if (n > 0) exported.emplace(std::string(line.substr(0, n)), "untyped");
    }
  }
  return exported;
}

bool IsExported(const std::string& name, const std::map<std::string, std::string>& exported) {
  auto it = exported.find(name);
  if (it != exported.end() && it->second != "histogram" && it->second != "summary") return true;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    std::string_view s(suffix);
    if (name.size() <= s.size() || name.compare(name.size() - s.size(), s.size(), s) != 0) continue;
    auto base = exported.find(name.substr(0, name.size() - s.size()));
    if (base == exported.end()) continue;
    if (base->second == "histogram" || (base->second == "summary" && s != "_bucket")) return true;
  }
  return false;
}

}  // namespace syncbus::testing
