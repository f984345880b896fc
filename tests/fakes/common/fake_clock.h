// FakeClock: a Clock that moves only when a test calls Advance(). Thread-safe.
#pragma once

#include <atomic>

#include "common/clock.h"

namespace syncbus {

class FakeClock final : public Clock {
 public:
  // Starts at an arbitrary fixed point (wall time 2026-01-01T00:00:00Z).
  FakeClock() : wall_base_(std::chrono::sys_days{std::chrono::year{2026} / 1 / 1}) {}

  SteadyTime Now() const override { return SteadyTime{} + offset(); }
  WallTime WallNow() const override {
    return wall_base_ + std::chrono::duration_cast<WallTime::duration>(offset());
  }
  void Advance(Duration d) { offset_ns_.fetch_add(std::chrono::nanoseconds(d).count()); }

 private:
  Duration offset() const {
    return std::chrono::duration_cast<Duration>(std::chrono::nanoseconds(offset_ns_.load()));
  }
  WallTime wall_base_;
  std::atomic<long long> offset_ns_{0};
};

}  // namespace syncbus
