// Daemon scaffolding shared by the binaries' thin mains: stop signals, the hub connection from
// config (kubeconfig file or in-cluster service account), and sleeping that wakes on stop.
// Functions are thread-safe; the stop flag is process-wide.
#pragma once

#include <atomic>
#include <chrono>

#include "common/config.h"
#include "common/kube/config.h"
#include "common/status.h"

namespace syncbus {

// Installs SIGTERM/SIGINT handlers that set the returned flag (idempotent).
const std::atomic<bool>& InstallStopSignals();

// kubeconfig (+ context) when configured, else the in-cluster service account.
Result<kube::ClusterConfig> HubClusterConfig(const HubConfig& hub);

// Sleeps up to `d`, returning early once `stop` is set.
void SleepUnlessStopped(std::chrono::milliseconds d, const std::atomic<bool>& stop);

}  // namespace syncbus
