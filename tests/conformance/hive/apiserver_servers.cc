// StartServers() of conformance_hive_apiserver: the envtest fixture's real hub (Hive's CRDs) and
// target kube-apiservers.
#include <doctest/doctest.h>

#include "common/http/curl_transport.h"
#include "common/kube/config.h"
#include "tests/conformance/hive/rig.h"
#include "tests/support/envtest_env.h"
#include "tests/support/files.h"

namespace syncbus::conformance::hive {

std::unique_ptr<Servers> StartServers() {
  Result<testing::EnvtestEnv> env = testing::LoadEnvtestEnv();
  REQUIRE_MESSAGE(env.ok(), "envtest: " << env.status().ToString());
  auto servers = std::make_unique<Servers>();
  Result<kube::ClusterConfig> hub = kube::LoadKubeconfigFile(env->hub_kubeconfig);
  REQUIRE_MESSAGE(hub.ok(), hub.status().ToString());
  servers->hub = *hub;
  servers->target_kubeconfig = testing::ReadFile(env->target_kubeconfig);
  Result<kube::ClusterConfig> target = kube::ParseKubeconfig(servers->target_kubeconfig);
  REQUIRE_MESSAGE(target.ok(), target.status().ToString());
  servers->target = *target;
  Result<std::unique_ptr<http::CurlTransport>> curl = http::CurlTransport::Create({});
  REQUIRE_MESSAGE(curl.ok(), curl.status().ToString());
  servers->transport = std::move(curl).value();
  servers->real_apiserver = true;
  return servers;
}

}  // namespace syncbus::conformance::hive
