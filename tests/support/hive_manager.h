// HiveManager: upstream Hive's controller manager (the shared directory's `manager`, built from
// openshift/hive's mce-2.2 line; a user's clone has none) running only its clustersync controller
// against a hub, for the tests that compare syncbus with it and switch a fleet between the two.
// It listens on fixed ports, so one instance runs per machine: the constructor takes the
// machine-wide lock file (the shared directory's parent's .hive-manager.lock, as `flock` takes it)
// and the destructor releases it. Thread-compatible: one owner.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "common/kube/client_impl.h"
#include "tests/support/child_process.h"

namespace syncbus::testing {

// Says plainly that the test did not run and why, and ends the process with 77, which ctest
// reports as skipped (SKIP_RETURN_CODE): never a pass.
[[noreturn]] void ExitDidNotRun(const std::string& why);

class HiveManager {
 public:
  // The directory holding `manager` and its `crds/` ($SYNCBUS_HIVE_DIR, else the repository's
  // ../shared/hive); nullopt with `why` set when there is none.
  static std::optional<std::string> Dir(std::string* why);
  // What clustersync needs on the hub, idempotent: Hive's CRDs (the binary's, then the repository's
  // newer copies over them), the namespace hive and a StatefulSet hive/hive-clustersync of one
  // ready replica (no pod ever runs: clustersync only checks its counts).
  static void PrepareHub(kube::ClientImpl& hub, const std::string& dir);

  // Starts the manager with `hub_kubeconfig` (a file), its output in `log_file`.
  HiveManager(const std::string& dir, const std::string& hub_kubeconfig,
              const std::string& log_file);
  ~HiveManager();
  HiveManager(const HiveManager&) = delete;
  HiveManager& operator=(const HiveManager&) = delete;

  // SIGTERM and wait (the destructor does it too); returns its exit code.
  std::optional<int> Stop();
  std::string Log() const { return process_ ? process_->Log() : ""; }
  bool running() { return process_ && process_->running(); }

 private:
  int lock_fd_ = -1;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace syncbus::testing
