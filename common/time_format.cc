#include "common/time_format.h"

#include <cctype>
#include <cstdio>
#include <ctime>

namespace syncbus {
namespace {

std::string Format(WallTime t, int fraction_digits) {
  auto secs = std::chrono::floor<std::chrono::seconds>(t);
  std::time_t tt = std::chrono::system_clock::to_time_t(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[40];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out(buf, n);
  if (fraction_digits == 3) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - secs).count();
    char frac[8];
    std::snprintf(frac, sizeof frac, ".%03d", static_cast<int>(ms));
    out += frac;
  } else if (fraction_digits == 6) {
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(t - secs).count();
    char frac[12];
    std::snprintf(frac, sizeof frac, ".%06d", static_cast<int>(us));
    out += frac;
  }
  out += 'Z';
  return out;
}

bool ReadInt(std::string_view s, size_t pos, size_t len, int& out) {
  if (pos + len > s.size()) return false;
  out = 0;
  for (size_t i = pos; i < pos + len; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}

}  // namespace

std::string FormatRfc3339(WallTime t) {
  return Format(t, 0);
}
std::string FormatRfc3339Millis(WallTime t) {
  return Format(t, 3);
}
std::string FormatRfc3339Micro(WallTime t) {
  return Format(t, 6);
}

Result<WallTime> ParseRfc3339(std::string_view s) {
  int y, mo, d, h, mi, sec;
  auto bad = [&] { return InvalidArgument("invalid RFC 3339 time \"" + std::string(s) + "\""); };
  if (s.size() < 20 || !ReadInt(s, 0, 4, y) || s[4] != '-' || !ReadInt(s, 5, 2, mo) ||
      s[7] != '-' || !ReadInt(s, 8, 2, d) || (s[10] != 'T' && s[10] != 't') ||
      !ReadInt(s, 11, 2, h) || s[13] != ':' || !ReadInt(s, 14, 2, mi) || s[16] != ':' ||
      !ReadInt(s, 17, 2, sec)) {
    return bad();
  }
  size_t pos = 19;
  std::chrono::nanoseconds frac{0};
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    long long scale = 100000000, ns = 0;
    size_t start = pos;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
      ns += (s[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start) return bad();
    frac = std::chrono::nanoseconds(ns);
  }
  std::chrono::minutes offset{0};
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int oh, om;
    if (!ReadInt(s, pos + 1, 2, oh) || pos + 3 >= s.size() || s[pos + 3] != ':' ||
        !ReadInt(s, pos + 4, 2, om)) {
      return bad();
    }
    offset = std::chrono::minutes(oh * 60 + om) * (s[pos] == '-' ? -1 : 1);
    pos += 6;
  } else {
    return bad();
  }
  if (pos != s.size()) return bad();
  std::chrono::year_month_day ymd{std::chrono::year{y},
                                  std::chrono::month{static_cast<unsigned>(mo)},
                                  std::chrono::day{static_cast<unsigned>(d)}};
  if (!ymd.ok() || h > 23 || mi > 59 || sec > 60) return bad();
  std::chrono::sys_seconds whole = std::chrono::sys_days{ymd} + std::chrono::hours(h) +
                                   std::chrono::minutes(mi) + std::chrono::seconds(sec) - offset;
  // WallTime counts nanoseconds (years 1678 to 2262). Earlier times, such as Go's zero time
  // (year 1) that Hive writes for "never", read as 1900-01-01, later ones as 2200-01-01: still
  // before or after anything syncbus compares them with, and safe to subtract from.
  constexpr std::chrono::sys_days kEarliest{std::chrono::year{1900} / 1 / 1};
  constexpr std::chrono::sys_days kLatest{std::chrono::year{2200} / 1 / 1};
  if (whole < kEarliest) return WallTime(kEarliest.time_since_epoch());
  if (whole >= kLatest) return WallTime(kLatest.time_since_epoch());
  return std::chrono::time_point_cast<WallTime::duration>(whole) + frac;
}

Result<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("invalid duration \"" + std::string(text) + "\": " + why +
                           " (use e.g. 500ms, 30s, 2m, 2h, 1h30m)");
  };
  if (text.empty()) return bad("empty");
  std::chrono::milliseconds total{0};
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = pos;
    long long value = 0;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      value = value * 10 + (text[pos] - '0');
      if (value > 1'000'000'000LL) return bad("too large");
      ++pos;
    }
    if (pos == start) return bad("expected a number");
    size_t unit_start = pos;
    while (pos < text.size() && std::isalpha(static_cast<unsigned char>(text[pos]))) ++pos;
    std::string_view unit = text.substr(unit_start, pos - unit_start);
    if (unit == "ms")
      total += std::chrono::milliseconds(value);
    else if (unit == "s")
      total += std::chrono::seconds(value);
    else if (unit == "m")
      total += std::chrono::minutes(value);
    else if (unit == "h")
      total += std::chrono::hours(value);
    else
      return bad(unit.empty() ? "missing unit" : "unknown unit \"" + std::string(unit) + "\"");
  }
  return total;
}

Result<std::chrono::milliseconds> ParseGoDuration(std::string_view text) {
  auto bad = [&] {
    return InvalidArgument("time: invalid duration \"" + std::string(text) + "\"");
  };
  std::string_view s = text;
  bool negative = false;
  if (!s.empty() && (s.front() == '-' || s.front() == '+')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  if (s == "0") return std::chrono::milliseconds(0);
  if (s.empty()) return bad();
  long double total_ns = 0;
  while (!s.empty()) {
    size_t i = 0;
    long double value = 0;
    bool digits = false;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      value = value * 10 + (s[i] - '0');
      digits = true;
      ++i;
    }
    if (i < s.size() && s[i] == '.') {
      ++i;
      long double scale = 0.1L;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
        value += (s[i] - '0') * scale;
        scale /= 10;
        digits = true;
        ++i;
      }
    }
    if (!digits) return bad();
    size_t unit_start = i;
    while (i < s.size() && s[i] != '.' && !std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    std::string_view unit = s.substr(unit_start, i - unit_start);
    long double ns;
    if (unit == "ns")
      ns = 1;
    else if (unit == "us" || unit == "\u00b5s" || unit == "\u03bcs")
      ns = 1e3L;
    else if (unit == "ms")
      ns = 1e6L;
    else if (unit == "s")
      ns = 1e9L;
    else if (unit == "m")
      ns = 60e9L;
    else if (unit == "h")
      ns = 3600e9L;
    else
      return bad();
    total_ns += value * ns;
    if (total_ns > 9.2e18L) return bad();  // beyond Go's int64 nanoseconds
    s.remove_prefix(i);
  }
  auto ms = std::chrono::milliseconds(static_cast<long long>(total_ns / 1e6L));
  return negative ? -ms : ms;
}

std::string FormatDuration(std::chrono::milliseconds d) {
  auto ms = d.count();
  if (ms % 3600000 == 0 && ms != 0) return std::to_string(ms / 3600000) + "h";
  if (ms % 60000 == 0 && ms != 0) return std::to_string(ms / 60000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace syncbus
