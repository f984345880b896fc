// TraceRecorder: buffers trace events (trace_event.h) from any thread and publishes them to the
// trace exchange when its owner flushes with its own Session (a TraceFlusher's), many events to
// a message, the messages of a flush pipelined. Tracing hardly holds up work: the buffer is
// bounded (the oldest events are dropped and counted), a flush waits at most kFlushTimeout for
// its confirms, and after a failed flush the next ones are skipped for a growing hold-off: a
// trace stream without a leader (its node died) costs a daemon one short wait per hold-off, not
// its confirm timeout on every turn. Events a flush could not publish (refused, unconfirmed, the
// connection lost) stay buffered for the next, up to kMaxFlushes tries each: one that may have
// reached the broker unconfirmed can be read twice, and readers drop the copy.
// Record() is thread-safe; Flush() runs on the thread that owns the Session.
#pragma once

#include <chrono>
#include <deque>
#include <mutex>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "common/amqp/session.h"
#include "common/backoff.h"
#include "common/bus/trace_event.h"
#include "common/clock.h"

namespace syncbus {

class TraceRecorder {
 public:
  static constexpr std::chrono::milliseconds kFlushTimeout{2000};
  static constexpr std::chrono::milliseconds kFirstHoldOff{5000};
  static constexpr std::chrono::milliseconds kMaxHoldOff{60000};
  static constexpr int kMaxFlushes = 3;  // tries per event before it is dropped and counted

  // `actor` is stamped on every event (the daemon's identity). `registry` and `clock` (null:
  // RealClock()) must outlive this.
  TraceRecorder(std::string actor, prometheus::Registry& registry, size_t capacity = 20000,
                Clock* clock = nullptr);

  void Record(TraceEvent event);
  // Publishes everything buffered (at most `max_events` events), waiting up to `timeout` for the
  // confirms. Returns the number published; a broker failure keeps the events it failed (those
  // on their last try are dropped and counted), starts a hold-off and is returned for the caller
  // to log. During a hold-off nothing is published (0 is returned; the events stay buffered).
  Result<size_t> Flush(amqp::Session& session, std::chrono::milliseconds timeout = kFlushTimeout,
                       size_t max_events = 2000);

  size_t buffered() const;
  const std::string& actor() const { return actor_; }

 private:
  const std::string actor_;
  const size_t capacity_;
  Clock& clock_;
  Backoff hold_off_;         // Flush() thread only
  SteadyTime held_until_{};  // Flush() thread only
  mutable std::mutex mu_;
  struct Buffered {
    TraceEvent event;
    int failed_flushes = 0;
  };
  std::deque<Buffered> buffer_;
  prometheus::Counter& published_;
  prometheus::Counter& dropped_full_;
  prometheus::Counter& dropped_failed_;
};

}  // namespace syncbus
