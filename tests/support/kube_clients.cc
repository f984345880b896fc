#include "tests/support/kube_clients.h"

#include <doctest/doctest.h>

#include "common/http/curl_transport.h"
#include "common/kube/config.h"

namespace syncbus::testing {

std::shared_ptr<http::Transport> TestTransport() {
  static const std::shared_ptr<http::Transport> transport = [] {
    auto curl = http::CurlTransport::Create({});
    REQUIRE_MESSAGE(curl.ok(), curl.status().ToString());
    return std::shared_ptr<http::Transport>(std::move(curl).value());
  }();
  return transport;
}

std::unique_ptr<kube::ClientImpl> ClientFromKubeconfig(const std::string& kubeconfig_file) {
  Result<kube::ClusterConfig> config = kube::LoadKubeconfigFile(kubeconfig_file);
  REQUIRE_MESSAGE(config.ok(), config.status().ToString());
  return std::make_unique<kube::ClientImpl>(*config, TestTransport());
}

EnvtestClients::EnvtestClients() {
  Result<EnvtestEnv> loaded = LoadEnvtestEnv();
  REQUIRE_MESSAGE(loaded.ok(), loaded.status().ToString());
  env = *loaded;
  hub = ClientFromKubeconfig(env.hub_kubeconfig);
  target = ClientFromKubeconfig(env.target_kubeconfig);
}

void CreateObject(kube::Client& client, const kube::Resource& resource, const Json& object,
                  bool exists_ok) {
  const std::string ns = resource.namespaced ? object["metadata"].value("namespace", "") : "";
  Result<Json> made = client.Create(kube::Collection(resource, ns), object);
  REQUIRE_MESSAGE((made.ok() || (exists_ok && made.status().code() == Code::kAlreadyExists)),
                  object["metadata"].dump() << ": " << made.status().ToString());
}

}  // namespace syncbus::testing
