// TraceFlusher: publishes a TraceRecorder's events from a thread and a broker connection of its
// own (rabbitmq-c: one connection per thread), so that a daemon's own publishing never waits for
// the trace stream's confirms. (The publisher flushed after every batch of requests: at 100,000
// clusters, a fifth or more of the time its start-up rounds took.) Turn() is one step: service
// the connection's heartbeats, connect when there are events and no connection, not again before
// a growing back-off after a failed connect, then flush what is buffered (the recorder holds off
// after a failed flush and bounds what it buffers). Start() runs a turn every `period` of real
// time on the flusher's thread until Stop(), which runs a last one. Start() and Stop() are called
// by the owner; Turn() only by one thread at a time. The recorder, clock and random must outlive
// it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "common/amqp/session.h"
#include "common/backoff.h"
#include "common/bus/trace_recorder.h"
#include "common/clock.h"
#include "common/random.h"
#include "common/status.h"

namespace syncbus {

class TraceFlusher {
 public:
  static constexpr std::chrono::milliseconds kPeriod{250};

  TraceFlusher(TraceRecorder& recorder, std::unique_ptr<amqp::Session> session, Clock& clock,
               Random& random, std::chrono::milliseconds period = kPeriod);
  ~TraceFlusher();  // Stop()
  TraceFlusher(const TraceFlusher&) = delete;
  TraceFlusher& operator=(const TraceFlusher&) = delete;

  // Connects if needed and flushes; the number of events published, or why none could be.
  Result<size_t> Turn();
  void Start();
  // Runs a last turn (events recorded before it are published if the broker takes them), then
  // joins the thread and closes the connection. Idempotent.
  void Stop();

 private:
  TraceRecorder& recorder_;
  std::unique_ptr<amqp::Session> session_;
  Clock& clock_;
  const std::chrono::milliseconds period_;
  Backoff reconnect_;           // Turn() only
  SteadyTime connect_after_{};  // Turn() only
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace syncbus
