// SeededRandom: Random over std::mt19937_64, guarded by a mutex. Thread-safe.
#pragma once

#include <mutex>
#include <random>

#include "common/random.h"

namespace syncbus {

class SeededRandom final : public Random {
 public:
  explicit SeededRandom(uint64_t seed) : engine_(seed) {}
  double Uniform() override {
    std::lock_guard lock(mu_);
    return std::uniform_real_distribution<double>(0.0, 1.0)(engine_);
  }

 private:
  std::mutex mu_;
  std::mt19937_64 engine_;
};

}  // namespace syncbus
