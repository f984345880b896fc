#include "tests/support/session_helpers.h"

#include <doctest/doctest.h>

#include "common/bus/topology.h"

namespace syncbus::testing {

amqp::Publication Work(const std::string& lane, const std::string& body) {
  amqp::Publication p{amqp::kWorkExchange, lane, amqp::Message{}};
  p.message.body = body;
  p.message.message_id = body;
  return p;
}

uint32_t ReadyMessages(amqp::Session& session, const std::string& queue) {
  auto info = session.Inspect(queue);
  REQUIRE_MESSAGE(info.ok(), info.status().ToString());
  return info->messages;
}

amqp::Delivery NextOrFail(amqp::Session& session, std::chrono::milliseconds timeout) {
  auto d = session.Next(timeout);
  REQUIRE_MESSAGE(d.ok(), d.status().ToString());
  REQUIRE_MESSAGE(d->has_value(), "no delivery within the timeout");
  return **d;
}

}  // namespace syncbus::testing
