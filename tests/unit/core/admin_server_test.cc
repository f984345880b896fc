#include "common/admin_server.h"

#include <atomic>

#include <doctest/doctest.h>
#include <prometheus/gauge.h>

#include "common/http/curl_transport.h"

namespace syncbus {
namespace {

TEST_CASE("admin server: /metrics runs the refresh hook first, probes answer 200 or 503 with why") {
  auto registry = std::make_shared<prometheus::Registry>();
  auto& refreshed =
      prometheus::BuildGauge().Name("test_refreshed").Help("refreshes").Register(*registry).Add({});
  std::atomic<bool> ready{false};
  AdminConfig config;
  config.host = "127.0.0.1";
  config.port = 0;
  auto server = AdminServer::Start(
      config, registry,
      {nullptr, [&ready] { return ready ? Status::Ok() : Unavailable("not consuming yet"); },
       [&refreshed] { refreshed.Increment(); }});
  REQUIRE(server.ok());
  auto transport = http::CurlTransport::Create({});
  REQUIRE(transport.ok());
  auto get = [&](const std::string& path) {
    http::Request request;
    request.url = "http://127.0.0.1:" + std::to_string((*server)->port()) + path;
    auto response = (*transport)->Call(request);
    REQUIRE(response.ok());
    return *response;
  };

  CHECK(get("/metrics").body.find("test_refreshed 1") != std::string::npos);
  CHECK(get("/metrics").body.find("test_refreshed 2") != std::string::npos);
  CHECK(get("/healthz").status == 200);
  http::Response not_ready = get("/readyz");
  CHECK(not_ready.status == 503);
  CHECK(not_ready.body.find("not consuming yet") != std::string::npos);
  ready = true;
  CHECK(get("/readyz").status == 200);
  CHECK(get("/nope").status == 404);
}

}  // namespace
}  // namespace syncbus
