// The real-apiserver fixture: where scripts/envtest's hub and target kube-apiservers listen and
// the kubeconfigs of the identities it made, read from the envtest.env file named by
// $SYNCBUS_TEST_ENVTEST_ENV (ctest's `envtest` fixture sets it). Value type; thread-compatible.
#pragma once

#include <string>

#include "common/status.h"

namespace syncbus::testing {

struct EnvtestEnv {
  std::string dir;
  std::string hub_url, hub_kubeconfig;        // admin (system:masters)
  std::string target_url, target_kubeconfig;  // admin; the target plays every managed cluster
  int hub_pid = 0, hub_etcd_pid = 0, target_pid = 0, target_etcd_pid = 0;
  // Hub identities with no rights of their own: deploy/rbac.yaml binds the first two.
  std::string publisher_kubeconfig, consumer_kubeconfig, nobody_kubeconfig;
};

Result<EnvtestEnv> LoadEnvtestEnv();

}  // namespace syncbus::testing
