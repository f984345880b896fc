// Kubernetes clients for tests against real API servers (scripts/envtest): one curl transport
// for the process, a client from a kubeconfig file, the envtest fixture's admin clients of the
// hub and the target, and object creation that REQUIREs success. Thread-compatible (the
// transport itself is thread-safe).
#pragma once

#include <memory>
#include <string>

#include "common/http/transport.h"
#include "common/json.h"
#include "common/kube/client_impl.h"
#include "tests/support/envtest_env.h"

namespace syncbus::testing {

// The process's curl transport for test clients (made on first use).
std::shared_ptr<http::Transport> TestTransport();

// A client from a kubeconfig file over TestTransport(); REQUIREs that the file loads.
std::unique_ptr<kube::ClientImpl> ClientFromKubeconfig(const std::string& kubeconfig_file);

// The envtest fixture ($SYNCBUS_TEST_ENVTEST_ENV) and admin clients of its hub and target.
struct EnvtestClients {
  EnvtestClients();  // REQUIREs that the fixture's env file loads

  EnvtestEnv env;
  std::shared_ptr<http::Transport> transport = TestTransport();
  std::unique_ptr<kube::ClientImpl> hub, target;
};

// Creates `object` in the namespace its metadata names (none for a cluster-scoped `resource`);
// REQUIREs success, or AlreadyExists when `exists_ok`.
void CreateObject(kube::Client& client, const kube::Resource& resource, const Json& object,
                  bool exists_ok = false);

}  // namespace syncbus::testing
