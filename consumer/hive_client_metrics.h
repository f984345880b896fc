// HiveClientMetrics: a Transport for the consumer's requests to target clusters that records each
// one as Hive's clustersync controller records the requests of its remote clients
// (pkg/controller/utils/clientwrapper.go), so the dashboards of a Hive fleet keep these series:
//   hive_kube_client_requests_total{controller="clustersync",method,resource,remote="true",status}
//   hive_kube_client_request_seconds{same labels}    buckets 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 120
// `resource` is Hive's reduction of the URL path to group/version/resource ("core/v1/configmaps",
// "apps/v1/deployments"); `status` is Go's Response.Status ("200 OK"). As in Hive, a request
// whose path does not reduce (discovery, a server URL with a path of its own) or that got no
// response is not recorded. Streams pass through unrecorded (syncs open none to targets).
// Thread-safe; the registry must outlive the requests in flight.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <prometheus/registry.h>

#include "common/http/transport.h"

namespace syncbus::consumer {

// Hive's parsePath over a request URL's path: "core/<version>/<resource>" or
// "<group>/<version>/<resource>"; nullopt where Hive's gives an error.
std::optional<std::string> HiveClientResource(const std::string& url);
// Go's http.Response.Status for an HTTP/2 or Go-served answer: "<code> <StatusText(code)>".
std::string GoStatusLine(int code);

class HiveClientMetrics final : public http::Transport {
 public:
  HiveClientMetrics(std::shared_ptr<http::Transport> inner, prometheus::Registry& registry);

  void Send(http::Request request, DoneCallback done) override;
  std::unique_ptr<http::StreamHandle> Stream(http::Request request,
                                             StreamCallbacks callbacks) override;

 private:
  struct Families;
  std::shared_ptr<http::Transport> inner_;
  std::shared_ptr<Families> families_;  // shared with the callbacks of requests in flight
};

}  // namespace syncbus::consumer
