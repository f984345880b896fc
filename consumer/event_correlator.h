// EventCorrelator: decides, as client-go's event recorder does (tools/record, EventCorrelator),
// how an Event reaches the API server so that a failing object cannot flood it:
//   - aggregation: events of one object, type and reason that differ only by message are
//     combined once 10 different messages came within 10 minutes: one Event whose message is
//     "(combined from similar events): <latest message>", counted from then on;
//   - counting: an Event seen before (same object, type, reason and message) is not created
//     again: the existing one is patched with count + 1 and the new lastTimestamp (and message);
//   - spam filter: per object, a token bucket of 25 events refilled at one per 5 minutes; what
//     it holds back is counted but not written (the next written one carries the count).
// Caches are LRUs of 4,096 entries each. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "common/json.h"

namespace syncbus::consumer {

// An event's involvedObject.
struct EventObject {
  std::string api_version, kind, ns, name, uid;
};

// A core/v1 Event as the correlator and the recorder handle it.
struct EventRecord {
  EventObject object;
  std::string type, reason, message;
  std::string source_component, source_host;
  // Set by the correlator (and the server's answer: UpdateState).
  std::string name;  // metadata.name, "<object name>.<hex Unix nanoseconds>"
  std::string resource_version;
  int64_t count = 1;
  WallTime first_timestamp{}, last_timestamp{};

  // The core/v1 Event object (POST body).
  Json ToJson() const;
  // The strategic merge patch of a repeated Event: count, lastTimestamp and message.
  Json Patch() const;
  // Reads back what the server stored (name, resourceVersion, count, firstTimestamp).
  static EventRecord FromStored(const Json& event, EventRecord sent);
};

struct Correlated {
  EventRecord event;
  bool skip = false;    // held back by the spam filter: write nothing
  bool update = false;  // an Event already written: patch it (count > 1)
};

class EventCorrelator {
 public:
  struct Options {
    size_t cache_entries = 4096;
    int spam_burst = 25;
    double spam_qps = 1.0 / 300;
    size_t aggregate_max_events = 10;
    std::chrono::seconds aggregate_interval{600};
  };
  explicit EventCorrelator(const Clock& clock) : EventCorrelator(clock, Options{}) {}
  EventCorrelator(const Clock& clock, Options options);
  ~EventCorrelator();
  EventCorrelator(const EventCorrelator&) = delete;
  EventCorrelator& operator=(const EventCorrelator&) = delete;

  // `event` with object, type, reason, message and source set.
  Correlated Correlate(EventRecord event);
  // The server stored `event` (as EventRecord::FromStored reads it): later repeats patch it.
  void UpdateState(const EventRecord& event);

 private:
  struct State;
  const Clock& clock_;
  const Options options_;
  std::mutex mu_;
  std::unique_ptr<State> state_;  // guarded by mu_
};

}  // namespace syncbus::consumer
