#include "tests/conformance/kube/server_under_test.h"

#include <mutex>
#include <random>

#include <doctest/doctest.h>

#include "common/http/curl_transport.h"
#include "common/kube/config.h"

namespace syncbus::conformance {
namespace {

// Forwards to the real transport, counting requests.
class CountingTransport : public http::Transport {
 public:
  CountingTransport(std::shared_ptr<http::Transport> inner,
                    std::shared_ptr<std::atomic<uint64_t>> count)
      : inner_(std::move(inner)), count_(std::move(count)) {}
  void Send(http::Request request, DoneCallback done) override {
    ++*count_;
    inner_->Send(std::move(request), std::move(done));
  }
  std::unique_ptr<http::StreamHandle> Stream(http::Request request,
                                             StreamCallbacks callbacks) override {
    ++*count_;
    return inner_->Stream(std::move(request), std::move(callbacks));
  }

 private:
  std::shared_ptr<http::Transport> inner_;
  std::shared_ptr<std::atomic<uint64_t>> count_;
};

}  // namespace

std::shared_ptr<http::Transport> NewCurlTransport() {
  Result<std::unique_ptr<http::CurlTransport>> curl = http::CurlTransport::Create({});
  if (!curl.ok()) FAIL("CurlTransport: " << curl.status().ToString());
  return std::move(curl).value();
}

kube::ClusterConfig ParseKubeconfigOrFail(const std::string& kubeconfig) {
  Result<kube::ClusterConfig> config = kube::ParseKubeconfig(kubeconfig);
  if (!config.ok()) FAIL("kubeconfig: " << config.status().ToString());
  return *config;
}

namespace {

std::string RandomSuffix() {
  static std::mutex mu;
  static std::mt19937_64 engine{std::random_device{}()};
  std::lock_guard lock(mu);
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string out;
  for (int i = 0; i < 8; ++i) out += kAlphabet[engine() % 36];
  return out;
}

}  // namespace

ServerUnderTest::ServerUnderTest(kube::ClusterConfig admin,
                                 std::shared_ptr<http::Transport> transport)
    : admin_(std::move(admin)),
      requests_(std::make_shared<std::atomic<uint64_t>>(0)),
      transport_(std::make_shared<CountingTransport>(std::move(transport), requests_)) {}

std::unique_ptr<kube::ClientImpl> ServerUnderTest::Admin() {
  return std::make_unique<kube::ClientImpl>(admin_, transport_);
}

std::unique_ptr<kube::ClientImpl> ServerUnderTest::WithToken(const std::string& token) {
  kube::ClusterConfig config = admin_;
  config.bearer_token = token;
  return std::make_unique<kube::ClientImpl>(config, transport_);
}

std::string ServerUnderTest::NewNamespace(const std::string& prefix) {
  std::string name = prefix + "-" + RandomSuffix();
  Json ns = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}};
  Result<Json> made = Admin()->Create(kube::Collection(kube::resources::kNamespaces), ns);
  REQUIRE_MESSAGE(made.ok(), made.status().ToString());
  return name;
}

RawResponse ServerUnderTest::Raw(const std::string& method, const std::string& path_and_query,
                                 const std::string& body, const std::string& content_type,
                                 const std::string& accept) {
  http::Request request;
  request.method = method;
  request.url = admin_.server + path_and_query;
  request.headers = {{"Accept", accept}, {"Authorization", "Bearer " + admin_.bearer_token}};
  if (!body.empty()) request.headers.emplace_back("Content-Type", content_type);
  request.body = body;
  request.tls = admin_.tls;
  Result<http::Response> response = transport_->Call(std::move(request));
  REQUIRE_MESSAGE(response.ok(),
                  method << " " << path_and_query << ": " << response.status().ToString());
  RawResponse out;
  out.status = response->status;
  out.headers = response->headers;
  out.text = response->body;
  out.body = Json::parse(out.text, nullptr, /*allow_exceptions=*/false);
  if (out.body.is_discarded()) out.body = nullptr;
  return out;
}

}  // namespace syncbus::conformance
