// CurlTransport: the real http::Transport on libcurl multi, driven by one event-loop thread (epoll
// + curl_multi_socket_action), so thousands of requests share one thread and kept-alive
// connections. It speaks HTTP/1.1 only, one request per connection at a time: libcurl 7.88's
// HTTP/2 (Debian 12) can hold a finished response back until its timeout when another transfer
// on the same connection read the response's frames (docs/architecture.md, "HTTP/1.1 only").
// Each origin (a target cluster's apiserver, the hub) gets its own connection pool, closed when
// it has been unused for a while or when idle pools hold too many connections. Thread-safe;
// callbacks run on the loop thread. Destroying it cancels every request (callbacks get
// kCancelled) and joins; it must not be destroyed from one of its own callbacks.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "common/http/transport.h"
#include "common/status.h"

namespace syncbus::http {

class CurlTransport final : public Transport {
 public:
  struct Options {
    // Connections per host:port, so also the requests in flight to one host, open watches
    // included; 0 = unlimited. Requests beyond it queue inside the transport.
    long max_host_connections = 32;
    // Connections kept open by origins with no request in flight, counted as each pool's peak
    // of concurrent requests (an upper bound of its connections); beyond it the least recently
    // used pools are closed. A consumer meets thousands of clusters and returns to each one
    // only at its next sync: their pools must not pile up as open sockets on both ends.
    long max_idle_connections = 1024;
    // An origin's pool unused this long is closed (client-go's idle connection timeout).
    std::chrono::milliseconds idle_pool_timeout{90000};
    std::chrono::milliseconds connect_timeout{10000};
    std::chrono::seconds keepalive_idle{30};  // TCP keepalive probes after this idle time
    std::chrono::seconds keepalive_interval{10};
  };
  struct Stats {
    uint64_t completed = 0;    // requests and streams that ended (any outcome)
    uint64_t connections = 0;  // connections opened (a reused connection does not count)
    uint64_t in_flight = 0;    // submitted and not yet ended
    uint64_t pools = 0;        // origins with a connection pool open
  };

  // Also raises this process's RLIMIT_NOFILE soft limit to the hard limit (thousands of sockets).
  static Result<std::unique_ptr<CurlTransport>> Create(const Options& options);
  ~CurlTransport() override;
  CurlTransport(const CurlTransport&) = delete;
  CurlTransport& operator=(const CurlTransport&) = delete;

  // Errors: connection refused/reset, DNS failures, TLS handshake failures -> kUnavailable;
  // timeouts -> kTimeout; peer verification failures -> kUnauthorized; unusable local TLS
  // material or URL -> kInvalidArgument; shutdown -> kCancelled. Messages carry curl's text.
  void Send(Request request, DoneCallback done) override;
  // Cancel() (or destroying the handle) from a thread other than the loop thread returns once
  // the stream's on_done has run: no callback of that stream runs afterwards. From the loop
  // thread (inside a callback) it only requests the cancellation.
  std::unique_ptr<StreamHandle> Stream(Request request, StreamCallbacks callbacks) override;
  // On the calling thread with a connection of its own (a one-off large read gains nothing from
  // the pool); Shutdown() ends it with kCancelled. Errors as Send's.
  Status Fetch(Request request, const StreamCallbacks& callbacks) override;

  Stats stats() const;
  // Fails every request in flight with kCancelled and every later one at once, then stops the
  // loop thread; idempotent. For an exit bounded in time (the destructor does the same). Not from
  // a callback.
  void Shutdown();

 private:
  class Loop;
  class LoopStreamHandle;
  explicit CurlTransport(std::shared_ptr<Loop> loop);
  std::shared_ptr<Loop> loop_;
};

}  // namespace syncbus::http
