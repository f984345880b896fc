// Backoff: exponential delays with jitter (e.g. 800 ms -> 30 s), reset when healthy.
// Computes delays only; the caller waits with its own clock. Not thread-safe (one per loop).
#pragma once

#include <chrono>

#include "common/random.h"

namespace syncbus {

class Backoff {
 public:
  struct Options {
    std::chrono::milliseconds initial{800};
    std::chrono::milliseconds max{30000};
    double factor = 2.0;
    double jitter = 0.2;  // each delay is scaled by a factor drawn from [1 - jitter, 1 + jitter]
  };
  Backoff(Options options, Random& random) : options_(options), random_(random) {}

  // The delay before the next attempt; grows with each call.
  std::chrono::milliseconds Next();
  void Reset() { attempts_ = 0; }
  int attempts() const { return attempts_; }

 private:
  Options options_;
  Random& random_;
  int attempts_ = 0;
};

}  // namespace syncbus
