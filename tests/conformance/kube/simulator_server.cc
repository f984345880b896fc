// ServerUnderTest::Start() of conformance_kube_simulator: syncbus-kubesim in this process, over
// HTTPS with a throw-away certificate.
#include <doctest/doctest.h>

#include "tests/conformance/kube/server_under_test.h"
#include "tests/kubesim/sim_server.h"
#include "tests/support/self_signed_cert.h"

namespace syncbus::conformance {
namespace {

// Owns the simulator it talks to.
class Simulator : public ServerUnderTest {
 public:
  Simulator(kube::ClusterConfig admin, std::unique_ptr<testing::SelfSignedCert> cert,
            std::unique_ptr<kubesim::SimServer> server)
      : ServerUnderTest(std::move(admin), NewCurlTransport()),
        cert_(std::move(cert)),
        server_(std::move(server)) {}
  ~Simulator() override {
    CloseTransport();
    server_->Stop();
  }

 private:
  std::unique_ptr<testing::SelfSignedCert> cert_;
  std::unique_ptr<kubesim::SimServer> server_;
};

}  // namespace

std::unique_ptr<ServerUnderTest> ServerUnderTest::Start() {
  auto cert = std::make_unique<testing::SelfSignedCert>();
  REQUIRE_MESSAGE(cert->ok, "openssl could not make a certificate");
  kubesim::SimServer::Options options;
  options.simulation.token = "conformance-admin";
  options.tls_cert_file = cert->cert;
  options.tls_key_file = cert->key;
  Result<std::unique_ptr<kubesim::SimServer>> server = kubesim::SimServer::Start(options);
  REQUIRE_MESSAGE(server.ok(), "simulator: " << server.status().ToString());
  kube::ClusterConfig admin = ParseKubeconfigOrFail((*server)->HubKubeconfig());
  return std::make_unique<Simulator>(std::move(admin), std::move(cert), std::move(server).value());
}

}  // namespace syncbus::conformance
