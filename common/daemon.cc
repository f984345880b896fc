#include "common/daemon.h"

#include <csignal>
#include <thread>

namespace syncbus {
namespace {

std::atomic<bool> g_stop{false};

extern "C" void OnStopSignal(int) {
  g_stop.store(true);
}

}  // namespace

const std::atomic<bool>& InstallStopSignals() {
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return g_stop;
}

Result<kube::ClusterConfig> HubClusterConfig(const HubConfig& hub) {
  auto config = hub.kubeconfig.empty() ? kube::InClusterConfig()
                                       : kube::LoadKubeconfigFile(hub.kubeconfig, hub.context);
  if (!config.ok()) return config.status().Annotate("hub connection");
  config->qps = hub.qps;
  return config;
}

void SleepUnlessStopped(std::chrono::milliseconds d, const std::atomic<bool>& stop) {
  auto until = std::chrono::steady_clock::now() + d;
  while (!stop.load() && std::chrono::steady_clock::now() < until) {
    auto left = until - std::chrono::steady_clock::now();
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(std::chrono::milliseconds(50), left));
  }
}

}  // namespace syncbus
