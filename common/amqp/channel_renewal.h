// When to give up on a broker channel that keeps refusing publishes on a live connection
// (basic.nack, or no confirm in time) and open a new one (Session::RenewPublishChannel; the
// publisher opens a new connection, which holds no deliveries). RabbitMQ 3.10 keeps
// refusing every publish to a quorum queue on a channel that first used the queue while the
// queue was electing a new leader (its node had died), for as long as the channel lives; a new
// channel finds the new leader (docs/operations.md, "Faults and how long they take"). A
// genuinely full queue refuses too, so each renewal in a row waits twice as long as the one
// before, up to `max`, until a publish is accepted again. Thread-compatible.
#pragma once

#include <algorithm>
#include <chrono>

#include "common/clock.h"

namespace syncbus::amqp {

class ChannelRenewal {
 public:
  explicit ChannelRenewal(std::chrono::milliseconds first = std::chrono::seconds(3),
                          std::chrono::milliseconds max = std::chrono::seconds(60))
      : first_(first), max_(max), wait_(first) {}

  // Whether publishes refused since `since` (and still refused at `now`) call for a new
  // connection.
  bool Due(SteadyTime since, SteadyTime now) const { return now - since >= wait_; }
  // A new channel or connection is being opened for refusals: the next one waits longer.
  void Renewed() { wait_ = std::min(max_, wait_ * 2); }
  // A publish went through: the next streak of refusals starts from the first wait again.
  void Accepted() { wait_ = first_; }
  std::chrono::milliseconds wait() const { return wait_; }

 private:
  std::chrono::milliseconds first_, max_, wait_;
};

}  // namespace syncbus::amqp
