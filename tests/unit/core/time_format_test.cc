#include "common/time_format.h"

#include <doctest/doctest.h>

using namespace syncbus;
using namespace std::chrono_literals;

TEST_CASE("RFC 3339 round trip and offsets") {
  auto t = ParseRfc3339("2026-03-04T05:06:07Z");
  REQUIRE(t.ok());
  CHECK(FormatRfc3339(*t) == "2026-03-04T05:06:07Z");
  auto offset = ParseRfc3339("2026-03-04T07:06:07.250+02:00");
  REQUIRE(offset.ok());
  CHECK(FormatRfc3339Millis(*offset) == "2026-03-04T05:06:07.250Z");
  CHECK(*offset - *t == 250ms);
}

TEST_CASE("RFC 3339 rejects malformed input") {
  for (const char* bad :
       {"", "2026-03-04", "2026-03-04T05:06:07", "2026-13-04T05:06:07Z", "2026-02-30T05:06:07Z",
        "2026-03-04T05:06:07Zjunk", "2026-03-04T05:06:07.Z", "2026-03-04 05:06:07Z"}) {
    CAPTURE(bad);
    CHECK_FALSE(ParseRfc3339(bad).ok());
  }
}

TEST_CASE("durations parse and format") {
  CHECK(*ParseDuration("500ms") == 500ms);
  CHECK(*ParseDuration("30s") == 30s);
  CHECK(*ParseDuration("2h") == 2h);
  CHECK(*ParseDuration("1h30m") == 90min);
  CHECK_FALSE(ParseDuration("").ok());
  CHECK_FALSE(ParseDuration("10").ok());
  CHECK_FALSE(ParseDuration("5d").ok());
  CHECK_FALSE(ParseDuration("s").ok());
  CHECK(FormatDuration(2h) == "2h");
  CHECK(FormatDuration(90s) == "90s");
  CHECK(FormatDuration(1500ms) == "1500ms");
}

TEST_CASE("MicroTime: six fraction digits, as Go's metav1.MicroTime writes and reads them") {
  auto t = ParseRfc3339("2024-01-02T03:04:05.250Z");
  REQUIRE(t.ok());
  CHECK(FormatRfc3339Micro(*t) == "2024-01-02T03:04:05.250000Z");
  auto whole = ParseRfc3339("2024-01-02T03:04:05Z");
  REQUIRE(whole.ok());
  CHECK(FormatRfc3339Micro(*whole) == "2024-01-02T03:04:05.000000Z");
}

TEST_CASE("Go durations, as HiveConfig's syncSetReapplyInterval is written") {
  using namespace std::chrono_literals;
  CHECK(*ParseGoDuration("2h") == 2h);
  CHECK(*ParseGoDuration("1h30m") == 90min);
  CHECK(*ParseGoDuration("1.5h") == 90min);
  CHECK(*ParseGoDuration("2h0m0s") == 2h);
  CHECK(*ParseGoDuration("300ms") == 300ms);
  CHECK(*ParseGoDuration("0") == 0ms);
  CHECK(*ParseGoDuration("-1m") == -1min);
  CHECK(*ParseGoDuration("1500us") == 1ms);
  for (const char* bad : {"", "h", "1", "1x", "1.h.", "--1s"})
    CHECK_FALSE(ParseGoDuration(bad).ok());
}

TEST_CASE("Go's zero time and times beyond 2262 are clamped, not overflowed") {
  auto zero = ParseRfc3339("0001-01-01T00:00:00.000000Z");
  REQUIRE(zero.ok());
  CHECK(FormatRfc3339(*zero) == "1900-01-01T00:00:00Z");
  auto far = ParseRfc3339("9999-12-31T23:59:59Z");
  REQUIRE(far.ok());
  CHECK(FormatRfc3339(*far) == "2200-01-01T00:00:00Z");
  auto now = ParseRfc3339("2026-11-26T11:40:00Z");
  REQUIRE(now.ok());
  CHECK(*zero < *now);
  CHECK(*now - *zero > std::chrono::hours(24 * 365 * 100));
}
