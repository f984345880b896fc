#include "consumer/hive_client_metrics.h"

#include <chrono>
#include <map>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/histogram.h>

namespace syncbus::consumer {
namespace {

const prometheus::Histogram::BucketBoundaries kSecondsBuckets = {0.05, 0.1, 0.5, 1,  5,
                                                                 10,   30,  60,  120};

std::vector<std::string> PathSegments(const std::string& path) {
  std::vector<std::string> tokens;
  size_t start = 0;
  while (true) {
    size_t slash = path.find('/', start);
    tokens.push_back(
        path.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
    if (slash == std::string::npos) return tokens;
    start = slash + 1;
  }
}

std::string GroupVersionResource(const std::string& a, const std::string& b, const std::string& c) {
  return a + "/" + b + "/" + c;
}

}  // namespace

std::optional<std::string> HiveClientResource(const std::string& url) {
  // The URL's path: after "scheme://authority", before any query or fragment.
  size_t scheme = url.find("://");
  size_t path_start = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  if (path_start == std::string::npos) return std::nullopt;
  std::string path = url.substr(path_start, url.find_first_of("?#", path_start) - path_start);
  std::vector<std::string> t = PathSegments(path.substr(1));
  if (t[0] == "api") {
    if (t.size() == 3 || t.size() == 4) return GroupVersionResource("core", t[1], t[2]);
    if (t.size() > 4 && t[2] == "namespaces") return GroupVersionResource("core", t[1], t[4]);
  } else if (t[0] == "apis") {
    if (t.size() == 4 || t.size() == 5) return GroupVersionResource(t[1], t[2], t[3]);
    if (t.size() > 5 && t[3] == "namespaces") return GroupVersionResource(t[1], t[2], t[5]);
  }
  return std::nullopt;
}

std::string GoStatusLine(int code) {
  static const std::map<int, const char*> kText = {{100, "Continue"},
                                                   {101, "Switching Protocols"},
                                                   {200, "OK"},
                                                   {201, "Created"},
                                                   {202, "Accepted"},
                                                   {203, "Non-Authoritative Information"},
                                                   {204, "No Content"},
                                                   {205, "Reset Content"},
                                                   {206, "Partial Content"},
                                                   {300, "Multiple Choices"},
                                                   {301, "Moved Permanently"},
                                                   {302, "Found"},
                                                   {303, "See Other"},
                                                   {304, "Not Modified"},
                                                   {307, "Temporary Redirect"},
                                                   {308, "Permanent Redirect"},
                                                   {400, "Bad Request"},
                                                   {401, "Unauthorized"},
                                                   {403, "Forbidden"},
                                                   {404, "Not Found"},
                                                   {405, "Method Not Allowed"},
                                                   {406, "Not Acceptable"},
                                                   {408, "Request Timeout"},
                                                   {409, "Conflict"},
                                                   {410, "Gone"},
                                                   {411, "Length Required"},
                                                   {412, "Precondition Failed"},
                                                   {413, "Request Entity Too Large"},
                                                   {414, "Request URI Too Long"},
                                                   {415, "Unsupported Media Type"},
                                                   {422, "Unprocessable Entity"},
                                                   {425, "Too Early"},
                                                   {428, "Precondition Required"},
                                                   {429, "Too Many Requests"},
                                                   {431, "Request Header Fields Too Large"},
                                                   {500, "Internal Server Error"},
                                                   {501, "Not Implemented"},
                                                   {502, "Bad Gateway"},
                                                   {503, "Service Unavailable"},
                                                   {504, "Gateway Timeout"},
                                                   {505, "HTTP Version Not Supported"}};
  auto it = kText.find(code);
  return std::to_string(code) + " " + (it != kText.end() ? it->second : "");
}

struct HiveClientMetrics::Families {
  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Family<prometheus::Histogram>& seconds;
};

HiveClientMetrics::HiveClientMetrics(std::shared_ptr<http::Transport> inner,
                                     prometheus::Registry& registry)
    : inner_(std::move(inner)),
      families_(std::make_shared<Families>(
          Families{prometheus::BuildCounter()
                       .Name("hive_kube_client_requests_total")
                       .Help("Counter incremented for each kube client request.")
                       .Register(registry),
                   prometheus::BuildHistogram()
                       .Name("hive_kube_client_request_seconds")
                       .Help("Length of time for kubernetes client requests.")
                       .Register(registry)})) {}

void HiveClientMetrics::Send(http::Request request, DoneCallback done) {
  std::optional<std::string> resource = HiveClientResource(request.url);
  if (!resource) {
    inner_->Send(std::move(request), std::move(done));
    return;
  }
  std::string method = request.method;
  const auto started = std::chrono::steady_clock::now();
  inner_->Send(std::move(request), [families = families_, method = std::move(method),
                                    resource = std::move(*resource), started,
                                    done = std::move(done)](Result<http::Response> result) {
    if (result.ok()) {
      const prometheus::Labels labels = {{"controller", "clustersync"},
                                         {"method", method},
                                         {"resource", resource},
                                         {"remote", "true"},
                                         {"status", GoStatusLine(result->status)}};
      families->requests.Add(labels).Increment();
      families->seconds.Add(labels, kSecondsBuckets)
          .Observe(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    }
    done(std::move(result));
  });
}

std::unique_ptr<http::StreamHandle> HiveClientMetrics::Stream(http::Request request,
                                                              StreamCallbacks callbacks) {
  return inner_->Stream(std::move(request), std::move(callbacks));
}

}  // namespace syncbus::consumer
