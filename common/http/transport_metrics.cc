#include "common/http/transport_metrics.h"

namespace syncbus::http {
namespace {

prometheus::Gauge& AddGauge(prometheus::Registry& registry, const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

prometheus::Counter& AddCounter(prometheus::Registry& registry, const char* name,
                                const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add({});
}

}  // namespace

TransportMetrics::TransportMetrics(prometheus::Registry& registry,
                                   std::shared_ptr<CurlTransport> transport)
    : transport_(std::move(transport)),
      in_flight_(
          AddGauge(registry, "syncbus_http_requests_in_flight",
                   "HTTP requests and watch streams to the hub and target clusters in progress")),
      pools_(AddGauge(registry, "syncbus_http_connection_pools",
                      "Origins (the hub, target apiservers) with a connection pool open")),
      completed_(AddCounter(registry, "syncbus_http_requests_total",
                            "HTTP requests and watch streams that ended, any outcome")),
      connections_(AddCounter(registry, "syncbus_http_connections_opened_total",
                              "Connections opened (a reused connection does not count)")) {}

void TransportMetrics::Refresh() {
  std::lock_guard lock(mu_);  // one reader at a time: the counters only ever move forward
  CurlTransport::Stats now = transport_->stats();
  in_flight_.Set(static_cast<double>(now.in_flight));
  pools_.Set(static_cast<double>(now.pools));
  completed_.Increment(static_cast<double>(now.completed - last_.completed));
  connections_.Increment(static_cast<double>(now.connections - last_.connections));
  last_ = now;
}

}  // namespace syncbus::http
