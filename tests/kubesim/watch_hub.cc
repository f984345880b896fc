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

std::string BookmarkLine(const ResourceType& type, uint64_t rv) {
  Json object = {{"kind", type.kind},
                 {"apiVersion", type.api_version},
                 {"metadata", {{"resourceVersion", std::to_string(rv)}}}};
  return EventLine("BOOKMARK", object.dump());
}

}  // namespace

WatchHub::WatchHub(const Clock& clock, size_t history_limit)
    : clock_(clock), history_limit_(std::max<size_t>(history_limit, 1)) {}

void WatchHub::Append(StoreEvent event) {
  std::lock_guard<std::mutex> lock(mu_);
  latest_rv_ = event.rv;
  history_.push_back(std::move(event));
  while (history_.size() > history_limit_) {
    history_start_ = history_.front().rv;
    history_.pop_front();
  }
}

void WatchHub::Expire(uint64_t rv) {
  std::lock_guard<std::mutex> lock(mu_);
  history_.clear();
  history_start_ = rv;
  latest_rv_ = std::max(latest_rv_, rv);
}

uint64_t WatchHub::HistoryStart() const {
  std::lock_guard<std::mutex> lock(mu_);
  return history_start_;
}

std::vector<StoreEvent> WatchHub::EventsSince(uint64_t rv, const std::string& type_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<StoreEvent> out;
  auto it = std::upper_bound(history_.begin(), history_.end(), rv,
                             [](uint64_t v, const StoreEvent& e) { return v < e.rv; });
  for (; it != history_.end(); ++it) {
    if (it->resource->key == type_key) out.push_back(*it);
  }
  return out;
}

uint64_t WatchHub::Register(Spec spec, std::shared_ptr<WatchSink> sink,
                            std::vector<ObjectPtr> initial, uint64_t cursor,
                            std::optional<StatusError> failure) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_id_++;
  Watcher w;
  w.spec = std::move(spec);
  w.sink = std::move(sink);
  w.initial = std::move(initial);
  w.cursor = cursor;
  w.failure = std::move(failure);
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
  return w.spec.fields.Matches(
      [&](const std::string& field) { return FieldValue(object, field); });
}

std::vector<WatchHub::Delivery> WatchHub::CollectLocked() {
  std::vector<Delivery> out;
  SteadyTime now = clock_.Now();
  for (auto it = watchers_.begin(); it != watchers_.end();) {
    Watcher& w = it->second;
    const ResourceType& type = *w.spec.type;
    Delivery d{it->first, w.sink, {}, false};
    if (w.failure) {
      d.lines.push_back(EventLine("ERROR", w.failure->ToJson().dump()));
      d.end = true;
    } else if (w.closing || (w.spec.deadline && now >= *w.spec.deadline)) {
      d.end = true;
    } else {
      for (const auto& obj : w.initial) {
        if (Matches(w, *obj)) d.lines.push_back(EventLine("ADDED", FullJson(type, *obj)));
      }
      w.initial.clear();
      if (w.cursor < history_start_) {
        StatusError gone = Expired("too old resource version: " + std::to_string(w.cursor) +
                                   " (" + std::to_string(history_start_) + ")");
        d.lines.push_back(EventLine("ERROR", gone.ToJson().dump()));
        d.end = true;
      } else {
        auto ev = std::upper_bound(history_.begin(), history_.end(), w.cursor,
                                   [](uint64_t v, const StoreEvent& e) { return v < e.rv; });
        for (; ev != history_.end(); ++ev) {
          if (ev->resource->key != type.key) continue;
          bool now_matches = ev->type != StoreEvent::Type::kDeleted && Matches(w, *ev->object);
          bool was_matching = ev->prev != nullptr && Matches(w, *ev->prev);
          if (ev->type == StoreEvent::Type::kDeleted) {
            if (was_matching) d.lines.push_back(EventLine("DELETED", FullJson(type, *ev->object)));
          } else if (now_matches) {
            const char* kind = was_matching ? "MODIFIED" : "ADDED";
            d.lines.push_back(EventLine(kind, FullJson(type, *ev->object)));
          } else if (was_matching) {
            ObjectPtr last = WithResourceVersion(type, *ev->prev, ev->rv);
            d.lines.push_back(EventLine("DELETED", FullJson(type, *last)));
          }
        }
        w.cursor = std::max(w.cursor, latest_rv_);
        if (w.bookmark_due) d.lines.push_back(BookmarkLine(type, w.cursor));
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
        if (!w.initial.empty() || w.cursor < latest_rv_ || w.bookmark_due || w.closing ||
            w.failure) {
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
