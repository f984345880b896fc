#include "common/yaml_json.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include <yaml-cpp/yaml.h>

namespace syncbus {
namespace {

bool ParseInteger(std::string text, Json* out) {
  std::erase(text, '_');
  if (text.empty()) return false;
  std::string digits = text;
  bool negative = false;
  if (digits[0] == '+' || digits[0] == '-') {
    negative = digits[0] == '-';
    digits = digits.substr(1);
  }
  if (digits.empty()) return false;
  int base = 10;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    base = 16;
    digits = digits.substr(2);
  } else if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'o' || digits[1] == 'O')) {
    base = 8;
    digits = digits.substr(2);
  } else if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'b' || digits[1] == 'B')) {
    base = 2;
    digits = digits.substr(2);
  } else if (digits.size() > 1 && digits[0] == '0') {
    base = 8;
    digits = digits.substr(1);
  }
  for (char c : digits) {
    int v = (c >= '0' && c <= '9')   ? c - '0'
            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
            : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                     : 99;
    if (v >= base) return false;
  }
  errno = 0;
  char* end = nullptr;
  unsigned long long magnitude = std::strtoull(digits.c_str(), &end, base);
  if (errno != 0 || *end != '\0') return false;
  if (negative) {
    if (magnitude > 9223372036854775808ULL) return false;
    *out = magnitude == 9223372036854775808ULL ? INT64_MIN : -static_cast<long long>(magnitude);
  } else if (magnitude <= static_cast<unsigned long long>(INT64_MAX)) {
    *out = static_cast<long long>(magnitude);
  } else {
    *out = magnitude;
  }
  return true;
}

bool ParseFloat(std::string text, Json* out) {
  if (text == ".inf" || text == ".Inf" || text == ".INF" || text == "+.inf" || text == "+.Inf" ||
      text == "+.INF") {
    *out = HUGE_VAL;
    return true;
  }
  if (text == "-.inf" || text == "-.Inf" || text == "-.INF") {
    *out = -HUGE_VAL;
    return true;
  }
  if (text == ".nan" || text == ".NaN" || text == ".NAN") {
    *out = NAN;
    return true;
  }
  std::erase(text, '_');
  if (text.empty()) return false;
  bool digit = false;
  for (char c : text) {
    if (c >= '0' && c <= '9')
      digit = true;
    else if (c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-')
      return false;
  }
  if (!digit) return false;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (*end != '\0') return false;
  *out = v;
  return true;
}

Json ResolvePlain(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  static const char* kTrue[] = {"y",    "Y",    "yes", "Yes", "YES", "true",
                                "True", "TRUE", "on",  "On",  "ON"};
  static const char* kFalse[] = {"n",     "N",     "no",  "No",  "NO", "false",
                                 "False", "FALSE", "off", "Off", "OFF"};
  for (const char* t : kTrue) {
    if (s == t) return true;
  }
  for (const char* f : kFalse) {
    if (s == f) return false;
  }
  char c = s[0];
  if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.') {
    Json v;
    if (ParseInteger(s, &v)) return v;
    if (ParseFloat(s, &v)) return v;
  }
  return s;
}

Json Convert(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined: return nullptr;
    case YAML::NodeType::Scalar: {
      const std::string& tag = node.Tag();
      const std::string& text = node.Scalar();
      if (tag == "!" || tag == "tag:yaml.org,2002:str") return text;
      return ResolvePlain(text);
    }
    case YAML::NodeType::Sequence: {
      Json arr = Json::array();
      for (const auto& item : node) arr.push_back(Convert(item));
      return arr;
    }
    case YAML::NodeType::Map: {
      Json obj = Json::object();
      for (const auto& kv : node) {
        Json key = Convert(kv.first);
        std::string name = key.is_string() ? key.get<std::string>()
                           : key.is_null() ? "null"
                                           : key.dump();
        obj[name] = Convert(kv.second);
      }
      return obj;
    }
  }
  return nullptr;
}

}  // namespace

Result<Json> YamlToJson(std::string_view text) {
  try {
    YAML::Node node = YAML::Load(std::string(text));
    return Convert(node);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("error converting YAML to JSON: ") + e.what());
  }
}

Result<std::vector<Json>> YamlDocumentsToJson(std::string_view text) {
  try {
    std::vector<Json> docs;
    for (const auto& node : YAML::LoadAll(std::string(text))) {
      Json doc = Convert(node);
      if (!doc.is_null()) docs.push_back(std::move(doc));
    }
    return docs;
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("error converting YAML to JSON: ") + e.what());
  }
}

}  // namespace syncbus
