// ApiServer: the state and REST semantics of one simulated Kubernetes API server (the hub or one
// target cluster), independent of any transport. It takes HTTP-shaped requests (method, path
// without any cluster prefix, query, headers, body) and answers exactly as a kube-apiserver
// would: JSON objects, metav1.Status errors with the right codes, resourceVersion and generation
// rules, paging, server-side apply, patches, status subresource, watches with bookmarks and 410.
// Thread-safe: any number of threads may call it concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "common/clock.h"
#include "common/http/types.h"
#include "common/json.h"

namespace syncbus::kubesim {

class Journal;

struct ApiRequest {
  std::string method;     // GET POST PUT PATCH DELETE
  std::string path;       // "/apis/hive.openshift.io/v1/namespaces/ns/syncsets/a"
  std::string query;      // raw, percent-encoded ("watch=1&resourceVersion=10")
  http::Headers headers;  // Content-Type, Accept, Authorization ...
  std::string body;
};

struct ApiResponse {
  int status = 200;
  http::Headers headers;  // always includes Content-Type
  std::string body;
};

// Receives one watch's events as newline-terminated JSON lines ({"type":..,"object":..}).
// Send may be called from any thread; it returns false when the client is gone.
class WatchSink {
 public:
  virtual ~WatchSink() = default;
  virtual bool Send(std::string line) = 0;
  // The server ended the watch (timeoutSeconds elapsed, CloseAllWatches, shutdown).
  virtual void End() = 0;
};

class ApiServer {
 public:
  struct Options {
    std::string name;                    // "hub" or the cluster's name (logs, errors)
    std::vector<std::string> crd_files;  // CRD YAML files to serve (the hub: Hive's CRDs)
    // Events of one resource type kept for resuming watches (older -> 410): 0 = as many as
    // kube-apiserver's watch cache keeps (WatchWindow in watch_hub.h), N = exactly the last N.
    size_t watch_history = 0;
    const Clock* clock = nullptr;  // timestamps and watch timeouts; null = real clock
    // Records the writes of Handle() under `name` (not Call()'s); not owned, outlives the server.
    Journal* journal = nullptr;
  };
  explicit ApiServer(Options options);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  static bool IsWatch(const ApiRequest& request);

  // Any request that is not a watch, answered on the current state; its writes are journaled.
  ApiResponse Handle(const ApiRequest& request);
  // kube-apiserver holds a read served from its watch cache at a resourceVersion the cache has
  // not reached (a get, or a list without limit, with resourceVersion=N) until the cache gets
  // there, for at most kFreshnessWait; then it answers 504. A transport holds such a request
  // while MustWait() is true, up to kFreshnessWait, before calling Handle().
  static constexpr std::chrono::seconds kFreshnessWait{3};
  static constexpr std::chrono::milliseconds kFreshnessPoll{50};  // how often to ask MustWait()
  bool MustWait(const ApiRequest& request);
  // A watch request: an error response (unknown resource, bad selector or resourceVersion), or
  // the id of a registered watch whose events go to `sink` until StopWatch or End. As in
  // kube-apiserver, a resourceVersion older than the history is not an error response: the
  // watch starts and its only event is an ERROR carrying a 410 Expired Status, then End(). One
  // the server has not reached yet starts a silent watch that sends the events after it.
  // `sink` may receive events (the initial ADDED list) before StartWatch returns, so it must be
  // ready to write (or buffer) from the moment it is passed in.
  std::variant<ApiResponse, uint64_t> StartWatch(const ApiRequest& request,
                                                 std::shared_ptr<WatchSink> sink);
  void StopWatch(uint64_t watch_id);
  // Sends a BOOKMARK (current resourceVersion) to every watch that allowed bookmarks.
  void SendBookmarks();

  // Fault controls for tests.
  void ExpireHistory();    // every resourceVersion seen so far is now too old (410 on resume)
  void CloseAllWatches();  // ends every open watch; clients must rewatch

  // Convenience for fleet generation and assertions: same semantics as Handle(), not journaled.
  ApiResponse Call(const std::string& method, const std::string& path, const Json& body = nullptr,
                   const std::string& content_type = "application/json",
                   const std::string& query = {});

  struct Stats {
    uint64_t requests = 0;
    uint64_t objects = 0;
    uint64_t open_watches = 0;
  };
  Stats stats() const;

 private:
  struct State;
  ApiResponse Serve(const ApiRequest& request, Journal* journal);

  std::unique_ptr<State> state_;
};

}  // namespace syncbus::kubesim
