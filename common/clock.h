// Clock: the one source of time for backoff, leases and schedules, so tests inject a FakeClock
// instead of sleeping. Implementations are thread-safe.
#pragma once

#include <chrono>

namespace syncbus {

using SteadyTime = std::chrono::steady_clock::time_point;
using WallTime = std::chrono::system_clock::time_point;
using Duration = std::chrono::steady_clock::duration;

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time for deadlines and intervals.
  virtual SteadyTime Now() const = 0;
  // Wall-clock time for timestamps written to the API (renewTime, lastTransitionTime).
  virtual WallTime WallNow() const = 0;
};

// The process-wide real clock (never null; lives forever).
Clock& RealClock();

}  // namespace syncbus
