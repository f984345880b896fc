// Reconnector: brings a Session up (Connect, then the caller's setup: declaring the topology,
// consuming) and keeps retrying with exponential backoff until that works or the wait is
// cancelled. A connection that dropped soon after it came up counts as a failure, so a
// flapping broker is not hammered. Both daemons connect through it. Not thread-safe: one per
// Session, on the Session's thread.
#pragma once

#include <functional>
#include <optional>

#include "common/amqp/session.h"
#include "common/backoff.h"
#include "common/clock.h"
#include "common/random.h"

namespace syncbus::amqp {

class Reconnector {
 public:
  // Waits for `delay` (production: sleeps unless shutdown is requested). false = stop trying.
  using WaitFn = std::function<bool(Duration delay)>;
  // Runs after Connect on every (re)connect: declares the topology, consumes; a failure counts
  // as a failed attempt.
  using SetupFn = std::function<Status(Session& session)>;

  struct Options {
    Backoff::Options backoff;
    // A connection that lasted this long resets the backoff; a shorter one does not.
    Duration healthy_after = std::chrono::seconds(30);
    // Failed attempts before EnsureConnected() gives up with the last error; 0 = never.
    int max_attempts = 0;
  };

  Reconnector(Session& session, Options options, const Clock& clock, Random& random, WaitFn wait,
              SetupFn setup);

  // Ok at once when the session is connected. Otherwise connects (waiting the backoff between
  // attempts, and before the first one after a short-lived connection; a connection that
  // lasted healthy_after starts again without waiting). kCancelled when the
  // wait function says stop; the last error after max_attempts failures.
  Status EnsureConnected();

  // Failed attempts since the last successful connect; the last failure.
  int failures() const { return failures_; }
  const Status& last_error() const { return last_error_; }

 private:
  Status TryOnce();

  Session& session_;
  Options options_;
  const Clock& clock_;
  Backoff backoff_;
  WaitFn wait_;
  SetupFn setup_;
  std::optional<SteadyTime> connected_at_;
  int failures_ = 0;
  Status last_error_;
};

}  // namespace syncbus::amqp
