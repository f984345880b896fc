// Reflector: mirrors one collection into a handler with list+watch on its own thread: list,
// watch from the list's resourceVersion with bookmarks, rewatch from the last seen resourceVersion
// when a watch ends, relist and full replace on 410, exponential backoff on failures. A list is
// served by the API server's watch cache, as client-go's informers list (one response split as
// it arrives; ListOptions::resource_version): the first at resourceVersion "0", a relist at the
// last version seen, which the cache answers no older than that. It spares etcd and the
// server's decoding of every object, and its version is the cache's, as the watch's events and
// bookmarks are (a read from etcd answers at the whole server's latest version instead, which
// a quiet collection's watch may not reach for minutes). After a list from the cache failed,
// the next reads etcd page by page: a page that fails is asked for again from its continue
// token (client-go's pager resumes the same way), and only a failed first page or an expired
// token (410) starts that list over.
// Start/Stop/accessors are thread-safe; handler calls come from the reflector's thread only.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/backoff.h"
#include "common/clock.h"
#include "common/json.h"
#include "common/kube/client.h"
#include "common/random.h"

namespace syncbus::kube {

class ReflectorHandler {
 public:
  virtual ~ReflectorHandler() = default;
  // A list begins (the first, a relist, or a list started over after its first page failed or
  // its continue token expired): objects taken from the pages of an unfinished list are to be
  // forgotten. A list resumed at a failed page does not begin again.
  virtual void OnListStart() {}
  // Each page of the list as it arrives, before OnReplace. A handler may take objects out of
  // `items` to keep them in a smaller form of its own (the hub mirror parses them), so the whole
  // collection is never held as JSON at once; OnReplace then receives what the pages left.
  virtual void OnListPage(std::vector<Json>& items) { (void)items; }
  // The whole collection as of a list (less what OnListPage took): the first one and every
  // relist after a 410.
  virtual void OnReplace(std::vector<Json> items) = 0;
  virtual void OnUpsert(Json object) = 0;
  virtual void OnDelete(Json object) = 0;
  // Right after each OnReplace: the mirror is complete as of that list.
  virtual void OnSynced() = 0;
  // The mirror is complete as of `resource_version`: after each OnSynced (the list's version)
  // and at each bookmark. Events carry their own version in their object.
  virtual void OnCheckpoint(const std::string& resource_version, bool bookmark) {
    (void)resource_version, (void)bookmark;
  }
  // A 410 ended the watch: the mirror misses events until the relist's OnReplace.
  virtual void OnStale() {}
};

class Reflector {
 public:
  struct Options {
    ListOptions list;          // label selector and metadata_only (list and watch), page size
    Backoff::Options backoff;  // list/watch failures: 800 ms -> 30 s
    std::chrono::seconds min_watch_timeout{300};  // each watch's timeoutSeconds is drawn
    std::chrono::seconds max_watch_timeout{600};  // uniformly from [min, max]
    // A watch that delivered an event or stayed open this long resets the backoff; a shorter,
    // silent one counts as a failure.
    std::chrono::seconds healthy_watch{30};
    Clock* clock = nullptr;    // null: RealClock()
    Random* random = nullptr;  // null: RealRandom()
    // Waits out one backoff delay. Null: a timed wait that Stop() cuts short. Tests inject one
    // that records the delay (and advances a FakeClock) without sleeping.
    std::function<void(std::chrono::milliseconds)> wait;
  };

  // `client` and `handler` must outlive the reflector.
  Reflector(Client& client, ObjectRef collection, ReflectorHandler& handler, Options options);
  ~Reflector();  // Stop()s
  Reflector(const Reflector&) = delete;
  Reflector& operator=(const Reflector&) = delete;

  void Start();
  // Cancels the open watch or backoff wait and joins; a list page in flight finishes first
  // (bounded by the request timeout). Idempotent. Not from a handler callback.
  void Stop();

  uint64_t lists() const { return lists_.load(); }      // successful lists
  uint64_t relists() const { return relists_.load(); }  // lists after the first
  uint64_t watch_restarts() const {
    return watch_restarts_.load();
  }  // watch opens not after a list
  uint64_t page_retries() const {
    return page_retries_.load();
  }                                      // list pages asked for again after they failed
  std::string resource_version() const;  // last seen

 private:
  void Run();
  bool Stopping();
  void Wait(std::chrono::milliseconds delay);
  int NextWatchTimeoutSeconds();
  // One whole list, its pages to the handler (OnListStart first); a page that fails is resumed
  // after a backoff delay. Errors: a failed first page, an expired continue token, stopping.
  Result<ObjectList> ListAll();
  // Runs one watch (opened at `started`) to its end; returns the status that ended it and
  // whether the watch was healthy.
  Status RunWatch(WatchStream& stream, SteadyTime started, bool& healthy);

  Client& client_;
  const ObjectRef collection_;
  ReflectorHandler& handler_;
  Options options_;
  Clock& clock_;
  Random& random_;
  Backoff backoff_;  // reflector thread only

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;           // guarded by mu_
  WatchStream* current_ = nullptr;  // guarded by mu_
  std::string resource_version_;    // guarded by mu_
  std::thread thread_;

  bool cache_list_failed_ = false;  // the last list, from the watch cache, failed (thread only)
  std::atomic<uint64_t> lists_{0};
  std::atomic<uint64_t> relists_{0};
  std::atomic<uint64_t> watch_restarts_{0};
  std::atomic<uint64_t> page_retries_{0};
};

}  // namespace syncbus::kube
