#include "consumer/event_correlator.h"

#include <algorithm>
#include <list>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "common/time_format.h"

namespace syncbus::consumer {
namespace {

// A map that keeps its `capacity` most recently used entries.
template <typename V>
class Lru {
 public:
  explicit Lru(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}

  V* Find(const std::string& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->second;
  }
  void Put(const std::string& key, V value) {
    if (V* held = Find(key)) {
      *held = std::move(value);
      return;
    }
    order_.emplace_front(key, std::move(value));
    index_[key] = order_.begin();
    if (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
  }

 private:
  using Entries = std::list<std::pair<std::string, V>>;
  size_t capacity_;
  Entries order_;
  std::unordered_map<std::string, typename Entries::iterator> index_;
};

std::string Join(std::initializer_list<const std::string*> parts) {
  std::string out;
  for (const std::string* p : parts) {
    out += *p;
    out += '\x1f';
  }
  return out;
}

// The source and the object: what the spam filter counts by.
std::string SpamKey(const EventRecord& e) {
  const EventObject& o = e.object;
  return Join(
      {&e.source_component, &e.source_host, &o.kind, &o.ns, &o.name, &o.uid, &o.api_version});
}
// ... and the type and reason: events that differ only by message aggregate.
std::string AggregateKey(const EventRecord& e) {
  return SpamKey(e) + Join({&e.type, &e.reason});
}
// ... and the message: one Event, counted.
std::string EventKey(const EventRecord& e) {
  return AggregateKey(e) + Join({&e.message});
}

std::string EventName(const std::string& object_name, WallTime now) {
  std::string suffix = fmt::format(
      ".{:x}",
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count());
  constexpr size_t kMaxName = 253;
  return object_name.substr(0, kMaxName - suffix.size()) + suffix;
}

}  // namespace

struct EventCorrelator::State {
  struct Bucket {
    double tokens = 0;
    SteadyTime last{};
  };
  struct Aggregate {
    std::set<std::string> messages;
    SteadyTime last{};
  };
  struct Observed {
    int64_t count = 0;
    WallTime first{};
    std::string name, resource_version;
  };
  explicit State(size_t entries) : spam(entries), aggregates(entries), observed(entries) {}
  Lru<Bucket> spam;
  Lru<Aggregate> aggregates;
  Lru<Observed> observed;
};

EventCorrelator::EventCorrelator(const Clock& clock, Options options)
    : clock_(clock), options_(options), state_(std::make_unique<State>(options_.cache_entries)) {}

EventCorrelator::~EventCorrelator() = default;

Correlated EventCorrelator::Correlate(EventRecord event) {
  const SteadyTime now = clock_.Now();
  const WallTime wall = clock_.WallNow();
  std::lock_guard lock(mu_);
  event.count = 1;
  event.first_timestamp = event.last_timestamp = wall;
  event.name = EventName(event.object.name, wall);
  event.resource_version.clear();

  // Aggregation: a new message of a known (object, type, reason) joins its set; the set's 10th
  // different message within the interval turns the events into one combined Event.
  std::string key = EventKey(event);
  const std::string aggregate_key = AggregateKey(event);
  State::Aggregate aggregate;
  if (State::Aggregate* held = state_->aggregates.Find(aggregate_key);
      held != nullptr && now - held->last <= options_.aggregate_interval) {
    aggregate = *held;
  }
  aggregate.messages.insert(event.message);
  aggregate.last = now;
  if (aggregate.messages.size() >= options_.aggregate_max_events) {
    aggregate.messages.erase(aggregate.messages.begin());  // the set stays below the limit
    event.message = "(combined from similar events): " + event.message;
    key = aggregate_key;
  }
  state_->aggregates.Put(aggregate_key, std::move(aggregate));

  // Counting: an Event seen before under this key is patched, not created again.
  Correlated out;
  if (State::Observed* seen = state_->observed.Find(key); seen != nullptr && seen->count > 0) {
    event.name = seen->name;
    event.resource_version = seen->resource_version;
    event.first_timestamp = seen->first;
    event.count = seen->count + 1;
    out.update = true;
  }
  state_->observed.Put(key,
                       {event.count, event.first_timestamp, event.name, event.resource_version});

  // The spam filter, per source and object: counted above even when held back here.
  const std::string spam_key = SpamKey(event);
  State::Bucket bucket{static_cast<double>(options_.spam_burst), now};
  if (State::Bucket* held = state_->spam.Find(spam_key)) bucket = *held;
  bucket.tokens = std::min<double>(
      options_.spam_burst,
      bucket.tokens + options_.spam_qps * std::chrono::duration<double>(now - bucket.last).count());
  bucket.last = now;
  out.skip = bucket.tokens < 1;
  if (!out.skip) bucket.tokens -= 1;
  state_->spam.Put(spam_key, bucket);
  out.event = std::move(event);
  return out;
}

void EventCorrelator::UpdateState(const EventRecord& event) {
  std::lock_guard lock(mu_);
  state_->observed.Put(EventKey(event),
                       {event.count, event.first_timestamp, event.name, event.resource_version});
}

Json EventRecord::ToJson() const {
  Json involved = {
      {"apiVersion", object.api_version}, {"kind", object.kind}, {"name", object.name}};
  if (!object.ns.empty()) involved["namespace"] = object.ns;
  if (!object.uid.empty()) involved["uid"] = object.uid;
  Json source = {{"component", source_component}};
  if (!source_host.empty()) source["host"] = source_host;
  return {{"apiVersion", "v1"},
          {"kind", "Event"},
          {"metadata", {{"name", name}, {"namespace", object.ns}}},
          {"involvedObject", involved},
          {"type", type},
          {"reason", reason},
          {"message", message},
          {"source", source},
          {"count", count},
          {"firstTimestamp", FormatRfc3339(first_timestamp)},
          {"lastTimestamp", FormatRfc3339(last_timestamp)}};
}

Json EventRecord::Patch() const {
  return {{"count", count}, {"lastTimestamp", FormatRfc3339(last_timestamp)}, {"message", message}};
}

EventRecord EventRecord::FromStored(const Json& event, EventRecord sent) {
  if (!event.is_object()) return sent;
  const Json meta = event.value("metadata", Json::object());
  if (meta.contains("name") && meta["name"].is_string())
    sent.name = meta["name"].get<std::string>();
  sent.resource_version = meta.contains("resourceVersion") && meta["resourceVersion"].is_string()
                              ? meta["resourceVersion"].get<std::string>()
                              : "";
  if (event.contains("count") && event["count"].is_number_integer())
    sent.count = event["count"].get<int64_t>();
  if (event.contains("firstTimestamp") && event["firstTimestamp"].is_string()) {
    if (auto first = ParseRfc3339(event["firstTimestamp"].get<std::string>()); first.ok()) {
      sent.first_timestamp = *first;
    }
  }
  return sent;
}

}  // namespace syncbus::consumer
