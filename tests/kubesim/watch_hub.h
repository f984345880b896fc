// WatchHub: the watch side of one simulated API server — the event history of each resource
// type (for resuming watches and for consistent list snapshots) and the open watches with their
// filters. Events reach each watch in resourceVersion order through Pump(), which calls
// WatchSink::Send with no lock held; one thread pumps at a time and a pump requested meanwhile
// (also from inside Send) is folded into the running one. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "tests/kubesim/api_server.h"
#include "tests/kubesim/media_type.h"
#include "tests/kubesim/selector.h"
#include "tests/kubesim/status_error.h"
#include "tests/kubesim/stored_object.h"

namespace syncbus::kubesim {

// How far back a watch can resume, per resource type: kube-apiserver's watch cache. Measured on
// kube-apiserver 1.26.4 (etcd 3.4): a watch from a resourceVersion the window no longer covers
// starts (200, application/json) and its only event is
//   {"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},
//    "status":"Failure","message":"too old resource version: 2399 (2408)","reason":"Expired",
//    "code":410}}
// where 2408 is one less than the oldest event still cached for that type (a resourceVersion at
// or above it resumes). Each type keeps at least 100 events; a full window doubles (up to 102400)
// while its oldest event is younger than 75 s, and halves (not below 100) once its newest quarter
// is older than that. So a burst is replayable: 200 and 2,000 updates of one ConfigMap made within
// 28 s replayed in full from the first update; but after one update, 80 s of quiet and 150 quick
// updates, the window held just the 150, and resuming from the quiet update got the 410. A
// resourceVersion of 0, or none, starts with ADDED for every current object instead.
struct WatchWindow {
  size_t min_events = 100;
  size_t max_events = 100 * 1024;
  std::chrono::seconds fresh{75};
  // A window of exactly `events` (no resizing).
  static WatchWindow Fixed(size_t events) { return {events, events, std::chrono::seconds(0)}; }
};

// How far back a list can read (resourceVersionMatch=Exact, continue tokens): etcd's history.
// kube-apiserver compacts etcd every 5 minutes, to the revision it noted at the previous round,
// so lists read 5 to 10 minutes back. Measured on 1.26.4, older is 410 Expired with the message
// "The resourceVersion for the provided list is too old." (or, for a continue token, "The provided
// continue parameter is too old ..." with a fresh token). Events a watch window no longer needs
// are kept for lists at most this many per type; older ones count as compacted.
constexpr auto kCompactionInterval = std::chrono::minutes(5);
constexpr size_t kListHistoryLimit = 100 * 1024;

class WatchHub {
 public:
  struct Spec {
    TypePtr type;
    std::string ns;  // empty: all namespaces
    LabelSelector labels;
    FieldSelector fields;
    bool bookmarks = false;
    std::optional<SteadyTime> deadline;
    // The objects of events: whole, or their metadata. A watch asking for the list form
    // (PartialObjectMetadataList) ends without an event, as kube-apiserver's does: it cannot
    // encode one.
    ResponseForm form;
  };

  WatchHub(const Clock& clock, WatchWindow window);

  // --- called by the store with its lock held (events arrive in resourceVersion order) ---
  void Append(StoreEvent event);
  // Drops the history: only events after `rv` can be resumed from (or listed at) now on.
  void Expire(uint64_t rv);
  // `type_key` is served anew at `rv` (its CRD was written): like kube-apiserver's watch cache,
  // which a new storage starts empty at the current resourceVersion, its window starts there.
  void StartWindow(const std::string& type_key, uint64_t rv);
  // A list of `type_key` can be rebuilt at any resourceVersion from this one on.
  uint64_t ListFloor(const std::string& type_key);
  // The resourceVersion kube-apiserver's watch cache of `type_key` has reached: that of the
  // type's newest event; without one, where StartWindow started it, else the server's
  // resourceVersion at the first call (a cache starts at the state it first lists).
  uint64_t CacheRv(const std::string& type_key);
  // Retained events of `type` after `rv`, oldest first (for list snapshots).
  std::vector<StoreEvent> EventsSince(uint64_t rv, const std::string& type_key) const;
  // Registers a watch that first receives ADDED for `initial` (already filtered by type and
  // namespace), then every event after `cursor`. A cursor beyond the latest resourceVersion
  // waits silently (no bookmarks either) until events reach it, as in kube-apiserver.
  uint64_t Register(Spec spec, std::shared_ptr<WatchSink> sink, std::vector<ObjectPtr> initial,
                    uint64_t cursor);

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
    bool bookmark_due = false;
    bool closing = false;
  };
  struct Delivery {
    uint64_t id;
    std::shared_ptr<WatchSink> sink;
    std::vector<std::string> lines;
    bool end = false;
  };
  struct Recorded {
    StoreEvent event;
    SteadyTime at;
  };
  // One resource type's events, oldest first: the watch window is the newest `in_window`, and
  // older ones stay for list snapshots until compacted.
  struct TypeLog {
    std::deque<Recorded> events;
    size_t capacity = 0;  // of the watch window
    size_t in_window = 0;
    uint64_t watch_floor = 0;  // a watch resumes from any resourceVersion at or above this
    uint64_t list_floor = 0;   // events up to this one were dropped before compaction
  };

  bool Matches(const Watcher& w, const StoredObject& object) const;
  // Collects each watcher's pending lines; caller holds mu_.
  std::vector<Delivery> CollectLocked();
  // The watch window's resize for an event at `now`, before it is added.
  void ResizeLocked(TypeLog& log, SteadyTime now) const;
  // Drops events that neither the watch window nor lists need any more.
  void TrimLocked(TypeLog& log);
  // Runs the compaction rounds due by `now`.
  void CompactLocked(SteadyTime now);
  uint64_t WatchFloorLocked(const std::string& type_key) const;

  const Clock& clock_;
  const WatchWindow window_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, TypeLog> logs_;        // by ResourceType::key
  std::unordered_map<std::string, uint64_t> cache_rvs_;  // CacheRv(), by ResourceType::key
  uint64_t expired_ = 0;  // Expire(): nothing at or below this resumes or lists
  uint64_t latest_rv_ = 0;
  SteadyTime next_compaction_;
  uint64_t compaction_target_ = 0;  // noted at the last round, compacted at the next
  uint64_t compacted_ = 0;
  std::map<uint64_t, Watcher> watchers_;
  uint64_t next_id_ = 1;
  bool pumping_ = false;
  bool pump_again_ = false;
};

}  // namespace syncbus::kubesim
