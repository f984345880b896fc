// WatchHub: the watch side of one simulated API server — the bounded event history (for
// resuming watches and consistent list snapshots) and the open watches with their filters.
// Events reach each watch in resourceVersion order through Pump(), which calls WatchSink::Send
// with no lock held; one thread pumps at a time and a pump requested meanwhile (also from inside
// Send) is folded into the running one. Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "tests/kubesim/api_server.h"
#include "tests/kubesim/selector.h"
#include "tests/kubesim/status_error.h"
#include "tests/kubesim/stored_object.h"

namespace syncbus::kubesim {

class WatchHub {
 public:
  struct Spec {
    TypePtr type;
    std::string ns;              // empty: all namespaces
    LabelSelector labels;
    FieldSelector fields;
    bool bookmarks = false;
    std::optional<SteadyTime> deadline;
  };

  WatchHub(const Clock& clock, size_t history_limit);

  // --- called by the store with its lock held (events arrive in resourceVersion order) ---
  void Append(StoreEvent event);
  // Drops the history: only events after `rv` can be resumed from now on.
  void Expire(uint64_t rv);
  // Every event with a resourceVersion above this is retained.
  uint64_t HistoryStart() const;
  // Retained events of `type` after `rv`, oldest first (for list snapshots).
  std::vector<StoreEvent> EventsSince(uint64_t rv, const std::string& type_key) const;
  // Registers a watch that first receives ADDED for `initial` (already filtered by type and
  // namespace), then every event after `cursor`. With `failure`, it only sends that ERROR and
  // ends.
  uint64_t Register(Spec spec, std::shared_ptr<WatchSink> sink, std::vector<ObjectPtr> initial,
                    uint64_t cursor, std::optional<StatusError> failure);

  // --- any thread, no lock held ---
  void Stop(uint64_t id);
  void RequestBookmarks();
  void CloseAll();
  void Pump();
  size_t open() const;

 private:
  struct Watcher {
    Spec spec;
    std::shared_ptr<WatchSink> sink;
    std::vector<ObjectPtr> initial;
    uint64_t cursor = 0;
    std::optional<StatusError> failure;
    bool bookmark_due = false;
    bool closing = false;
  };
  struct Delivery {
    uint64_t id;
    std::shared_ptr<WatchSink> sink;
    std::vector<std::string> lines;
    bool end = false;
  };

  bool Matches(const Watcher& w, const StoredObject& object) const;
  // Collects each watcher's pending lines; caller holds mu_.
  std::vector<Delivery> CollectLocked();

  const Clock& clock_;
  const size_t history_limit_;
  mutable std::mutex mu_;
  std::deque<StoreEvent> history_;
  uint64_t history_start_ = 0;
  uint64_t latest_rv_ = 0;
  std::map<uint64_t, Watcher> watchers_;
  uint64_t next_id_ = 1;
  bool pumping_ = false;
  bool pump_again_ = false;
};

}  // namespace syncbus::kubesim
