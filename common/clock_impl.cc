#include "common/clock_impl.h"

namespace syncbus {

Clock& RealClock() {
  static SystemClock clock;
  return clock;
}

}  // namespace syncbus
