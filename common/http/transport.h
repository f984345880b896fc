// Transport: the seam between HTTP clients (the Kubernetes client) and the network.
// The real implementation (CurlTransport, curl_transport.h) drives libcurl multi on its own event
// loop thread, reusing connections (keep-alive, HTTP/2 when offered); the in-process fake
// (tests/fakes/common/http/in_process_transport.h) routes requests straight into the Kubernetes
// simulator. Thread-safe: Send/Stream may be called from any thread; callbacks run on the
// transport's thread and must not block.
#pragma once

#include <functional>
#include <memory>
#include <string_view>

#include "common/http/types.h"
#include "common/status.h"

namespace syncbus::http {

// Cancels an in-flight stream when destroyed or Cancel()ed. Thread-safe.
class StreamHandle {
 public:
  virtual ~StreamHandle() = default;
  virtual void Cancel() = 0;
};

class Transport {
 public:
  using DoneCallback = std::function<void(Result<Response>)>;
  // Stream callbacks: on_headers once with the status and headers (not at all when no response
  // arrived), on_data for each body chunk (arbitrary boundaries), on_done exactly once (OK at a
  // clean end, an error otherwise, Cancelled after Cancel()).
  struct StreamCallbacks {
    std::function<void(int status, const Headers& headers)> on_headers;
    std::function<void(std::string_view chunk)> on_data;
    std::function<void(Status)> on_done;
  };

  virtual ~Transport() = default;

  // Sends one request; `done` runs exactly once. Connection failures and timeouts are errors
  // (kUnavailable / kTimeout); any HTTP status is a Response.
  virtual void Send(Request request, DoneCallback done) = 0;

  // Sends one request whose body is consumed as it arrives (Kubernetes watches).
  virtual std::unique_ptr<StreamHandle> Stream(Request request, StreamCallbacks callbacks) = 0;

  // Sends one request and hands its response to `callbacks` (on_headers, then on_data per body
  // chunk; on_done is not used) on the calling thread as it arrives, so that a large body (a
  // whole collection listed at once) is never held whole and a slow reader slows the sender.
  // Returns when the response has ended: OK at a clean end, any HTTP status included. The
  // default sends it with Send and hands the body over in one piece. Must not be called from
  // the transport's own thread.
  virtual Status Fetch(Request request, const StreamCallbacks& callbacks);

  // Blocking convenience over Send. Must not be called from the transport's own thread.
  Result<Response> Call(Request request);
};

}  // namespace syncbus::http
