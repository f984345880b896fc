#include "common/http/metered_transport.h"

#include <future>
#include <map>
#include <string>

#include <doctest/doctest.h>
#include <prometheus/registry.h>

#include "common/http/curl_transport.h"
#include "common/http/server.h"
#include "tests/support/metric_sample.h"

namespace syncbus::http {
namespace {

TEST_CASE(
    "metered transport: requests by method and status, durations, watches, no-response errors") {
  auto server =
      Server::Start({}, [](const ServerRequest& request, std::shared_ptr<ResponseWriter> w) {
        if (request.path == "/throttled") {
          w->Respond(429, {{"Retry-After", "1"}}, "slow down");
        } else if (request.path == "/watch") {
          w->StartStream(200, {});
          w->WriteChunk("{}\n");
          w->EndStream();
        } else {
          w->Respond(200, {}, "ok");
        }
      });
  REQUIRE(server.ok());
  auto curl = CurlTransport::Create({});
  REQUIRE(curl.ok());
  std::shared_ptr<CurlTransport> inner = std::move(*curl);
  prometheus::Registry registry;
  MeteredTransport metered(inner, registry, "test_hub");
  std::string base = "http://127.0.0.1:" + std::to_string((*server)->port());

  Request get;
  get.url = base + "/";
  for (int i = 0; i < 2; ++i) REQUIRE(metered.Call(get).ok());
  Request patch;
  patch.method = "PATCH";
  patch.url = base + "/throttled";
  auto throttled = metered.Call(patch);
  REQUIRE(throttled.ok());
  CHECK(throttled->status == 429);  // passed on unchanged

  Request watch;
  watch.url = base + "/watch";
  std::promise<Status> watch_done;
  std::string chunks;
  auto handle = metered.Stream(watch, {nullptr, [&chunks](std::string_view c) { chunks += c; },
                                       [&watch_done](Status s) { watch_done.set_value(s); }});
  CHECK(watch_done.get_future().get().ok());
  CHECK(chunks == "{}\n");

  (*server)->Stop();
  auto refused = metered.Call(get);
  CHECK_FALSE(refused.ok());
  std::promise<Status> refused_watch;
  auto refused_handle = metered.Stream(
      watch, {nullptr, nullptr, [&refused_watch](Status s) { refused_watch.set_value(s); }});
  CHECK_FALSE(refused_watch.get_future().get().ok());

  CHECK(syncbus::testing::MetricSample(registry, "test_hub_requests_total",
                                       {{"method", "GET"}, {"code", "200"}}) == 2);
  CHECK(syncbus::testing::MetricSample(registry, "test_hub_requests_total",
                                       {{"method", "PATCH"}, {"code", "429"}}) == 1);
  CHECK(syncbus::testing::MetricSample(registry, "test_hub_requests_total",
                                       {{"method", "WATCH"}, {"code", "200"}}) == 1);
  CHECK(syncbus::testing::MetricSample(registry, "test_hub_requests_total",
                                       {{"method", "GET"}, {"code", "error"}}) == 1);
  CHECK(syncbus::testing::MetricSample(registry, "test_hub_requests_total",
                                       {{"method", "WATCH"}, {"code", "error"}}) == 1);
  // Durations of answered requests only; watches are not timed.
  CHECK(syncbus::testing::MetricSample(registry, "test_hub_request_duration_seconds",
                                       {{"method", "GET"}}) == 2);
  CHECK(syncbus::testing::MetricSample(registry, "test_hub_request_duration_seconds",
                                       {{"method", "PATCH"}}) == 1);
  CHECK(syncbus::testing::MetricSample(registry, "test_hub_request_duration_seconds",
                                       {{"method", "WATCH"}}) == 0);
}

}  // namespace
}  // namespace syncbus::http
