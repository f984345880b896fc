// TransportMetrics: a CurlTransport's counters as Prometheus metrics in a registry, read from the
// transport when Refresh() runs (the admin endpoint calls it before each scrape): requests in
// flight and completed, connections opened, origins with a connection pool. Thread-safe; keeps
// the transport alive.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "common/http/curl_transport.h"

namespace syncbus::http {

class TransportMetrics {
 public:
  TransportMetrics(prometheus::Registry& registry, std::shared_ptr<CurlTransport> transport);
  void Refresh();

 private:
  std::shared_ptr<CurlTransport> transport_;
  prometheus::Gauge& in_flight_;
  prometheus::Gauge& pools_;
  prometheus::Counter& completed_;
  prometheus::Counter& connections_;
  std::mutex mu_;
  CurlTransport::Stats last_;  // guarded by mu_: what the counters hold
};

}  // namespace syncbus::http
