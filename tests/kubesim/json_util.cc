#include "tests/kubesim/json_util.h"

#include <cctype>
#include <cstdio>
#include <ctime>
#include <random>

namespace syncbus::kubesim {

const char* JsonTypeName(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::string: return "string";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "integer";
    case Json::value_t::number_float: return "number";
    case Json::value_t::object: return "object";
    case Json::value_t::array: return "array";
    default: return "unknown";
  }
}

const char* GoJsonTypeName(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "bool";
    case Json::value_t::string: return "string";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: return "number";
    case Json::value_t::object: return "object";
    case Json::value_t::array: return "array";
    default: return "unknown";
  }
}

namespace {

bool Digits(const std::string& s, size_t pos, size_t n) {
  if (pos + n > s.size()) return false;
  for (size_t i = pos; i < pos + n; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

int Num(const std::string& s, size_t pos, size_t n) {
  return std::stoi(s.substr(pos, n));
}

bool ValidDate(int y, int m, int d) {
  if (m < 1 || m > 12 || d < 1) return false;
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int max = kDays[m - 1];
  if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) max = 29;
  return d <= max;
}

// "hh:mm:ss[.frac](z|+hh:mm)" starting at pos, to the end of s (lower-cased input).
bool TimePart(const std::string& s, size_t pos, bool strict_ranges) {
  if (!Digits(s, pos, 2) || s.size() <= pos + 2 || s[pos + 2] != ':' || !Digits(s, pos + 3, 2) ||
      s.size() <= pos + 5 || s[pos + 5] != ':' || !Digits(s, pos + 6, 2)) {
    return false;
  }
  if (strict_ranges &&
      (Num(s, pos, 2) > 23 || Num(s, pos + 3, 2) > 59 || Num(s, pos + 6, 2) > 59)) {
    return false;
  }
  size_t i = pos + 8;
  if (i < s.size() && s[i] == '.') {
    size_t start = ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (i == start) return false;
  }
  if (i < s.size() && s[i] == 'z') return i + 1 == s.size();
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    return Digits(s, i + 1, 2) && s.size() == i + 6 && s[i + 3] == ':' && Digits(s, i + 4, 2);
  }
  return false;
}

}  // namespace

bool IsDate(const std::string& text) {
  if (text.size() != 10 || !Digits(text, 0, 4) || text[4] != '-' || !Digits(text, 5, 2) ||
      text[7] != '-' || !Digits(text, 8, 2)) {
    return false;
  }
  return ValidDate(Num(text, 0, 4), Num(text, 5, 2), Num(text, 8, 2));
}

bool IsDateTime(const std::string& text) {
  std::string s = text;
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s.size() < 11 || s[10] != 't' || !IsDate(s.substr(0, 10))) return false;
  return TimePart(s, 11, true);
}

namespace {
std::string FormatSeconds(WallTime t) {
  auto secs = std::chrono::floor<std::chrono::seconds>(t.time_since_epoch());
  std::time_t tt = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}
}  // namespace

std::string FormatTime(WallTime t) {
  return FormatSeconds(t) + "Z";
}

std::string NewUid() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  uint64_t a = rng(), b = rng();
  a = (a & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;
  b = (b & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xffff),
                static_cast<unsigned>(b >> 48),
                static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return buf;
}

}  // namespace syncbus::kubesim
