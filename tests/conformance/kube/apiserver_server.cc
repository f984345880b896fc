// ServerUnderTest::Get() of conformance_kube_apiserver: the hub kube-apiserver of the envtest
// fixture (scripts/envtest), with Hive's CRDs installed.
#include <doctest/doctest.h>

#include <mutex>

#include "tests/conformance/kube/server_under_test.h"
#include "tests/support/envtest_env.h"
#include "tests/support/files.h"

namespace syncbus::conformance {

ServerUnderTest& ServerUnderTest::Get() {
  static std::mutex mu;
  static std::unique_ptr<ServerUnderTest> server;
  std::lock_guard lock(mu);
  if (!server) {
    Result<testing::EnvtestEnv> env = testing::LoadEnvtestEnv();
    REQUIRE_MESSAGE(env.ok(), "envtest: " << env.status().ToString());
    server = std::make_unique<ServerUnderTest>(
        ParseKubeconfigOrFail(testing::ReadFile(env->hub_kubeconfig)), NewCurlTransport());
  }
  return *server;
}

}  // namespace syncbus::conformance
