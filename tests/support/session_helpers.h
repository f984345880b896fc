// Helpers for tests that drive an amqp::Session on the broker fixture: a work publication, and
// the next delivery or a failed test. Stateless; thread-safe as far as the session is.
#pragma once

#include <chrono>
#include <string>

#include "common/amqp/session.h"

namespace syncbus::testing {

// How long one broker round trip may take in a test.
inline constexpr std::chrono::milliseconds kBrokerTimeout{10000};

// A publication to the work exchange on `lane`, with `body` as its body and message id.
amqp::Publication Work(const std::string& lane, const std::string& body);

// The messages ready in `queue` (exact, at once: a passive declare); fails the running test when
// the broker does not answer.
uint32_t ReadyMessages(amqp::Session& session, const std::string& queue);

// The next delivery on `session`; fails the running test when none comes within `timeout`.
amqp::Delivery NextOrFail(amqp::Session& session,
                          std::chrono::milliseconds timeout = kBrokerTimeout);

}  // namespace syncbus::testing
