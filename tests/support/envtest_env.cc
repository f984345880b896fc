#include "tests/support/envtest_env.h"

#include <charconv>

#include "tests/support/env_file.h"

namespace syncbus::testing {

Result<EnvtestEnv> LoadEnvtestEnv() {
  const std::string what = "envtest env";
  Result<EnvFile> file = LoadEnvFile("SYNCBUS_TEST_ENVTEST_ENV", what,
                                     "run through ctest -L envtest, or point it at an "
                                     "envtest.env written by scripts/envtest start");
  if (!file.ok()) return file.status();
  EnvtestEnv env;
  for (auto [key, field] :
       {std::pair{"DIR", &env.dir}, std::pair{"HUB_URL", &env.hub_url},
        std::pair{"HUB_KUBECONFIG", &env.hub_kubeconfig}, std::pair{"TARGET_URL", &env.target_url},
        std::pair{"TARGET_KUBECONFIG", &env.target_kubeconfig},
        std::pair{"PUBLISHER_KUBECONFIG", &env.publisher_kubeconfig},
        std::pair{"CONSUMER_KUBECONFIG", &env.consumer_kubeconfig},
        std::pair{"NOBODY_KUBECONFIG", &env.nobody_kubeconfig}}) {
    Result<std::string> value = EnvValue(*file, std::string("SYNCBUS_ENVTEST_") + key, what);
    if (!value.ok()) return value.status();
    *field = *value;
  }
  for (auto [key, field] :
       {std::pair{"HUB_PID", &env.hub_pid}, std::pair{"HUB_ETCD_PID", &env.hub_etcd_pid},
        std::pair{"TARGET_PID", &env.target_pid},
        std::pair{"TARGET_ETCD_PID", &env.target_etcd_pid}}) {
    Result<std::string> value = EnvValue(*file, std::string("SYNCBUS_ENVTEST_") + key, what);
    if (!value.ok()) return value.status();
    auto [end, error] = std::from_chars(value->data(), value->data() + value->size(), *field);
    if (error != std::errc() || end != value->data() + value->size() || *field <= 0) {
      return InvalidArgument(what + ": " + key + " is not a pid: " + *value);
    }
  }
  return env;
}

}  // namespace syncbus::testing
