// The API server that the Kubernetes conformance suite runs against. The suite's cases are linked
// into two binaries, each with its own ServerUnderTest::Start(): conformance_kube_simulator
// (syncbus-kubesim in the test process, served over HTTPS; simulator_server.cc) and
// conformance_kube_apiserver (the real kube-apiserver of the envtest fixture;
// apiserver_server.cc). Every case sends the same requests with the same assertions to either.
// Each case starts its own (a simulator, or a connection to the real one) and ends it before it
// returns; cases isolate themselves in fresh namespaces. Thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include "common/http/transport.h"
#include "common/json.h"
#include "common/kube/client_impl.h"

namespace syncbus::conformance {

struct RawResponse {
  int status = 0;
  http::Headers headers;
  Json body;  // null when the body is not JSON
  std::string text;

  // The first header named `name` (case-insensitive), or "".
  std::string Header(std::string_view name) const {
    return http::FindHeader(headers, name).value_or("");
  }
};

// A CurlTransport with default options; fails the running test when it cannot be made.
std::shared_ptr<http::Transport> NewCurlTransport();
kube::ClusterConfig ParseKubeconfigOrFail(const std::string& kubeconfig);

class ServerUnderTest {
 public:
  // Talks to the server at `admin.server` with `admin`'s credentials through `transport`.
  ServerUnderTest(kube::ClusterConfig admin, std::shared_ptr<http::Transport> transport);
  virtual ~ServerUnderTest() = default;
  // The server of this binary for one test case; fails the calling test when it cannot be had.
  static std::unique_ptr<ServerUnderTest> Start();

  // A client with admin rights (every request is counted by requests()).
  std::unique_ptr<kube::ClientImpl> Admin();
  // A client presenting `token` instead of the admin's credentials.
  std::unique_ptr<kube::ClientImpl> WithToken(const std::string& token);
  // Creates a namespace named "<prefix>-<random>" and returns its name.
  std::string NewNamespace(const std::string& prefix);
  // One admin request: `path_and_query` under the server URL; the body is sent as `content_type`,
  // the answer asked for as `accept`.
  RawResponse Raw(const std::string& method, const std::string& path_and_query,
                  const std::string& body = {},
                  const std::string& content_type = "application/json",
                  const std::string& accept = "application/json");
  // Requests sent through the clients and Raw() so far.
  uint64_t requests() const { return requests_->load(); }

 protected:
  // Closes the connections (a subclass that owns the server does so before stopping it).
  void CloseTransport() { transport_.reset(); }

 private:
  kube::ClusterConfig admin_;
  std::shared_ptr<std::atomic<uint64_t>> requests_;
  std::shared_ptr<http::Transport> transport_;  // counts into requests_
};

}  // namespace syncbus::conformance
