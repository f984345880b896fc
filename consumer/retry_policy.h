// RetryPolicy: where a failed delivery goes next — the delay tier for its attempt (5 s, 30 s,
// 2 min, 6 min, 6 min, ...) or, after the last attempt, the dead-letter queue — and the headers
// that carry its history (attempt, first failure, last error), readable in the management UI.
// Pure functions; thread-compatible.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/amqp/session.h"
#include "common/clock.h"

namespace syncbus::consumer {

struct RetryPolicy {
  std::vector<std::chrono::seconds> tiers;   // from the topology
  int max_attempts = 8;
};

inline constexpr size_t kMaxErrorHeaderBytes = 256;

// The attempt number recorded on a delivery (0 for a fresh request).
int AttemptOf(const amqp::Message& message);

// The publication that retries `message` after one more failed attempt with `error`, or, when
// the attempts are used up, parks it in the dead-letter queue with reason "max-attempts".
// `permanent` failures skip the short tiers (they need an edit, not a quick retry).
amqp::Publication NextAttempt(const amqp::Delivery& delivery, const RetryPolicy& policy,
                              const std::string& error, bool permanent, WallTime now);

// Parks a message in the dead-letter queue at once with `reason` and `error`.
amqp::Publication DeadLetter(const amqp::Delivery& delivery, const std::string& reason,
                             const std::string& error, WallTime now);

// Short, single-line, secret-free error text for headers (no bearer tokens, bounded length).
std::string SanitizeError(const std::string& error);

}  // namespace syncbus::consumer
