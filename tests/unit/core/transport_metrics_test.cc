#include "common/http/transport_metrics.h"

#include <string>

#include <doctest/doctest.h>
#include <prometheus/text_serializer.h>

#include "common/http/server.h"

namespace syncbus::http {
namespace {

// The value of an unlabelled metric in the registry's text exposition.
double Value(prometheus::Registry& registry, const std::string& name) {
  std::string text = prometheus::TextSerializer().Serialize(registry.Collect());
  size_t at = text.find("\n" + name + " ");
  REQUIRE_MESSAGE(at != std::string::npos, text);
  return std::stod(text.substr(at + name.size() + 2));
}

TEST_CASE("transport metrics: requests, connections and pools as the transport counts them") {
  auto server = Server::Start({}, [](const ServerRequest&, std::shared_ptr<ResponseWriter> w) {
    w->Respond(200, {}, "ok");
  });
  REQUIRE(server.ok());
  auto transport = CurlTransport::Create({});
  REQUIRE(transport.ok());
  std::shared_ptr<CurlTransport> shared = std::move(*transport);
  prometheus::Registry registry;
  TransportMetrics metrics(registry, shared);

  Request request;
  request.url = "http://127.0.0.1:" + std::to_string((*server)->port()) + "/";
  for (int i = 0; i < 3; ++i) REQUIRE(shared->Call(request).ok());
  metrics.Refresh();
  CHECK(Value(registry, "syncbus_http_requests_total") == 3);
  CHECK(Value(registry, "syncbus_http_connections_opened_total") == 1);
  CHECK(Value(registry, "syncbus_http_requests_in_flight") == 0);
  CHECK(Value(registry, "syncbus_http_connection_pools") == 1);

  REQUIRE(shared->Call(request).ok());
  metrics.Refresh();
  metrics.Refresh();  // a second refresh adds nothing
  CHECK(Value(registry, "syncbus_http_requests_total") == 4);
  CHECK(Value(registry, "syncbus_http_connections_opened_total") == 1);
}

}  // namespace
}  // namespace syncbus::http
