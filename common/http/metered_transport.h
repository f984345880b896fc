// MeteredTransport: a Transport that passes every request on to another one and records it as
// Prometheus metrics named after `prefix`:
//   <prefix>_requests_total{method,code}        requests that ended, by HTTP method and status
//                                               ("200", "429", ...; "error" when no response
//                                               arrived: connection failure, timeout, cancel)
//   <prefix>_request_duration_seconds{method}   time from sending to the complete response
// Streams (watches) count with method "WATCH" once their response starts (or when they end
// without one); their duration is not observed, a watch stays open for minutes by design.
// Thread-safe; the registry must outlive the requests in flight.
#pragma once

#include <memory>
#include <string>

#include <prometheus/registry.h>

#include "common/http/transport.h"

namespace syncbus::http {

class MeteredTransport final : public Transport {
 public:
  MeteredTransport(std::shared_ptr<Transport> inner, prometheus::Registry& registry,
                   const std::string& prefix);

  void Send(Request request, DoneCallback done) override;
  std::unique_ptr<StreamHandle> Stream(Request request, StreamCallbacks callbacks) override;
  // Counted like Send, by its method and status.
  Status Fetch(Request request, const StreamCallbacks& callbacks) override;

 private:
  struct Metrics;
  std::shared_ptr<Transport> inner_;
  std::shared_ptr<Metrics> metrics_;  // shared with the callbacks of requests in flight
};

}  // namespace syncbus::http
