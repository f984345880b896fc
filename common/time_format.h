// RFC 3339 timestamps as the Kubernetes API writes them ("2026-01-02T03:04:05Z"), and the
// project's duration syntax ("500ms", "30s", "2m", "2h", "1h30m"). Pure functions.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"

namespace syncbus {

// Seconds precision, UTC, trailing Z (metav1.Time).
std::string FormatRfc3339(WallTime t);
// Millisecond precision (for logs and message timestamps): "2026-01-02T03:04:05.123Z".
std::string FormatRfc3339Millis(WallTime t);
// "2024-01-02T03:04:05.123456Z": always six fraction digits, as Go's metav1.MicroTime writes and
// insists on reading (Hive's ClusterSyncLease renewTime).
std::string FormatRfc3339Micro(WallTime t);
// Accepts "Z" or "+hh:mm" offsets and optional fractional seconds.
Result<WallTime> ParseRfc3339(std::string_view text);

Result<std::chrono::milliseconds> ParseDuration(std::string_view text);
// Go's time.ParseDuration ("2h", "1h30m", "1.5h", "90m0s", "300ms"; units ns, us, µs, ms, s, m,
// h; a sign; "0"), as Hive reads its durations; sub-millisecond parts are dropped.
Result<std::chrono::milliseconds> ParseGoDuration(std::string_view text);
std::string FormatDuration(std::chrono::milliseconds d);

}  // namespace syncbus
