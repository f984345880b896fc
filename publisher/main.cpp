// syncbus-publisher: watches the hub and enqueues one sync request per cluster that needs one.
#include <cstdlib>
#include <random>

#include <CLI/CLI.hpp>
#include <prometheus/registry.h>
#include <unistd.h>

#include "common/amqp/session_impl.h"
#include "common/build_info.h"
#include "common/bus/daemon.h"
#include "common/clock.h"
#include "common/command_line.h"
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
  bool strict_config = false;
  cli.add_flag("--strict-config", strict_config,
               "refuse unknown configuration keys (default: warn and ignore them)");
  cli.set_version_flag("--version", VersionText("syncbus-publisher"));
  if (auto code = ParseCommandLine(cli, argc, argv)) return *code;

  auto config = LoadDaemonConfig(config_path, "publisher", strict_config);
  if (!config) return 2;
  const auto& stop = InstallStopSignals();

  auto registry = std::make_shared<prometheus::Registry>();
  const std::string identity = ElectionIdentity();
  auto hub = NewHubConnection(config->hub, {}, *registry, "syncbus-publisher/" + identity);
  if (!hub) return 1;
  amqp::ConnectionOptions amqp_options = config->amqp;
  // Each replica's connection has its own name in the management UI.
  amqp_options.connection_name = "syncbus-publisher/" + identity;
  publisher::PublisherApp app(
      *config, {hub->client,
                hub->client->WithRequestTimeout(config->publisher.leader_election.renew_deadline),
                [amqp_options] { return std::make_unique<amqp::RabbitmqSession>(amqp_options); },
                &RealClock(), registry, identity,
                [amqp_options]() mutable {
                  amqp_options.connection_name += "/trace";
                  return std::make_unique<amqp::RabbitmqSession>(amqp_options);
                }});
  return RunDaemon(
      config->admin, registry, hub->transport, [&app] { return app.healthy(); },
      [&app] { return app.ready(); }, [&] { return app.Run(stop); }, "publisher");
}
