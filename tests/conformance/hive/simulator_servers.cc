// StartServers() of conformance_hive_simulator: syncbus-kubesim in this process over HTTPS, its
// hub and its one target (cluster-0000) playing the case's cluster.
#include <doctest/doctest.h>

#include "common/base64.h"
#include "common/http/curl_transport.h"
#include "common/kube/client_impl.h"
#include "common/kube/config.h"
#include "tests/conformance/hive/rig.h"
#include "tests/kubesim/sim_server.h"
#include "tests/support/self_signed_cert.h"

namespace syncbus::conformance::hive {
namespace {

class SimulatedServers : public Servers {
 public:
  SimulatedServers(std::unique_ptr<testing::SelfSignedCert> cert,
                   std::unique_ptr<kubesim::SimServer> server)
      : cert_(std::move(cert)), server_(std::move(server)) {}
  ~SimulatedServers() override {
    transport.reset();
    server_->Stop();
  }

 private:
  std::unique_ptr<testing::SelfSignedCert> cert_;
  std::unique_ptr<kubesim::SimServer> server_;
};

}  // namespace

std::unique_ptr<Servers> StartServers() {
  auto cert = std::make_unique<testing::SelfSignedCert>();
  REQUIRE_MESSAGE(cert->ok, "openssl could not make a certificate");
  kubesim::SimServer::Options options;
  options.simulation.token = "hive-conformance-admin";
  options.simulation.fleet.clusters = 1;
  options.tls_cert_file = cert->cert;
  options.tls_key_file = cert->key;
  Result<std::unique_ptr<kubesim::SimServer>> server = kubesim::SimServer::Start(options);
  REQUIRE_MESSAGE(server.ok(), "simulator: " << server.status().ToString());
  Result<kube::ClusterConfig> hub = kube::ParseKubeconfig((*server)->HubKubeconfig());
  REQUIRE_MESSAGE(hub.ok(), hub.status().ToString());
  Result<std::unique_ptr<http::CurlTransport>> curl = http::CurlTransport::Create({});
  REQUIRE_MESSAGE(curl.ok(), curl.status().ToString());
  auto servers = std::make_unique<SimulatedServers>(std::move(cert), std::move(server).value());
  servers->hub = *hub;
  servers->transport = std::move(curl).value();
  // The fleet's one cluster: its admin kubeconfig reaches the target.
  kube::ClientImpl client(servers->hub, servers->transport);
  const std::string name = "cluster-0000";
  auto cd = client.Get(kube::Object(kube::resources::kClusterDeployments, name, name));
  REQUIRE_MESSAGE(cd.ok(), cd.status().ToString());
  std::string secret_name = (*cd)["spec"]["clusterMetadata"]["adminKubeconfigSecretRef"]["name"];
  auto secret = client.Get(kube::Object(kube::resources::kSecrets, name, secret_name));
  REQUIRE_MESSAGE(secret.ok(), secret.status().ToString());
  auto kubeconfig = DecodeBase64((*secret)["data"]["kubeconfig"].get<std::string>());
  REQUIRE(kubeconfig.has_value());
  servers->target_kubeconfig = *kubeconfig;
  Result<kube::ClusterConfig> target = kube::ParseKubeconfig(*kubeconfig);
  REQUIRE_MESSAGE(target.ok(), target.status().ToString());
  servers->target = *target;
  return servers;
}

}  // namespace syncbus::conformance::hive
