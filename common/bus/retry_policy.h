// RetryPolicy: where a failed delivery goes next — the delay tier for its attempt (5 s, 30 s,
// 2 min, 6 min, 6 min, ...) or, after the last attempt, the dead-letter queue — and the headers
// that carry its history (attempt, first failure, last error), readable in the management UI.
// Pure functions; thread-compatible.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/amqp/session.h"
#include "common/bus/headers.h"
#include "common/clock.h"

namespace syncbus {

struct RetryPolicy {
  std::vector<std::chrono::seconds> tiers;  // from the topology
  int max_attempts = 8;
};

inline constexpr size_t kMaxErrorHeaderBytes = 256;

// The publication that retries `message` after one more failed attempt with `error`, or, when
// the attempts are used up, parks it in the dead-letter queue with reason "max-attempts".
// `permanent` failures skip the short tiers (they need an edit, not a quick retry); a tier
// shorter than `at_least` (a server's Retry-After) is skipped too.
amqp::Publication NextAttempt(const amqp::Delivery& delivery, const RetryPolicy& policy,
                              const std::string& error, bool permanent, WallTime now,
                              std::chrono::milliseconds at_least = std::chrono::milliseconds(0));

// Sends a delivery that could not run now (its cluster is busy on another consumer) to the
// shortest tier without counting an attempt or touching its failure history; its unsettled
// deliveries travel along.
amqp::Publication Defer(const amqp::Delivery& delivery, const RetryPolicy& policy);

// Forwards a delivery to the consumer `holder` that holds its cluster: to holder's own queue
// (amqp::ConsumerTopology) through the forward exchange, mandatory (holder has no queue: Publish
// fails with kNotFound), on its lane, one hop more, its unsettled deliveries travelling along as
// in Defer, so a poison request is parked at the delivery limit however often it is forwarded.
amqp::Publication Forwarded(const amqp::Delivery& delivery, const std::string& holder);

// A delivery that ended unsettled before (a consumer crashed, was killed or lost its connection
// holding it) and has not been held back for that yet: a request that crashes consumers must not
// run again at once, or it takes the whole pool down in a few seconds.
bool NeedsQuarantine(const amqp::Message& message);
// Holds such a delivery back without counting an attempt: to the tier of its unsettled count
// (1: the shortest, 2: the next, ...), the count travelling along. When it returns it may have to
// run alone in its consumer (RunsAlone, DeliveryLoop), so another crash takes no other work with
// it.
amqp::Publication Quarantine(const amqp::Delivery& delivery, const RetryPolicy& policy);
// Whether a request with `unsettled` deliveries that ended unsettled must run with nothing else
// in flight in its consumer. One such delivery is most often a lost connection, not a crash: a
// broker node's death or a consumer's new connection returns every delivery they held at once,
// and running each of those alone would stall every consumer behind them. So the first one is
// only held back; from the second on it runs alone, and so does one that a crash beside it would
// take over `delivery_limit` (0 = no limit of syncbus's): other work is never pushed into the
// dead-letter queue by a crash that was not its own.
bool RunsAlone(int unsettled, int delivery_limit);

// The copy of `delivery` that parks it in the dead-letter queue at once, with `reason` and
// `error`.
amqp::Publication ParkedCopy(const amqp::Delivery& delivery, const std::string& reason,
                             const std::string& error, WallTime now);

// Short, single-line, secret-free error text for headers (no bearer tokens, bounded length).
std::string SanitizeError(const std::string& error);

}  // namespace syncbus
