// syncbus-publisher: watches the hub and enqueues one sync request per cluster that needs one.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <random>

#include "common/admin_server.h"
#include "common/amqp/session_impl.h"
#include "common/clock.h"
#include "common/daemon.h"
#include "common/http/curl_transport.h"
#include "common/kube/client_impl.h"
#include "common/log.h"
#include "publisher/publisher_app.h"

namespace {

// The pod name (or host name) plus a random suffix: unique even for two processes on one host.
std::string ElectionIdentity() {
  const char* pod = std::getenv("POD_NAME");
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "_%08x", static_cast<unsigned>(std::random_device{}()));
  return std::string(pod && *pod ? pod : host) + suffix;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace syncbus;
  CLI::App cli{"syncbus-publisher: enqueues SyncSet work for every managed cluster"};
  std::string config_path;
  cli.add_option("-c,--config", config_path, "YAML config file (see docs/configuration.md)")
      ->required();
  CLI11_PARSE(cli, argc, argv);

  auto config = LoadConfigFile(config_path);
  if (!config.ok()) {
    std::cerr << "syncbus-publisher: " << config.status().message() << "\n";
    return 2;
  }
  log::Init(config->log.level, config->log.format, "publisher");
  const auto& stop = InstallStopSignals();

  auto transport = http::CurlTransport::Create({});
  auto hub_config = HubClusterConfig(config->hub);
  if (!transport.ok() || !hub_config.ok()) {
    log::Error("cannot start",
               {{"error", (!transport.ok() ? transport.status() : hub_config.status()).message()}});
    return 1;
  }
  std::shared_ptr<http::Transport> shared_transport = std::move(*transport);
  auto registry = std::make_shared<prometheus::Registry>();
  amqp::ConnectionOptions amqp_options = config->amqp;
  amqp_options.connection_name = "syncbus-publisher";
  publisher::PublisherApp app(
      *config, {std::make_shared<kube::ClientImpl>(*hub_config, shared_transport),
                [amqp_options] { return std::make_unique<amqp::RabbitmqSession>(amqp_options); },
                &RealClock(), registry, ElectionIdentity()});
  std::unique_ptr<AdminServer> admin;
  if (config->admin.port >= 0) {
    auto started =
        AdminServer::Start(config->admin, registry,
                           {[&app] { return app.healthy(); }, [&app] { return app.ready(); }});
    if (!started.ok()) {
      log::Error("cannot start the admin endpoint", {{"error", started.status().message()}});
      return 1;
    }
    admin = std::move(*started);
    log::Info("admin endpoint listening", {{"port", admin->port()}});
  }
  Status s = app.Run(stop);
  log::Info("publisher stopped", {{"status", s.ToString()}});
  return s.ok() ? 0 : 1;
}
