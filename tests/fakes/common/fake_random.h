// FakeRandom: returns a fixed value (default 0.5) or a scripted sequence. Thread-safe.
#pragma once

#include <mutex>
#include <vector>

#include "common/random.h"

namespace syncbus {

class FakeRandom final : public Random {
 public:
  explicit FakeRandom(double value = 0.5) : values_{value} {}
  explicit FakeRandom(std::vector<double> sequence) : values_(std::move(sequence)) {}
  double Uniform() override {
    std::lock_guard lock(mu_);
    double v = values_[next_ % values_.size()];
    ++next_;
    return v;
  }

 private:
  std::mutex mu_;
  std::vector<double> values_;
  size_t next_ = 0;
};

}  // namespace syncbus
