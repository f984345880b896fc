// PublishRate: how fast the publisher may send. A token bucket caps publishes at
// `max_per_second` (burst one second's worth); after the broker refused publishes (a full work
// queue, or one without a leader while a RabbitMQ node is down) nothing is sent for a hold-off
// that starts at 250 ms and doubles up to 2 s while refusals go on. Not thread-safe: owned by the
// Publisher, used on its thread; `clock` must outlive it.
#pragma once

#include <chrono>

#include "common/backoff.h"
#include "common/clock.h"

namespace syncbus::publisher {

class PublishRate {
 public:
  PublishRate(double max_per_second, Clock& clock);

  // Takes one publish's token; false when the bucket is empty (the publish waits).
  bool TakeToken();
  // Whether the hold-off after a refusal still runs at `now`.
  bool HoldingOff(SteadyTime now) const { return now < hold_off_until_; }
  // The broker refused publishes at `now`: returns the hold-off that now runs.
  std::chrono::milliseconds Refused(SteadyTime now);
  // Publishes went through: the next refusal starts from the first hold-off again (the one
  // running, if any, runs out).
  void Accepted() { hold_off_.Reset(); }
  // A new connection replaces the refusing channel: no hold-off, and the next refusal starts
  // from the first one.
  void Cleared();

 private:
  const double max_per_second_;
  Clock& clock_;
  double tokens_;
  SteadyTime tokens_at_;
  Backoff hold_off_;
  SteadyTime hold_off_until_{};
};

}  // namespace syncbus::publisher
