#include "tests/kubesim/names.h"

namespace syncbus::kubesim {
namespace {

bool IsLowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}
bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

std::string RegexError(const std::string& msg, const std::string& fmt,
                       std::initializer_list<const char*> examples) {
  std::string out = msg + " (e.g. ";
  bool first = true;
  for (const char* e : examples) {
    if (!first) out += " or ";
    first = false;
    out += "'" + std::string(e) + "', ";
  }
  out += "regex used for validation is '" + fmt + "')";
  return out;
}

std::string MaxLenError(int n) {
  return "must be no more than " + std::to_string(n) + " characters";
}

// [a-z0-9]([-a-z0-9]*[a-z0-9])?
bool MatchesDns1123Label(std::string_view v) {
  if (v.empty() || !IsLowerAlnum(v.front()) || !IsLowerAlnum(v.back())) return false;
  for (char c : v) {
    if (!IsLowerAlnum(c) && c != '-') return false;
  }
  return true;
}

// ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]
bool MatchesQualifiedNamePart(std::string_view v) {
  if (v.empty() || !IsAlnum(v.front()) || !IsAlnum(v.back())) return false;
  for (char c : v) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

const char kQualifiedNameMsg[] =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character";
const char kQualifiedNameFmt[] = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";

std::string MaskTrailingDash(std::string_view v) {
  std::string s(v);
  if (s.size() > 1 && s.back() == '-') s.back() = 'a';
  return s;
}

}  // namespace

Messages IsDns1123Label(std::string_view value) {
  Messages errs;
  if (value.size() > 63) errs.push_back(MaxLenError(63));
  if (!MatchesDns1123Label(value)) {
    errs.push_back(RegexError(
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
        "and must start and end with an alphanumeric character",
        "[a-z0-9]([-a-z0-9]*[a-z0-9])?", {"my-name", "123-abc"}));
  }
  return errs;
}

Messages IsDns1123Subdomain(std::string_view value) {
  Messages errs;
  if (value.size() > 253) errs.push_back(MaxLenError(253));
  bool ok = !value.empty();
  size_t start = 0;
  while (ok && start <= value.size()) {
    size_t dot = value.find('.', start);
    std::string_view part =
        value.substr(start, dot == std::string_view::npos ? value.npos : dot - start);
    if (!MatchesDns1123Label(part)) ok = false;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (!ok) {
    errs.push_back(RegexError(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
        "or '.', and must start and end with an alphanumeric character",
        "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", {"example.com"}));
  }
  return errs;
}

Messages IsDns1035Label(std::string_view value) {
  Messages errs;
  if (value.size() > 63) errs.push_back(MaxLenError(63));
  bool ok = MatchesDns1123Label(value) && value.front() >= 'a' && value.front() <= 'z';
  if (!ok) {
    errs.push_back(RegexError(
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
        "an alphabetic character, and end with an alphanumeric character",
        "[a-z]([-a-z0-9]*[a-z0-9])?", {"my-name", "abc-123"}));
  }
  return errs;
}

Messages IsQualifiedName(std::string_view value) {
  Messages errs;
  std::string_view name = value;
  size_t slash = value.find('/');
  if (slash != std::string_view::npos) {
    if (value.find('/', slash + 1) != std::string_view::npos) {
      errs.push_back(
          "a qualified name " +
          RegexError(kQualifiedNameMsg, kQualifiedNameFmt, {"MyName", "my.name", "123-abc"}) +
          " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')");
      return errs;
    }
    std::string_view prefix = value.substr(0, slash);
    name = value.substr(slash + 1);
    if (prefix.empty()) {
      errs.push_back("prefix part must be non-empty");
    } else {
      for (const auto& m : IsDns1123Subdomain(prefix)) errs.push_back("prefix part " + m);
    }
  }
  if (name.empty()) {
    errs.push_back("name part must be non-empty");
  } else if (name.size() > 63) {
    errs.push_back("name part " + MaxLenError(63));
  }
  if (!MatchesQualifiedNamePart(name)) {
    errs.push_back("name part " + RegexError(kQualifiedNameMsg, kQualifiedNameFmt,
                                             {"MyName", "my.name", "123-abc"}));
  }
  return errs;
}

Messages IsValidLabelValue(std::string_view value) {
  Messages errs;
  if (value.size() > 63) errs.push_back(MaxLenError(63));
  if (!value.empty() && !MatchesQualifiedNamePart(value)) {
    errs.push_back(RegexError(
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
        "or '.', and must start and end with an alphanumeric character",
        "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?", {"MyValue", "my_value", "12345"}));
  }
  return errs;
}

Messages IsConfigMapKey(std::string_view value) {
  Messages errs;
  if (value.size() > 253) errs.push_back(MaxLenError(253));
  bool ok = !value.empty();
  for (char c : value) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') ok = false;
  }
  if (!ok) {
    errs.push_back(
        RegexError("a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                   "[-._a-zA-Z0-9]+", {"key.name", "KEY_NAME", "key-name"}));
  }
  if (value == ".") {
    errs.push_back("must not be '.'");
  } else if (value == "..") {
    errs.push_back("must not be '..'");
  } else if (value.substr(0, 2) == "..") {
    errs.push_back("must not start with '..'");
  }
  return errs;
}

Messages IsPathSegmentName(std::string_view value) {
  Messages errs;
  if (value == "." || value == "..") errs.push_back("may not be '" + std::string(value) + "'");
  for (const char* bad : {"/", "%"}) {
    if (value.find(bad) != std::string_view::npos) {
      errs.push_back("may not contain '" + std::string(bad) + "'");
    }
  }
  return errs;
}

Messages NameIsDnsSubdomain(std::string_view value, bool prefix) {
  return prefix ? IsDns1123Subdomain(MaskTrailingDash(value)) : IsDns1123Subdomain(value);
}

Messages NameIsDnsLabel(std::string_view value, bool prefix) {
  return prefix ? IsDns1123Label(MaskTrailingDash(value)) : IsDns1123Label(value);
}

Messages NameIsDns1035Label(std::string_view value, bool prefix) {
  return prefix ? IsDns1035Label(MaskTrailingDash(value)) : IsDns1035Label(value);
}

}  // namespace syncbus::kubesim
