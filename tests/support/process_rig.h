// ProcessRig: what the process-level tests share: a temp dir, a fresh vhost on the broker fixture,
// syncbus-kubesim as a child process with a client of its hub, and daemons of the build tree run
// on a syncbus.yaml written there. Fails the running doctest test on errors. Thread-compatible.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/http/transport.h"
#include "common/kube/client_impl.h"
#include "tests/support/child_process.h"
#include "tests/support/test_broker.h"

namespace syncbus::testing {

struct ProcessRig {
  // The temp dir is /tmp/<prefix>-XXXXXX.
  explicit ProcessRig(const std::string& prefix);

  // Starts syncbus-kubesim with `fleet_args` (--clusters ...), writing <dir>/hub.kubeconfig, waits
  // until it serves and connects `hub` to it.
  void StartSimulator(const std::vector<std::string>& fleet_args);
  // Writes <dir>/syncbus.yaml: the vhost (10 s heartbeats), the simulator as hub, then `sections`;
  // puts the policies of its topology on the vhost.
  void WriteConfig(const std::string& sections) const;
  // Starts `binary` (a path in the build tree) with --config <dir>/syncbus.yaml and `args`, its
  // output in <dir>/<log>.
  ChildProcess StartDaemon(const std::string& binary, const std::vector<std::string>& args,
                           const std::string& log) const;

  std::string dir;
  TestVhost vhost;
  std::optional<ChildProcess> sim;
  int sim_port = 0;
  std::shared_ptr<http::Transport> transport;
  std::unique_ptr<kube::ClientImpl> hub;
};

}  // namespace syncbus::testing
