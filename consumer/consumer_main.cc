#include "consumer/consumer_main.h"

#include <CLI/CLI.hpp>
#include <prometheus/registry.h>
#include <unistd.h>

#include "common/amqp/session_impl.h"
#include "common/build_info.h"
#include "common/bus/daemon.h"
#include "common/clock.h"
#include "common/command_line.h"
#include "common/http/curl_transport.h"
#include "common/log.h"
#include "consumer/consumer_app.h"

namespace syncbus::consumer {
namespace {

// Unique per process: "<name>-<host>-<pid>", so a restarted consumer never mistakes an old
// lease for its own.
std::string LeaseIdentity(const std::string& name) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return name + "-" + host + "-" + std::to_string(getpid());
}

}  // namespace

int ConsumerMain(int argc, char** argv, ReaderDecorator decorate_reader) {
  CLI::App cli{"syncbus-consumer: applies SyncSets to target clusters"};
  std::string config_path;
  std::string name = "syncbus-consumer";
  cli.add_option("-c,--config", config_path, "YAML config file (see docs/configuration.md)")
      ->required();
  cli.add_option("--name", name, "connection name shown in the RabbitMQ management UI");
  bool strict_config = false;
  cli.add_flag("--strict-config", strict_config,
               "refuse unknown configuration keys (default: warn and ignore them)");
  cli.set_version_flag("--version", VersionText("syncbus-consumer"));
  if (auto code = ParseCommandLine(cli, argc, argv)) return *code;

  auto config = LoadDaemonConfig(config_path, "consumer", strict_config);
  if (!config) return 2;
  const auto& stop = InstallStopSignals();

  http::CurlTransport::Options transport_options;
  transport_options.max_host_connections = config->consumer.max_connections_per_host;
  transport_options.max_idle_connections = config->consumer.max_idle_connections;
  transport_options.idle_pool_timeout = config->consumer.idle_connection_timeout;
  auto registry = std::make_shared<prometheus::Registry>();
  const std::string identity = LeaseIdentity(name);
  auto hub =
      NewHubConnection(config->hub, transport_options, *registry, "syncbus-consumer/" + identity);
  if (!hub) return 1;
  amqp::ConnectionOptions amqp_options = config->amqp;
  amqp_options.connection_name = name;
  consumer::ConsumerApp app(
      *config,
      {std::move(hub->client), hub->transport,
       [amqp_options] { return std::make_unique<amqp::RabbitmqSession>(amqp_options); },
       [amqp_options]() mutable {
         amqp_options.connection_name += "/preview";
         return std::make_unique<amqp::RabbitmqSession>(amqp_options);
       },
       [amqp_options]() mutable {
         amqp_options.connection_name += "/trace";
         return std::make_unique<amqp::RabbitmqSession>(amqp_options);
       },
       &RealClock(), registry, identity, [transport = hub->transport] { transport->Shutdown(); },
       std::move(decorate_reader)});
  return RunDaemon(
      config->admin, registry, hub->transport, [&app] { return app.healthy(); },
      [&app] { return app.ready(); }, [&] { return app.Run(stop); }, "consumer");
}

}  // namespace syncbus::consumer
