#include "common/backoff.h"

#include <algorithm>
#include <cmath>

namespace syncbus {

std::chrono::milliseconds Backoff::Next() {
  double base = static_cast<double>(options_.initial.count()) *
                std::pow(options_.factor, std::min(attempts_, 62));
  base = std::min(base, static_cast<double>(options_.max.count()));
  ++attempts_;
  double scale = 1.0 + options_.jitter * (2.0 * random_.Uniform() - 1.0);
  double ms = std::min(base * scale, static_cast<double>(options_.max.count()));
  return std::chrono::milliseconds(static_cast<long long>(std::max(ms, 1.0)));
}

}  // namespace syncbus
