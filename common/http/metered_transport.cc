#include "common/http/metered_transport.h"

#include <chrono>

#include <prometheus/counter.h>
#include <prometheus/histogram.h>

namespace syncbus::http {
namespace {

const prometheus::Histogram::BucketBoundaries kDurationBuckets{0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                               0.5,   1,    2.5,   5,    10,  30};

}  // namespace

struct MeteredTransport::Metrics {
  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Family<prometheus::Histogram>& duration;

  void Count(const std::string& method, int status) {
    requests.Add({{"method", method}, {"code", status > 0 ? std::to_string(status) : "error"}})
        .Increment();
  }
};

MeteredTransport::MeteredTransport(std::shared_ptr<Transport> inner, prometheus::Registry& registry,
                                   const std::string& prefix)
    : inner_(std::move(inner)),
      metrics_(std::make_shared<Metrics>(Metrics{
          prometheus::BuildCounter()
              .Name(prefix + "_requests_total")
              .Help("Requests that ended, by HTTP method and status code (error: no response)")
              .Register(registry),
          prometheus::BuildHistogram()
              .Name(prefix + "_request_duration_seconds")
              .Help("Time from sending a request to its complete response (watches excluded)")
              .Register(registry)})) {}

void MeteredTransport::Send(Request request, DoneCallback done) {
  std::string method = request.method;
  auto started = std::chrono::steady_clock::now();
  inner_->Send(std::move(request), [metrics = metrics_, method, started,
                                    done = std::move(done)](Result<Response> result) {
    int status = result.ok() ? result->status : 0;
    metrics->Count(method, status);
    if (status > 0) {
      metrics->duration.Add({{"method", method}}, kDurationBuckets)
          .Observe(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    }
    done(std::move(result));
  });
}

std::unique_ptr<StreamHandle> MeteredTransport::Stream(Request request, StreamCallbacks callbacks) {
  // Both callbacks run on the transport's thread, one after the other: no lock needed.
  auto counted = std::make_shared<bool>(false);
  StreamCallbacks metered;
  metered.on_headers = [metrics = metrics_, counted, on_headers = std::move(callbacks.on_headers)](
                           int status, const Headers& headers) {
    metrics->Count("WATCH", status);
    *counted = true;
    if (on_headers) on_headers(status, headers);
  };
  metered.on_data = std::move(callbacks.on_data);
  metered.on_done = [metrics = metrics_, counted,
                     on_done = std::move(callbacks.on_done)](Status status) {
    if (!*counted) metrics->Count("WATCH", 0);
    if (on_done) on_done(std::move(status));
  };
  return inner_->Stream(std::move(request), std::move(metered));
}

Status MeteredTransport::Fetch(Request request, const StreamCallbacks& callbacks) {
  std::string method = request.method;
  auto started = std::chrono::steady_clock::now();
  int status = 0;
  StreamCallbacks metered = callbacks;
  metered.on_headers = [&](int code, const Headers& headers) {
    status = code;
    if (callbacks.on_headers) callbacks.on_headers(code, headers);
  };
  Status done = inner_->Fetch(std::move(request), metered);
  if (!done.ok()) status = 0;
  metrics_->Count(method, status);
  if (status > 0) {
    metrics_->duration.Add({{"method", method}}, kDurationBuckets)
        .Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  return done;
}

}  // namespace syncbus::http
