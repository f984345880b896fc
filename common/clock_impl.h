// SystemClock: Clock backed by std::chrono::steady_clock and system_clock. Thread-safe, stateless.
#pragma once

#include "common/clock.h"

namespace syncbus {

class SystemClock final : public Clock {
 public:
  SteadyTime Now() const override { return std::chrono::steady_clock::now(); }
  WallTime WallNow() const override { return std::chrono::system_clock::now(); }
};

}  // namespace syncbus
