#include "common/random_impl.h"

namespace syncbus {

Random& RealRandom() {
  static SeededRandom random{std::random_device{}()};
  return random;
}

}  // namespace syncbus
