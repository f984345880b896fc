// syncbus-consumer: takes sync requests, applies SyncSets to target clusters, writes ClusterSync.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "common/admin_server.h"
#include "common/amqp/session_impl.h"
#include "common/clock.h"
#include "common/daemon.h"
#include "common/http/curl_transport.h"
#include "common/kube/client_impl.h"
#include "common/log.h"
#include "consumer/consumer_app.h"

namespace {

// Unique per process: "<name>-<host>-<pid>", so a restarted consumer never mistakes an old
// lease for its own.
std::string LeaseIdentity(const std::string& name) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return name + "-" + host + "-" + std::to_string(getpid());
}

}  // namespace

int main(int argc, char** argv) {
  using namespace syncbus;
  CLI::App cli{"syncbus-consumer: applies SyncSets to target clusters"};
  std::string config_path;
  std::string name = "syncbus-consumer";
  cli.add_option("-c,--config", config_path, "YAML config file (see docs/configuration.md)")
      ->required();
  cli.add_option("--name", name, "connection name shown in the RabbitMQ management UI");
  CLI11_PARSE(cli, argc, argv);

  auto config = LoadConfigFile(config_path);
  if (!config.ok()) {
    std::cerr << "syncbus-consumer: " << config.status().message() << "\n";
    return 2;
  }
  log::Init(config->log.level, config->log.format, "consumer");
  const auto& stop = InstallStopSignals();

  http::CurlTransport::Options transport_options;
  transport_options.max_host_connections = config->consumer.max_connections_per_host;
  auto transport = http::CurlTransport::Create(transport_options);
  auto hub_config = HubClusterConfig(config->hub);
  if (!transport.ok() || !hub_config.ok()) {
    log::Error("cannot start",
               {{"error", (!transport.ok() ? transport.status() : hub_config.status()).message()}});
    return 1;
  }
  std::shared_ptr<http::CurlTransport> shared_transport = std::move(*transport);
  auto registry = std::make_shared<prometheus::Registry>();
  amqp::ConnectionOptions amqp_options = config->amqp;
  amqp_options.connection_name = name;
  consumer::ConsumerApp app(
      *config, {std::make_shared<kube::ClientImpl>(*hub_config, shared_transport), shared_transport,
                [amqp_options] { return std::make_unique<amqp::RabbitmqSession>(amqp_options); },
                &RealClock(), registry, LeaseIdentity(name),
                [shared_transport] { shared_transport->Shutdown(); }});
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
  log::Info("consumer stopped", {{"status", s.ToString()}});
  return s.ok() ? 0 : 1;
}
