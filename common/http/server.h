// Server: a small non-blocking HTTP/1.1 server on libevent, used for the daemons' admin
// endpoints (/metrics, /healthz, /readyz) and by the Kubernetes simulator. Requests are handled on
// the server's event-loop thread(s); handlers must not block (defer with RunAfter).
// ResponseWriter methods are thread-safe: calls from other threads are marshalled onto the loop.
// The process must ignore SIGPIPE (libevent writes with writev): a write to a connection its peer
// reset would otherwise end the process instead of that connection.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/http/types.h"
#include "common/status.h"

namespace syncbus::http {

struct ServerRequest {
  std::string method;
  std::string path;   // decoded path without the query
  std::string query;  // raw query string (after '?'), percent-encoded
  Headers headers;
  std::string body;
  // The first value of query parameter `name`, percent-decoded ('+' is a space).
  std::optional<std::string> QueryParam(std::string_view name) const;
};

// Answers one request: either Respond() once, or StartStream() + WriteChunk()* + EndStream().
// Calls are applied in the order they were made (per writer), whichever threads make them; calls
// after the answer is complete or the connection is gone do nothing. A writer dropped without an
// answer leaves the request pending until the client gives up (or the server stops).
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  virtual void Respond(int status, Headers headers, std::string body) = 0;
  virtual void StartStream(int status, Headers headers) = 0;  // chunked transfer encoding
  // Queues one chunk. False once the client has gone (the stream is over).
  virtual bool WriteChunk(std::string data) = 0;
  virtual void EndStream() = 0;
  // Drops the connection without a response (fault injection: "connection reset").
  virtual void Abort() = 0;
  // `callback` runs once, on the loop thread, if the connection goes away before the answer is
  // complete: the client disconnected, Abort() was called, or the server stopped. Registered after
  // that has happened, it still runs (soon, on the loop thread); after a complete answer, never.
  virtual void OnClientClose(std::function<void()> callback) = 0;
};

using Handler = std::function<void(const ServerRequest&, std::shared_ptr<ResponseWriter>)>;

class Server {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = 0;                      // 0 = pick a free port (see port())
    int threads = 1;                   // event-loop threads sharing the listening socket
    size_t max_body_bytes = 16 << 20;  // larger request bodies are answered 413
    // A connection that stays idle (or does not read what we write) this long is closed.
    std::chrono::seconds io_timeout{300};
    // Serve HTTPS with this PEM certificate chain and private key; both empty = plain HTTP.
    std::string tls_cert_file;
    std::string tls_key_file;
  };
  virtual ~Server() = default;
  static Result<std::unique_ptr<Server>> Start(const Options& options, Handler handler);

  virtual int port() const = 0;
  // Runs `fn` on a loop thread after `delay` (latency injection, deferred answers): the calling
  // loop's thread when called from one, else the first loop. Timers fire in deadline order; a zero
  // delay queues `fn` behind work already queued. Dropped (never run) once the server stops.
  virtual void RunAfter(std::chrono::milliseconds delay, std::function<void()> fn) = 0;
  // Stops accepting, closes every connection, joins the loop threads. Idempotent. Must not be
  // called from a loop thread.
  virtual void Stop() = 0;
};

}  // namespace syncbus::http
