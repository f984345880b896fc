// TraceRecorder: buffers trace events (trace_event.h) from any thread and publishes them to the
// trace exchange when its owner flushes with its own Session — the daemons flush on their broker
// thread, once per loop turn, in one pipelined batch. Tracing never holds up work: the buffer is
// bounded (the oldest events are dropped and counted), and a failed flush drops its batch.
// Record() is thread-safe; Flush() runs on the thread that owns the Session.
#pragma once

#include <chrono>
#include <deque>
#include <mutex>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "common/amqp/session.h"
#include "common/trace_event.h"

namespace syncbus {

class TraceRecorder {
 public:
  // `actor` is stamped on every event (the daemon's identity). `registry` must outlive this.
  TraceRecorder(std::string actor, prometheus::Registry& registry, size_t capacity = 20000);

  void Record(TraceEvent event);
  // Publishes everything buffered (at most `max_batch` events). Returns the number published;
  // a broker failure drops the batch, is counted, and is returned for the caller to log.
  Result<size_t> Flush(amqp::Session& session, std::chrono::milliseconds timeout, size_t max_batch = 2000);

  size_t buffered() const;
  const std::string& actor() const { return actor_; }

 private:
  const std::string actor_;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::deque<TraceEvent> buffer_;
  prometheus::Counter& published_;
  prometheus::Counter& dropped_full_;
  prometheus::Counter& dropped_failed_;
};

}  // namespace syncbus
