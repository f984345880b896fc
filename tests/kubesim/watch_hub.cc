#include "tests/kubesim/watch_hub.h"

#include <algorithm>

namespace syncbus::kubesim {
namespace {

std::string EventLine(const char* type, const std::string& object_json) {
  std::string line;
  line.reserve(object_json.size() + 32);
  line += "{\"type\":\"";
  line += type;
  line += "\",\"object\":";
  line += object_json;
  line += "}\n";
  return line;
}

std::string BookmarkLine(const ResourceType& type, const ResponseForm& form, uint64_t rv) {
  if (form.metadata()) {
    // kube-apiserver's: an empty PartialObjectMetadata with only the resourceVersion.
    return EventLine("BOOKMARK", "{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"" +
                                     form.ApiVersion() + "\",\"metadata\":{\"resourceVersion\":\"" +
                                     std::to_string(rv) + "\",\"creationTimestamp\":null}}");
  }
  Json object = {{"kind", type.kind},
                 {"apiVersion", type.api_version},
                 {"metadata", {{"resourceVersion", std::to_string(rv)}}}};
  return EventLine("BOOKMARK", object.dump());
}

// The object of an event as the watch asked for it.
std::string EventObject(const WatchHub::Spec& spec, const StoredObject& object) {
  return spec.form.metadata() ? MetadataJson(spec.form, object) : FullJson(*spec.type, object);
}

}  // namespace

WatchHub::WatchHub(const Clock& clock, WatchWindow window)
    : clock_(clock),
      window_{std::max<size_t>(window.min_events, 1),
              std::max(window.max_events, std::max<size_t>(window.min_events, 1)), window.fresh},
      next_compaction_(clock.Now() + kCompactionInterval) {}

void WatchHub::ResizeLocked(TypeLog& log, SteadyTime now) const {
  if (log.in_window < log.capacity || window_.min_events == window_.max_events) return;
  const std::deque<Recorded>& events = log.events;
  if (now - events[events.size() - log.in_window].at < window_.fresh) {
    log.capacity = std::min(log.capacity * 2, window_.max_events);
    return;
  }
  if (now - events[events.size() - std::max<size_t>(log.capacity / 4, 1)].at > window_.fresh) {
    log.capacity = std::max(log.capacity / 2, window_.min_events);
    log.in_window = std::min(log.in_window, log.capacity);
  }
}

void WatchHub::TrimLocked(TypeLog& log) {
  size_t limit = std::max(log.capacity, kListHistoryLimit);
  while (log.events.size() > log.in_window) {
    const StoreEvent& oldest = log.events.front().event;
    if (oldest.rv > compacted_) {
      if (log.events.size() <= limit) break;
      log.list_floor = oldest.rv;
    }
    log.events.pop_front();
  }
}

void WatchHub::CompactLocked(SteadyTime now) {
  if (now < next_compaction_) return;
  while (now >= next_compaction_) {
    compacted_ = std::max(compacted_, compaction_target_);
    compaction_target_ = latest_rv_;
    next_compaction_ += kCompactionInterval;
  }
  for (auto& [key, log] : logs_) TrimLocked(log);
}

void WatchHub::Append(StoreEvent event) {
  std::lock_guard<std::mutex> lock(mu_);
  SteadyTime now = clock_.Now();
  CompactLocked(now);
  latest_rv_ = event.rv;
  cache_rvs_[event.resource->key] = event.rv;
  TypeLog& log = logs_[event.resource->key];
  if (log.capacity == 0) log.capacity = window_.min_events;
  ResizeLocked(log, now);
  bool evicting = log.in_window == log.capacity;
  if (evicting) --log.in_window;
  log.events.push_back({std::move(event), now});
  ++log.in_window;
  if (evicting) {
    log.watch_floor = log.events[log.events.size() - log.in_window].event.rv - 1;
  }
  TrimLocked(log);
}

void WatchHub::Expire(uint64_t rv) {
  std::lock_guard<std::mutex> lock(mu_);
  logs_.clear();
  expired_ = rv;
  latest_rv_ = std::max(latest_rv_, rv);
}

void WatchHub::StartWindow(const std::string& type_key, uint64_t rv) {
  std::lock_guard<std::mutex> lock(mu_);
  TypeLog& log = logs_[type_key];
  log.in_window = 0;
  log.watch_floor = std::max(log.watch_floor, rv);
  cache_rvs_[type_key] = rv;
  TrimLocked(log);
}

uint64_t WatchHub::ListFloor(const std::string& type_key) {
  std::lock_guard<std::mutex> lock(mu_);
  CompactLocked(clock_.Now());
  uint64_t floor = std::max(expired_, compacted_);
  auto it = logs_.find(type_key);
  if (it != logs_.end()) floor = std::max(floor, it->second.list_floor);
  return floor;
}

uint64_t WatchHub::CacheRv(const std::string& type_key) {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_rvs_.try_emplace(type_key, latest_rv_).first->second;
}

uint64_t WatchHub::WatchFloorLocked(const std::string& type_key) const {
  auto it = logs_.find(type_key);
  return it == logs_.end() ? expired_ : std::max(expired_, it->second.watch_floor);
}

std::vector<StoreEvent> WatchHub::EventsSince(uint64_t rv, const std::string& type_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<StoreEvent> out;
  auto log = logs_.find(type_key);
  if (log == logs_.end()) return out;
  const std::deque<Recorded>& events = log->second.events;
  auto it = std::upper_bound(events.begin(), events.end(), rv,
                             [](uint64_t v, const Recorded& r) { return v < r.event.rv; });
  for (; it != events.end(); ++it) out.push_back(it->event);
  return out;
}

uint64_t WatchHub::Register(Spec spec, std::shared_ptr<WatchSink> sink,
                            std::vector<ObjectPtr> initial, uint64_t cursor) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_id_++;
  Watcher w;
  w.spec = std::move(spec);
  w.sink = std::move(sink);
  w.initial = std::move(initial);
  w.cursor = cursor;
  watchers_.emplace(id, std::move(w));
  return id;
}

void WatchHub::Stop(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  watchers_.erase(id);
}

void WatchHub::RequestBookmarks() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, w] : watchers_) {
      if (w.spec.bookmarks) w.bookmark_due = true;
    }
  }
  Pump();
}

void WatchHub::CloseAll() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, w] : watchers_) w.closing = true;
  }
  Pump();
}

size_t WatchHub::open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return watchers_.size();
}

bool WatchHub::Matches(const Watcher& w, const StoredObject& object) const {
  if (!w.spec.ns.empty() && object.index.ns != w.spec.ns) return false;
  if (!w.spec.labels.Matches(object.index.labels)) return false;
  return w.spec.fields.Matches([&](const std::string& field) { return FieldValue(object, field); });
}

std::vector<WatchHub::Delivery> WatchHub::CollectLocked() {
  std::vector<Delivery> out;
  SteadyTime now = clock_.Now();
  for (auto it = watchers_.begin(); it != watchers_.end();) {
    Watcher& w = it->second;
    const ResourceType& type = *w.spec.type;
    Delivery d{it->first, w.sink, {}, false};
    if (w.closing || (w.spec.deadline && now >= *w.spec.deadline) ||
        w.spec.form.kind == ResponseForm::Kind::kMetadataList) {
      d.end = true;
    } else {
      for (const auto& obj : w.initial) {
        if (Matches(w, *obj)) d.lines.push_back(EventLine("ADDED", EventObject(w.spec, *obj)));
      }
      w.initial.clear();
      uint64_t floor = WatchFloorLocked(type.key);
      if (w.cursor < floor) {
        StatusError gone = Expired("too old resource version: " + std::to_string(w.cursor) + " (" +
                                   std::to_string(floor) + ")");
        d.lines.push_back(EventLine("ERROR", gone.ToJson().dump()));
        d.end = true;
      } else if (auto log = logs_.find(type.key); log != logs_.end()) {
        const std::deque<Recorded>& events = log->second.events;
        auto ev = std::upper_bound(events.begin(), events.end(), w.cursor,
                                   [](uint64_t v, const Recorded& r) { return v < r.event.rv; });
        for (; ev != events.end(); ++ev) {
          const StoreEvent& e = ev->event;
          bool now_matches = e.type != StoreEvent::Type::kDeleted && Matches(w, *e.object);
          bool was_matching = e.prev != nullptr && Matches(w, *e.prev);
          if (e.type == StoreEvent::Type::kDeleted) {
            if (was_matching)
              d.lines.push_back(EventLine("DELETED", EventObject(w.spec, *e.object)));
          } else if (now_matches) {
            const char* kind = was_matching ? "MODIFIED" : "ADDED";
            d.lines.push_back(EventLine(kind, EventObject(w.spec, *e.object)));
          } else if (was_matching) {
            ObjectPtr last = WithResourceVersion(type, *e.prev, e.rv);
            d.lines.push_back(EventLine("DELETED", EventObject(w.spec, *last)));
          }
        }
      }
      // A watch from a future resourceVersion gets no bookmark before it is reached.
      if (!d.end && w.cursor <= latest_rv_) {
        w.cursor = latest_rv_;
        if (w.bookmark_due) d.lines.push_back(BookmarkLine(type, w.spec.form, w.cursor));
      }
      w.bookmark_due = false;
    }
    if (d.end) {
      it = watchers_.erase(it);
    } else {
      ++it;
    }
    if (!d.lines.empty() || d.end) out.push_back(std::move(d));
  }
  return out;
}

void WatchHub::Pump() {
  std::unique_lock<std::mutex> lock(mu_);
  if (pumping_) {
    pump_again_ = true;
    return;
  }
  pumping_ = true;
  while (true) {
    pump_again_ = false;
    std::vector<Delivery> work = CollectLocked();
    if (work.empty()) break;
    lock.unlock();
    std::vector<uint64_t> gone;
    for (auto& d : work) {
      bool alive = true;
      for (auto& line : d.lines) {
        if (!d.sink->Send(std::move(line))) {
          alive = false;
          break;
        }
      }
      if (!alive) {
        gone.push_back(d.id);
      } else if (d.end) {
        d.sink->End();
      }
    }
    lock.lock();
    for (uint64_t id : gone) watchers_.erase(id);
    if (!pump_again_ && gone.empty()) {
      bool pending = false;
      for (const auto& [id, w] : watchers_) {
        if (!w.initial.empty() || w.cursor < latest_rv_ || w.bookmark_due || w.closing) {
          pending = true;
          break;
        }
      }
      if (!pending) break;
    }
  }
  pumping_ = false;
}

}  // namespace syncbus::kubesim
