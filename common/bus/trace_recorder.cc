#include "common/bus/trace_recorder.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/random_impl.h"

namespace syncbus {
namespace {

prometheus::Family<prometheus::Counter>& EventsFamily(prometheus::Registry& registry) {
  return prometheus::BuildCounter()
      .Name("syncbus_trace_events_total")
      .Help(
          "Trace events by result: published to syncbus.trace, dropped because the buffer was "
          "full, or dropped because the broker refused them (or the connection was lost) on "
          "every try")
      .Register(registry);
}

}  // namespace

TraceRecorder::TraceRecorder(std::string actor, prometheus::Registry& registry, size_t capacity,
                             Clock* clock)
    : actor_(std::move(actor)),
      capacity_(std::max<size_t>(1, capacity)),
      clock_(clock != nullptr ? *clock : RealClock()),
      hold_off_({kFirstHoldOff, kMaxHoldOff, 2.0, /*jitter=*/0.0}, RealRandom()),
      published_(EventsFamily(registry).Add({{"result", "published"}})),
      dropped_full_(EventsFamily(registry).Add({{"result", "dropped-full"}})),
      dropped_failed_(EventsFamily(registry).Add({{"result", "dropped-failed"}})) {}

void TraceRecorder::Record(TraceEvent event) {
  event.actor = actor_;
  std::lock_guard lock(mu_);
  if (buffer_.size() >= capacity_) {
    buffer_.pop_front();
    dropped_full_.Increment();
  }
  buffer_.push_back({std::move(event), 0});
}

size_t TraceRecorder::buffered() const {
  std::lock_guard lock(mu_);
  return buffer_.size();
}

Result<size_t> TraceRecorder::Flush(amqp::Session& session, std::chrono::milliseconds timeout,
                                    size_t max_events) {
  if (clock_.Now() < held_until_) return size_t{0};
  std::vector<Buffered> taken;
  {
    std::lock_guard lock(mu_);
    size_t n = std::min(buffer_.size(), max_events);
    taken.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      taken.push_back(std::move(buffer_.front()));
      buffer_.pop_front();
    }
  }
  if (taken.empty()) return size_t{0};
  std::vector<const TraceEvent*> events;
  events.reserve(taken.size());
  for (const Buffered& b : taken) events.push_back(&b.event);
  std::vector<TraceBatch> batches = TraceBatches(events);
  std::vector<amqp::Publication> publications;
  publications.reserve(batches.size());
  for (TraceBatch& b : batches) publications.push_back(std::move(b.publication));
  std::vector<Status> results = session.PublishAll(publications, timeout);
  size_t ok = 0;
  size_t dropped = 0;
  Status first;
  std::vector<Buffered> again;  // refused or unconfirmed, with flushes left: kept, in order
  for (size_t k = 0; k < batches.size(); ++k) {
    const Status s = k < results.size() ? results[k] : Unavailable("trace batch not confirmed");
    if (s.ok()) {
      ok += batches[k].end - batches[k].first;
      continue;
    }
    if (first.ok()) first = s;
    for (size_t i = batches[k].first; i < batches[k].end; ++i) {
      if (++taken[i].failed_flushes < kMaxFlushes) {
        again.push_back(std::move(taken[i]));
      } else {
        ++dropped;
      }
    }
  }
  published_.Increment(static_cast<double>(ok));
  dropped_failed_.Increment(static_cast<double>(dropped));
  if (!again.empty()) {
    std::lock_guard lock(mu_);
    for (auto it = again.rbegin(); it != again.rend(); ++it) buffer_.push_front(std::move(*it));
    while (buffer_.size() > capacity_) {
      buffer_.pop_front();
      dropped_full_.Increment();
    }
  }
  if (!first.ok()) {
    const std::chrono::milliseconds hold_off = hold_off_.Next();
    held_until_ = clock_.Now() + hold_off;
    return first.Annotate("publishing trace events (" + std::to_string(again.size()) + " kept, " +
                          std::to_string(dropped) + " dropped; next attempt in " +
                          std::to_string(hold_off.count() / 1000) + " s)");
  }
  hold_off_.Reset();
  return ok;
}

}  // namespace syncbus
