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

}  // namespace

int AttemptOf(const amqp::Message& message) {
  return IntHeader(message, kAttemptHeader);
}

int UnsettledDeliveries(const amqp::Message& message) {
  return IntHeader(message, kUnsettledHeader) + IntHeader(message, kDeliveryCountHeader);
}

int QuarantinedFor(const amqp::Message& message) {
  return IntHeader(message, kQuarantinedHeader);
}

int HopsOf(const amqp::Message& message) {
  return IntHeader(message, kHopsHeader);
}

}  // namespace syncbus
