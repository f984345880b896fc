#include "ctl/commands.h"

#include <cstdio>
#include <iostream>
#include <thread>

#include "common/amqp/syncbus_topology.h"
#include "common/config.h"
#include "common/daemon.h"
#include "common/http/curl_transport.h"
#include "common/kube/client_impl.h"
#include "ctl/fleet_progress.h"
#include "ctl/metrics_scrape.h"

namespace syncbus::ctl {
namespace {

Result<Config> LoadOptionalConfig(const std::string& path) {
  if (path.empty()) return ParseConfig("");
  return LoadConfigFile(path);
}

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

int RunWait(const WaitOptions& options) {
  auto config = LoadOptionalConfig(options.config_file);
  if (!config.ok()) {
    std::cerr << "syncbusctl: " << config.status().message() << "\n";
    return 2;
  }
  HubConfig hub = config->hub;
  if (!options.kubeconfig.empty()) hub.kubeconfig = options.kubeconfig;
  if (!options.context.empty()) hub.context = options.context;
  auto cluster = HubClusterConfig(hub);
  auto transport = http::CurlTransport::Create({});
  if (!cluster.ok() || !transport.ok()) {
    std::cerr << "syncbusctl: " << (!cluster.ok() ? cluster.status() : transport.status()).message() << "\n";
    return 2;
  }
  std::shared_ptr<http::Transport> shared = std::move(*transport);
  kube::ClientImpl client(*cluster, shared);
  const auto& stop = InstallStopSignals();
  double start = options.start_time > 0 ? options.start_time : NowSeconds();
  auto deadline = std::chrono::steady_clock::now() + options.timeout;
  FleetProgress progress;
  std::string last_line;
  bool reached = false;
  while (true) {
    auto read = ReadProgress(client, options.ns);
    if (read.ok()) {
      progress = std::move(*read);
      char line[160];
      std::snprintf(line, sizeof line, "progress: synced=%zu/%zu failing=%zu pending=%zu skipped=%zu elapsed=%.1fs",
                    progress.synced, progress.clusters, progress.failing, progress.pending, progress.skipped,
                    NowSeconds() - start);
      std::string key = std::to_string(progress.synced) + "/" + std::to_string(progress.failing);
      if (!options.quiet && key != last_line) {
        std::cerr << line << std::endl;
        last_line = key;
      }
      if (progress.done()) {
        reached = true;
        break;
      }
    } else if (!options.quiet) {
      std::cerr << "syncbusctl: " << read.status().message() << " (retrying)" << std::endl;
    }
    if (stop.load() || std::chrono::steady_clock::now() >= deadline) break;
    SleepUnlessStopped(options.interval, stop);
  }
  double elapsed = NowSeconds() - start;
  double applies = 0, failed = static_cast<double>(progress.failing);
  if (!options.metrics_urls.empty()) {
    auto ok = ScrapeSum(*shared, options.metrics_urls, "syncbus_consumer_resources_applied_total", "result=\"success\"");
    auto bad = ScrapeSum(*shared, options.metrics_urls, "syncbus_consumer_resources_applied_total", "result=\"failure\"");
    if (ok.ok()) applies = *ok;
    if (bad.ok()) failed = *bad;
    if (!ok.ok()) std::cerr << "syncbusctl: " << ok.status().message() << "\n";
  }
  if (options.json) {
    Json out = progress.ToJson();
    out["reached"] = reached;
    out["elapsedSeconds"] = elapsed;
    out["applies"] = applies;
    out["failedApplies"] = failed;
    std::cout << out.dump(2) << std::endl;
  } else {
    if (!reached && !options.quiet) {
      std::cerr << "syncbusctl: not every cluster reached its desired state";
      if (!progress.failing_clusters.empty()) std::cerr << "; failing: " << progress.failing_clusters.front() << " ...";
      if (!progress.pending_clusters.empty()) std::cerr << "; pending: " << progress.pending_clusters.front() << " ...";
      std::cerr << std::endl;
    }
    std::printf("summary: synced=%zu/%zu clusters applies=%.0f failed=%.0f elapsed=%.1fs rate=%.0f/s\n",
                progress.synced, progress.clusters, applies, failed, elapsed, elapsed > 0 ? applies / elapsed : 0);
  }
  return reached ? 0 : 1;
}

int RunTopology(const std::string& config_file, const std::string& vhost) {
  auto config = LoadOptionalConfig(config_file);
  if (!config.ok()) {
    std::cerr << "syncbusctl: " << config.status().message() << "\n";
    return 2;
  }
  Json defs = amqp::ToDefinitions(amqp::SyncbusTopology(config->topology), vhost);
  Json out = {{"vhosts", Json::array({Json{{"name", vhost}}})}, {"policies", Json::array()}};
  for (const char* k : {"exchanges", "queues", "bindings"}) out[k] = defs[k];
  std::cout << out.dump(2) << std::endl;
  return 0;
}

}  // namespace syncbus::ctl
