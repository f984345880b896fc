// Random: injectable randomness for jitter and backoff, so tests are deterministic.
// Implementations are thread-safe.
#pragma once

#include <cstdint>

namespace syncbus {

class Random {
 public:
  virtual ~Random() = default;
  // Uniform in [0, 1).
  virtual double Uniform() = 0;
};

// A process-wide randomly seeded generator (never null; lives forever).
Random& RealRandom();

}  // namespace syncbus
