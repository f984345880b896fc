// ServerUnderTest::Start() of conformance_kube_apiserver: the hub kube-apiserver of the envtest
// fixture (scripts/envtest), with Hive's CRDs installed.
#include <doctest/doctest.h>

#include "tests/conformance/kube/server_under_test.h"
#include "tests/support/envtest_env.h"
#include "tests/support/files.h"

namespace syncbus::conformance {

std::unique_ptr<ServerUnderTest> ServerUnderTest::Start() {
  Result<testing::EnvtestEnv> env = testing::LoadEnvtestEnv();
  REQUIRE_MESSAGE(env.ok(), "envtest: " << env.status().ToString());
  return std::make_unique<ServerUnderTest>(
      ParseKubeconfigOrFail(testing::ReadFile(env->hub_kubeconfig)), NewCurlTransport());
}

}  // namespace syncbus::conformance
