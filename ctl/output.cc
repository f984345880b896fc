#include "ctl/output.h"

#include <cmath>
#include <cstdio>
#include <regex>

namespace syncbus::ctl {
namespace {

const std::vector<std::string> kNames = {"table", "wide", "json", "yaml"};

// A string YAML reads back as the same string without quotes: no indicator first, no ": " or
// " #", no leading or trailing blank, and not a null, boolean or number in YAML 1.1 or 1.2.
bool PlainSafe(const std::string& s) {
  static const std::regex kSafe(R"(^[A-Za-z0-9_./(][A-Za-z0-9 _./()=+,;@$^<>-]*$)");
  static const std::regex kSpecial(
      R"(^(~|null|Null|NULL|true|True|TRUE|false|False|FALSE|yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF|y|Y|n|N)$)");
  static const std::regex kNumeric(
      R"(^[-+]?(\.?[0-9][0-9_.eE:+-]*|\.(inf|Inf|INF|nan|NaN|NAN)|0[xob][0-9a-fA-F_]+)$)");
  if (s.empty() || s.back() == ' ' || s.find(": ") != std::string::npos ||
      s.find(" #") != std::string::npos) {
    return false;
  }
  return std::regex_match(s, kSafe) && !std::regex_match(s, kSpecial) &&
         !std::regex_match(s, kNumeric);
}

std::string Scalar(const Json& v) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    return PlainSafe(s) ? s : Json(s).dump();  // a JSON string is a YAML double-quoted scalar
  }
  if (v.is_null()) return "null";
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isnan(d)) return ".nan";
    if (std::isinf(d)) return d > 0 ? ".inf" : "-.inf";
  }
  return v.dump();
}

bool IsEmptyOrScalar(const Json& v) {
  return !v.is_structured() || v.empty();
}

void Emit(const Json& v, int indent, std::string& out) {
  const std::string pad(indent, ' ');
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      out += pad + Scalar(Json(it.key())) + ":";
      if (IsEmptyOrScalar(it.value())) {
        out += " " + (it.value().is_structured() ? it.value().dump() : Scalar(it.value())) + "\n";
      } else {
        out += "\n";
        // Lists under a key are not indented further (kubectl's style).
        Emit(it.value(), it.value().is_array() ? indent : indent + 2, out);
      }
    }
  } else if (v.is_array()) {
    for (const Json& item : v) {
      if (IsEmptyOrScalar(item)) {
        out += pad + "- " + (item.is_structured() ? item.dump() : Scalar(item)) + "\n";
        continue;
      }
      std::string nested;
      Emit(item, indent + 2, nested);
      out += pad + "- " + nested.substr(indent + 2);  // the first line joins the dash
    }
  }
}

}  // namespace

Result<OutputFormat> ParseOutputFormat(std::string_view text) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (text == kNames[i]) return static_cast<OutputFormat>(i);
  }
  return InvalidArgument("unknown output format \"" + std::string(text) +
                         "\" (table, wide, json, yaml)");
}

const char* OutputFormatName(OutputFormat format) {
  return kNames[static_cast<size_t>(format)].c_str();
}

const std::vector<std::string>& OutputFormatNames() {
  return kNames;
}

bool IsDocument(OutputFormat format) {
  return format == OutputFormat::kJson || format == OutputFormat::kYaml;
}

std::string ToYaml(const Json& doc) {
  if (IsEmptyOrScalar(doc)) return (doc.is_structured() ? doc.dump() : Scalar(doc)) + "\n";
  std::string out;
  Emit(doc, 0, out);
  return out;
}

std::string FormatDocument(const Json& doc, OutputFormat format) {
  return format == OutputFormat::kYaml ? ToYaml(doc) : doc.dump(2) + "\n";
}

std::string FormatStreamItem(const Json& doc, OutputFormat format) {
  return format == OutputFormat::kYaml ? "---\n" + ToYaml(doc) : doc.dump() + "\n";
}

}  // namespace syncbus::ctl
