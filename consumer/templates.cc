#include "consumer/templates.h"

#include <cctype>
#include <string_view>

namespace syncbus::consumer {
namespace {

constexpr std::string_view kFunction = "fromCDLabel";

bool IsSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// A Go string literal: "..." with \" and \\ escapes, or `...` raw.
Result<std::string> ParseStringLiteral(std::string_view s) {
  if (s.size() >= 2 && s.front() == '`' && s.back() == '`') return std::string(s.substr(1, s.size() - 2));
  if (s.size() < 2 || s.front() != '"' || s.back() != '"') {
    return InvalidArgument("expected a quoted label key, got " + std::string(s));
  }
  std::string out;
  for (size_t i = 1; i + 1 < s.size(); ++i) {
    if (s[i] == '\\') {
      if (i + 2 >= s.size()) return InvalidArgument("unterminated escape in " + std::string(s));
      char e = s[++i];
      if (e != '"' && e != '\\') return InvalidArgument("unsupported escape \\" + std::string(1, e));
      out.push_back(e);
    } else if (s[i] == '"') {
      return InvalidArgument("unexpected quote in " + std::string(s));
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

Result<std::string> EvalAction(std::string_view action, const hive::Labels& labels) {
  action = Trim(action);
  if (action.substr(0, kFunction.size()) != kFunction ||
      action.size() == kFunction.size() || !IsSpace(action[kFunction.size()])) {
    return InvalidArgument("unsupported template action {{" + std::string(action) +
                           "}}: only fromCDLabel \"key\" is available");
  }
  auto key = ParseStringLiteral(Trim(action.substr(kFunction.size())));
  if (!key.ok()) return key.status().Annotate("template {{" + std::string(action) + "}}");
  auto it = labels.find(*key);
  return it == labels.end() ? std::string() : it->second;
}

}  // namespace

Result<std::string> ExpandTemplate(const std::string& text, const hive::Labels& cd_labels) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t open = text.find("{{", pos);
    if (open == std::string::npos) {
      out.append(text, pos, std::string::npos);
      return out;
    }
    size_t close = text.find("}}", open + 2);
    if (close == std::string::npos) return InvalidArgument("unclosed template action in \"" + text + "\"");
    std::string_view action(text.data() + open + 2, close - open - 2);
    bool trim_left = action.size() >= 2 && action[0] == '-' && IsSpace(action[1]);
    bool trim_right = action.size() >= 2 && action.back() == '-' && IsSpace(action[action.size() - 2]);
    if (trim_left) action.remove_prefix(1);
    if (trim_right) action.remove_suffix(1);
    std::string literal = text.substr(pos, open - pos);
    if (trim_left) {
      while (!literal.empty() && IsSpace(literal.back())) literal.pop_back();
    }
    out += literal;
    auto value = EvalAction(action, cd_labels);
    if (!value.ok()) return value.status();
    out += *value;
    pos = close + 2;
    if (trim_right) {
      while (pos < text.size() && IsSpace(text[pos])) ++pos;
    }
  }
}

Status ExpandTemplates(Json& value, const hive::Labels& cd_labels) {
  if (value.is_string()) {
    const std::string& s = value.get_ref<const std::string&>();
    if (s.find("{{") == std::string::npos) return Status::Ok();
    auto expanded = ExpandTemplate(s, cd_labels);
    if (!expanded.ok()) return expanded.status();
    value = std::move(*expanded);
    return Status::Ok();
  }
  if (value.is_object() || value.is_array()) {
    for (auto& child : value) {
      if (Status s = ExpandTemplates(child, cd_labels); !s.ok()) return s;
    }
  }
  return Status::Ok();
}

}  // namespace syncbus::consumer
