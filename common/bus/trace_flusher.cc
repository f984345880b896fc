#include "common/bus/trace_flusher.h"

#include "common/log.h"

namespace syncbus {

TraceFlusher::TraceFlusher(TraceRecorder& recorder, std::unique_ptr<amqp::Session> session,
                           Clock& clock, Random& random, std::chrono::milliseconds period)
    : recorder_(recorder),
      session_(std::move(session)),
      clock_(clock),
      period_(period),
      reconnect_(Backoff::Options{}, random) {}

TraceFlusher::~TraceFlusher() {
  Stop();
}

Result<size_t> TraceFlusher::Turn() {
  // Heartbeats are answered only inside a call: left idle for two intervals (a quiet consumer),
  // the connection would be closed by the broker and the next batch lost with it. A connection
  // lost here is opened again when there is something to publish.
  if (session_->connected()) (void)session_->Poll();
  if (recorder_.buffered() == 0) return size_t{0};
  if (!session_->connected()) {
    if (clock_.Now() < connect_after_) return size_t{0};  // the events stay buffered
    if (Status connected = session_->Connect(); !connected.ok()) {
      const std::chrono::milliseconds wait = reconnect_.Next();
      connect_after_ = clock_.Now() + wait;
      return connected.Annotate("connecting to publish trace events (next attempt in " +
                                std::to_string(wait.count()) + " ms)");
    }
    reconnect_.Reset();
  }
  return recorder_.Flush(*session_);
}

void TraceFlusher::Start() {
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      stop_cv_.wait_for(lock, period_, [this] { return stopping_; });
      if (stopping_) break;
      lock.unlock();
      if (auto turn = Turn(); !turn.ok())
        log::Warn("trace events not published", {{"error", turn.status().message()}});
      lock.lock();
    }
  });
}

void TraceFlusher::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (auto last = Turn(); !last.ok())
    log::Warn("trace events not published at shutdown", {{"error", last.status().message()}});
  session_->Close();
}

}  // namespace syncbus
