#include "common/amqp/reconnect.h"

#include <utility>

#include "common/log.h"

namespace syncbus::amqp {

Reconnector::Reconnector(Session& session, Options options, const Clock& clock, Random& random,
                         WaitFn wait, SetupFn setup)
    : session_(session),
      options_(options),
      clock_(clock),
      backoff_(options_.backoff, random),
      wait_(std::move(wait)),
      setup_(std::move(setup)) {}

Status Reconnector::TryOnce() {
  SYNCBUS_RETURN_IF_ERROR(session_.Connect());
  return setup_(session_);
}

Status Reconnector::EnsureConnected() {
  if (session_.connected()) return Status::Ok();
  bool wait_first = false;
  if (connected_at_) {
    const bool healthy = clock_.Now() - *connected_at_ >= options_.healthy_after;
    connected_at_.reset();
    if (healthy) {
      backoff_.Reset();
    } else {
      wait_first = true;
    }
  }
  for (;;) {
    if (wait_first) {
      const auto delay = backoff_.Next();
      if (!wait_(delay)) {
        return Status(
            Code::kCancelled,
            "reconnecting to the AMQP broker was cancelled" +
                (last_error_.ok() ? std::string() : "; last error: " + last_error_.message()));
      }
    }
    wait_first = true;
    Status attempt = TryOnce();
    if (attempt.ok()) {
      if (failures_ > 0) log::Info("amqp: reconnected", {{"failed_attempts", failures_}});
      failures_ = 0;
      connected_at_ = clock_.Now();
      return Status::Ok();
    }
    session_.Close();
    ++failures_;
    last_error_ = attempt;
    const bool permanent = !IsTransient(attempt.code());
    const log::Level level = permanent ? log::Level::kError : log::Level::kWarn;
    if (log::Enabled(level)) {
      log::Write(level, "broker unavailable, retrying",
                 {{"error", attempt.ToString()}, {"attempt", failures_}});
    }
    if (options_.max_attempts > 0 && failures_ >= options_.max_attempts) {
      return attempt.Annotate("giving up after " + std::to_string(failures_) + " attempts");
    }
  }
}

}  // namespace syncbus::amqp
