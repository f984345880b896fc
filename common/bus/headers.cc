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
  return IntHeader(message, kUnsettledHeader) + IntHeader(message, kDeliveryCountHeader) +
         ReturnsInDeaths(message);
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
