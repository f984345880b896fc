#include "common/go_json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace syncbus {
namespace {

void AppendString(const std::string& s, std::string& out) {
  static const char kHex[] = "0123456789abcdef";
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '<':
      case '>':
      case '&':
        out += "\\u00";
        out += kHex[c >> 4];
        out += kHex[c & 0xF];
        continue;
      default: break;
    }
    if (c < 0x20) {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
      continue;
    }
    // U+2028 and U+2029 (E2 80 A8 / E2 80 A9).
    if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
        (static_cast<unsigned char>(s[i + 2]) == 0xA8 ||
         static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
      out += static_cast<unsigned char>(s[i + 2]) == 0xA8 ? "\\u2028" : "\\u2029";
      i += 2;
      continue;
    }
    out += static_cast<char>(c);
  }
  out += '"';
}

// strconv.AppendFloat(f, 'f' or 'e', -1, 64) as encoding/json picks it, e-09 cleaned to e-9.
void AppendFloat(double f, std::string& out) {
  if (!std::isfinite(f)) {  // Go refuses these; JSON parsed from text never holds them
    out += "null";
    return;
  }
  double abs = std::fabs(f);
  bool exponent = abs != 0 && (abs < 1e-6 || abs >= 1e21);
  char buf[64];
  auto [end, ec] =
      std::to_chars(buf, buf + sizeof buf, f,
                    exponent ? std::chars_format::scientific : std::chars_format::fixed);
  std::string text(buf, ec == std::errc() ? end : buf);
  if (exponent) {
    size_t n = text.size();
    if (n >= 4 && text[n - 4] == 'e' && text[n - 3] == '-' && text[n - 2] == '0') {
      text.erase(n - 2, 1);
    }
  }
  out += text;
}

void Append(const Json& v, std::string& out) {
  switch (v.type()) {
    case Json::value_t::null: out += "null"; return;
    case Json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; return;
    case Json::value_t::number_integer: out += std::to_string(v.get<int64_t>()); return;
    case Json::value_t::number_unsigned: out += std::to_string(v.get<uint64_t>()); return;
    case Json::value_t::number_float: AppendFloat(v.get<double>(), out); return;
    case Json::value_t::string: AppendString(v.get_ref<const std::string&>(), out); return;
    case Json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& item : v) {
        if (!first) out += ',';
        first = false;
        Append(item, out);
      }
      out += ']';
      return;
    }
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, item] : v.items()) {  // std::map: sorted by bytes, as Go sorts
        if (!first) out += ',';
        first = false;
        AppendString(key, out);
        out += ':';
        Append(item, out);
      }
      out += '}';
      return;
    }
    case Json::value_t::binary:
    case Json::value_t::discarded: out += "null"; return;
  }
}

}  // namespace

std::string GoJsonEncode(const Json& value) {
  std::string out;
  Append(value, out);
  return out;
}

}  // namespace syncbus
