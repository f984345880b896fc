#include "tests/kubesim/selector.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "tests/kubesim/names.h"

namespace syncbus::kubesim {
namespace {

enum class Tok {
  kEnd,
  kIdent,
  kNot,
  kNotEquals,
  kOpen,
  kClose,
  kComma,
  kEquals,
  kDoubleEquals,
  kGreater,
  kLess,
  kIn,
  kNotIn
};

struct Token {
  Tok type;
  std::string text;
};

bool IsSpecial(char c) {
  return c == '!' || c == '(' || c == ')' || c == ',' || c == '=' || c == '>' || c == '<';
}

std::vector<Token> Lex(std::string_view s) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (c == '!' && i + 1 < s.size() && s[i + 1] == '=') {
      out.push_back({Tok::kNotEquals, "!="});
      i += 2;
    } else if (c == '=' && i + 1 < s.size() && s[i + 1] == '=') {
      out.push_back({Tok::kDoubleEquals, "=="});
      i += 2;
    } else if (c == '!') {
      out.push_back({Tok::kNot, "!"});
      ++i;
    } else if (c == '=') {
      out.push_back({Tok::kEquals, "="});
      ++i;
    } else if (c == '(') {
      out.push_back({Tok::kOpen, "("});
      ++i;
    } else if (c == ')') {
      out.push_back({Tok::kClose, ")"});
      ++i;
    } else if (c == ',') {
      out.push_back({Tok::kComma, ","});
      ++i;
    } else if (c == '>') {
      out.push_back({Tok::kGreater, ">"});
      ++i;
    } else if (c == '<') {
      out.push_back({Tok::kLess, "<"});
      ++i;
    } else {
      size_t start = i;
      while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i])) && !IsSpecial(s[i])) {
        ++i;
      }
      std::string word(s.substr(start, i - start));
      Tok t = word == "in" ? Tok::kIn : word == "notin" ? Tok::kNotIn : Tok::kIdent;
      out.push_back({t, word});
    }
  }
  out.push_back({Tok::kEnd, ""});
  return out;
}

std::string Show(const Token& t) {
  return t.type == Tok::kEnd ? "end of string" : t.text;
}

StatusError ParseError(const std::string& detail) {
  return BadRequest("unable to parse requirement: " + detail);
}

bool IsInteger(const std::string& v, long long* out) {
  if (v.empty()) return false;
  char* end = nullptr;
  *out = std::strtoll(v.c_str(), &end, 10);
  return *end == '\0';
}

}  // namespace

Outcome<LabelSelector> LabelSelector::Parse(std::string_view text) {
  LabelSelector sel;
  std::vector<Token> toks = Lex(text);
  size_t p = 0;
  if (toks[p].type == Tok::kEnd) return sel;
  while (true) {
    bool negated = false;
    if (toks[p].type == Tok::kNot) {
      negated = true;
      ++p;
    }
    if (toks[p].type != Tok::kIdent && toks[p].type != Tok::kIn && toks[p].type != Tok::kNotIn) {
      return BadRequest("found '" + Show(toks[p]) +
                        "', expected: !, identifier, or 'end of string'");
    }
    Requirement req;
    req.key = toks[p].text;
    ++p;
    Messages key_errs = IsQualifiedName(req.key);
    if (!key_errs.empty()) {
      return ParseError("key: Invalid value: " + Json(req.key).dump() + ": " + key_errs[0]);
    }
    if (toks[p].type == Tok::kEnd || toks[p].type == Tok::kComma) {
      req.op = negated ? Op::kDoesNotExist : Op::kExists;
    } else if (negated) {
      return BadRequest("found '" + Show(toks[p]) + "', expected: ',' or 'end of string'");
    } else {
      Tok op = toks[p].type;
      ++p;
      switch (op) {
        case Tok::kEquals:
        case Tok::kDoubleEquals:
        case Tok::kNotEquals:
        case Tok::kGreater:
        case Tok::kLess: {
          req.op = op == Tok::kNotEquals ? Op::kNotEquals
                   : op == Tok::kGreater ? Op::kGreaterThan
                   : op == Tok::kLess    ? Op::kLessThan
                                         : Op::kEquals;
          if (toks[p].type == Tok::kEnd || toks[p].type == Tok::kComma) {
            req.values.push_back("");
          } else if (toks[p].type == Tok::kIdent || toks[p].type == Tok::kIn ||
                     toks[p].type == Tok::kNotIn) {
            req.values.push_back(toks[p].text);
            ++p;
          } else {
            return BadRequest("found '" + Show(toks[p]) + "', expected: identifier");
          }
          break;
        }
        case Tok::kIn:
        case Tok::kNotIn: {
          req.op = op == Tok::kIn ? Op::kIn : Op::kNotIn;
          if (toks[p].type != Tok::kOpen) {
            return BadRequest("found '" + Show(toks[p]) + "', expected: '('");
          }
          ++p;
          if (toks[p].type == Tok::kClose) {
            ++p;
            break;
          }
          bool expect_value = true;
          while (true) {
            const Token& t = toks[p];
            if (t.type == Tok::kIdent || t.type == Tok::kIn || t.type == Tok::kNotIn) {
              if (!expect_value) return BadRequest("found '" + Show(t) + "', expected: ',', ')'");
              req.values.push_back(t.text);
              expect_value = false;
              ++p;
            } else if (t.type == Tok::kComma) {
              if (expect_value) req.values.push_back("");
              expect_value = true;
              ++p;
            } else if (t.type == Tok::kClose) {
              if (expect_value && !req.values.empty()) req.values.push_back("");
              ++p;
              break;
            } else {
              return BadRequest("found '" + Show(t) + "', expected: ',', ')' or identifier");
            }
          }
          break;
        }
        default:
          return BadRequest("found '" + Show(toks[p - 1]) +
                            "', expected: [!=, ==, =, >, <, in, notin]");
      }
    }
    if ((req.op == Op::kIn || req.op == Op::kNotIn) && req.values.empty()) {
      return ParseError("for 'in', 'notin' operators, values set can't be empty");
    }
    if (req.op == Op::kGreaterThan || req.op == Op::kLessThan) {
      long long n = 0;
      if (!IsInteger(req.values[0], &n)) {
        return ParseError("for 'Gt', 'Lt' operators, the value must be an integer");
      }
    } else {
      for (size_t i = 0; i < req.values.size(); ++i) {
        Messages errs = IsValidLabelValue(req.values[i]);
        if (!errs.empty()) {
          return ParseError("values[" + std::to_string(i) + "][" + req.key +
                            "]: Invalid value: " + Json(req.values[i]).dump() + ": " + errs[0]);
        }
      }
    }
    sel.requirements_.push_back(std::move(req));
    if (toks[p].type == Tok::kEnd) break;
    if (toks[p].type != Tok::kComma) {
      return BadRequest("found '" + Show(toks[p]) + "', expected: ',' or 'end of string'");
    }
    ++p;
  }
  return sel;
}

bool LabelSelector::Matches(const LabelMap& labels) const {
  for (const auto& req : requirements_) {
    auto it = std::lower_bound(labels.begin(), labels.end(), req.key,
                               [](const auto& kv, const std::string& k) { return kv.first < k; });
    bool present = it != labels.end() && it->first == req.key;
    auto in_values = [&] {
      return present &&
             std::find(req.values.begin(), req.values.end(), it->second) != req.values.end();
    };
    bool ok = false;
    switch (req.op) {
      case Op::kEquals:
      case Op::kIn: ok = in_values(); break;
      case Op::kNotEquals:
      case Op::kNotIn: ok = !in_values(); break;
      case Op::kExists: ok = present; break;
      case Op::kDoesNotExist: ok = !present; break;
      case Op::kGreaterThan:
      case Op::kLessThan: {
        long long have = 0, want = 0;
        if (!present || !IsInteger(it->second, &have) || !IsInteger(req.values[0], &want)) {
          ok = false;
        } else {
          ok = req.op == Op::kGreaterThan ? have > want : have < want;
        }
        break;
      }
    }
    if (!ok) return false;
  }
  return true;
}

Outcome<FieldSelector> FieldSelector::Parse(std::string_view text,
                                            const std::vector<std::string>& supported) {
  FieldSelector sel;
  std::string term;
  std::vector<std::string> terms;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      term += text[i];
      term += text[++i];
    } else if (text[i] == ',') {
      terms.push_back(term);
      term.clear();
    } else {
      term += text[i];
    }
  }
  if (!term.empty() || !terms.empty()) terms.push_back(term);
  auto unescape = [](const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\\' && i + 1 < s.size()) ++i;
      out += s[i];
    }
    return out;
  };
  for (const auto& t : terms) {
    if (t.empty()) continue;
    Term parsed;
    size_t pos = std::string::npos;
    size_t op_len = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] == '\\') {
        ++i;
        continue;
      }
      if (t.compare(i, 2, "!=") == 0) {
        pos = i, op_len = 2, parsed.equals = false;
      } else if (t.compare(i, 2, "==") == 0) {
        pos = i, op_len = 2, parsed.equals = true;
      } else if (t[i] == '=') {
        pos = i, op_len = 1, parsed.equals = true;
      }
      if (pos != std::string::npos) break;
    }
    if (pos == std::string::npos) {
      return BadRequest("invalid selector: '" + std::string(text) + "'; can't understand '" + t +
                        "'");
    }
    parsed.field = unescape(t.substr(0, pos));
    parsed.value = unescape(t.substr(pos + op_len));
    if (std::find(supported.begin(), supported.end(), parsed.field) == supported.end()) {
      return BadRequest("field label not supported: " + parsed.field);
    }
    sel.terms_.push_back(std::move(parsed));
  }
  return sel;
}

bool FieldSelector::Matches(const std::function<std::string(const std::string&)>& lookup) const {
  for (const auto& t : terms_) {
    if ((lookup(t.field) == t.value) != t.equals) return false;
  }
  return true;
}

}  // namespace syncbus::kubesim
