#include "common/bus/headers.h"

#include <algorithm>
#include <cstdint>

namespace syncbus {
namespace {

int IntHeader(const amqp::Message& message, const char* name) {
  auto it = message.headers.find(name);
  if (it == message.headers.end() || !it->is_number_integer()) return 0;
  return static_cast<int>(std::clamp<int64_t>(it->get<int64_t>(), 0, 1000000));
}

// Returns from consumers' own queues in the copy's x-death: each dead-letters an unsettled
// return to the copy's lane at once (reason delivery_limit; an expired forward was never taken).
int ReturnsInDeaths(const amqp::Message& message) {
  int returned = 0;
  auto deaths = message.headers.find(kDeathHeader);
  if (deaths == message.headers.end() || !deaths->is_array()) return 0;
  for (const Json& death : *deaths) {
    if (!death.is_object() || death.value("reason", "") != "delivery_limit" ||
        death.value("queue", "").rfind(kConsumerQueuePrefix, 0) != 0)
      continue;
    auto count = death.find("count");
    if (count != death.end() && count->is_number_integer())
      returned += static_cast<int>(std::clamp<int64_t>(count->get<int64_t>(), 0, 1000000));
  }
  return returned;
}

}  // namespace

int AttemptOf(const amqp::Message& message) {
  return IntHeader(message, kAttemptHeader);
}

int UnsettledDeliveries(const amqp::Message& message) {
  const int counted = IntHeader(message, kDeliveryCountHeader);
  const int returned = ReturnsInDeaths(message);
  // A broker that writes x-last-death-* (RabbitMQ 3.13 on, 4.x) keeps a message's annotations
  // when it dead-letters it: a return from a consumer's own queue its holder died holding is in
  // the copy's x-delivery-count as well as in its x-death entry, the same delivery. 3.10 starts
  // the count again in each queue.
  const bool count_travels =
      message.headers.is_object() && message.headers.contains(kLastDeathQueueHeader);
  return IntHeader(message, kUnsettledHeader) +
         (count_travels ? std::max(counted, returned) : counted + returned);
}

int ReturnsFromConsumers(const amqp::Message& message) {
  return IntHeader(message, kReturnedHeader) + ReturnsInDeaths(message);
}

int QuarantinedFor(const amqp::Message& message) {
  return IntHeader(message, kQuarantinedHeader);
}

int HopsOf(const amqp::Message& message) {
  return IntHeader(message, kHopsHeader);
}

}  // namespace syncbus
