#include "publisher/publish_rate.h"

#include <algorithm>

#include "common/random.h"

namespace syncbus::publisher {
namespace {

// A nack means a full work queue, or one without a leader while a RabbitMQ node is down (a
// quorum queue elects another within seconds): retry soon, and never wait long once the queue
// is back. A full queue costs the broker one refused batch per hold-off. No jitter: there is one
// publishing leader.
constexpr Backoff::Options kRefusalHoldOff{std::chrono::milliseconds(250),
                                           std::chrono::milliseconds(2000), 2.0,
                                           /*jitter=*/0.0};

}  // namespace

PublishRate::PublishRate(double max_per_second, Clock& clock)
    : max_per_second_(max_per_second),
      clock_(clock),
      tokens_(max_per_second),
      tokens_at_(clock.Now()),
      hold_off_(kRefusalHoldOff, RealRandom()) {}

bool PublishRate::TakeToken() {
  SteadyTime now = clock_.Now();
  double elapsed = std::chrono::duration<double>(now - tokens_at_).count();
  tokens_at_ = now;
  tokens_ = std::min(max_per_second_, tokens_ + elapsed * max_per_second_);
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

std::chrono::milliseconds PublishRate::Refused(SteadyTime now) {
  std::chrono::milliseconds hold_off = hold_off_.Next();
  hold_off_until_ = now + hold_off;
  return hold_off;
}

void PublishRate::Cleared() {
  hold_off_.Reset();
  hold_off_until_ = SteadyTime{};
}

}  // namespace syncbus::publisher
