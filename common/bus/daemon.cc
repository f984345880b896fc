#include "common/bus/daemon.h"

#include <cctype>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <thread>

#include "common/build_info.h"
#include "common/http/metered_transport.h"
#include "common/http/transport_metrics.h"
#include "common/kube/client_impl.h"
#include "common/log.h"

namespace syncbus {
namespace {

std::atomic<bool> g_stop{false};

extern "C" void OnStopSignal(int) {
  g_stop.store(true);
}

}  // namespace

std::string OwnNamespace(const std::string& service_account_dir) {
  if (const char* env = std::getenv("POD_NAMESPACE"); env != nullptr && *env != '\0') return env;
  std::ifstream in(service_account_dir + "/namespace");
  std::string ns;
  if (in && std::getline(in, ns)) {
    while (!ns.empty() && std::isspace(static_cast<unsigned char>(ns.back()))) ns.pop_back();
    if (!ns.empty()) return ns;
  }
  return "syncbus";
}

ConfigOptions DaemonConfigOptions(bool strict) {
  ConfigOptions options;
  options.own_namespace = OwnNamespace();
  options.strict = strict;
  return options;
}

std::optional<Config> LoadDaemonConfig(const std::string& path, const std::string& component,
                                       bool strict) {
  auto config = LoadConfigFile(path, DaemonConfigOptions(strict));
  if (!config.ok()) {
    std::cerr << "syncbus-" << component << ": " << config.status().message() << "\n";
    return std::nullopt;
  }
  log::Init(config->log.level, config->log.format, component);
  for (const std::string& warning : config->warnings) {
    log::Warn(
        "configuration key ignored (a newer version's, or a typo; --strict-config refuses it)",
        {{"detail", warning}});
  }
  return std::move(*config);
}

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

Result<kube::ClusterConfig> CommandLineHubConfig(const HubConfig& hub) {
  auto config =
      kube::LoadClientConfig(kube::LoadingRulesFromEnvironment(hub.kubeconfig, hub.context));
  if (!config.ok()) return config.status().Annotate("hub connection");
  config->qps = hub.qps;
  return config;
}

std::optional<HubConnection> NewHubConnection(const HubConfig& hub,
                                              const http::CurlTransport::Options& transport_options,
                                              prometheus::Registry& registry,
                                              const std::string& user_agent) {
  auto transport = http::CurlTransport::Create(transport_options);
  auto config = HubClusterConfig(hub);
  if (config.ok()) config->user_agent = user_agent;
  if (!transport.ok() || !config.ok()) {
    log::Error("cannot start",
               {{"error", (!transport.ok() ? transport.status() : config.status()).message()}});
    return std::nullopt;
  }
  std::shared_ptr<http::CurlTransport> shared_transport = std::move(*transport);
  auto metered =
      std::make_shared<http::MeteredTransport>(shared_transport, registry, "syncbus_hub");
  return HubConnection{shared_transport, std::make_shared<kube::ClientImpl>(*config, metered)};
}

int RunDaemon(const AdminConfig& admin, std::shared_ptr<prometheus::Registry> registry,
              std::shared_ptr<http::CurlTransport> transport, std::function<Status()> healthy,
              std::function<Status()> ready, const std::function<Status()>& run,
              const std::string& component) {
  RegisterBuildInfo(*registry);
  http::TransportMetrics transport_metrics(*registry, std::move(transport));
  AdminServer::Hooks hooks{std::move(healthy), std::move(ready),
                           [&transport_metrics] { transport_metrics.Refresh(); }};
  std::unique_ptr<AdminServer> server;
  if (admin.port >= 0) {
    auto started = AdminServer::Start(admin, std::move(registry), std::move(hooks));
    if (!started.ok()) {
      log::Error("cannot start the admin endpoint", {{"error", started.status().message()}});
      return 1;
    }
    server = std::move(*started);
    log::Info("admin endpoint listening", {{"port", server->port()}});
  }
  Status s = run();
  log::Info(component + " stopped", {{"status", s.ToString()}});
  return s.ok() ? 0 : 1;
}

std::function<bool(Duration)> WaitUnlessStopped(const std::atomic<bool>& stop,
                                                std::function<void()> beat,
                                                std::function<bool()> go_on) {
  return [&stop, beat = std::move(beat), go_on = std::move(go_on)](Duration delay) {
    beat();
    SleepUnlessStopped(std::chrono::ceil<std::chrono::milliseconds>(delay), stop);
    beat();
    return !stop.load() && (!go_on || go_on());
  };
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
