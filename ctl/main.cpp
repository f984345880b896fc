// syncbusctl: operators' command line for syncbus.
#include <CLI/CLI.hpp>

#include "common/time_format.h"
#include "ctl/commands.h"

int main(int argc, char** argv) {
  using namespace syncbus;
  CLI::App cli{"syncbusctl: operate syncbus (fleet barrier, topology)"};
  cli.require_subcommand(1);

  ctl::WaitOptions wait;
  std::string timeout = "10m", interval = "1s";
  auto* w = cli.add_subcommand("wait", "wait until every cluster has its current SyncSets applied (a barrier)");
  w->add_option("--kubeconfig", wait.kubeconfig, "hub kubeconfig (default: config file's hub, else in-cluster)");
  w->add_option("--context", wait.context, "kubeconfig context");
  w->add_option("-c,--config", wait.config_file, "syncbus YAML config");
  w->add_option("-n,--namespace", wait.ns, "only clusters in this namespace");
  w->add_option("--timeout", timeout, "give up after this long (e.g. 90s, 10m)");
  w->add_option("--interval", interval, "poll interval");
  w->add_option("--metrics-url", wait.metrics_urls, "consumer /metrics URL to count applies (repeatable)");
  w->add_option("--start-time", wait.start_time, "unix time the run started (elapsed and rate)");
  w->add_flag("--json", wait.json, "print the result as JSON");
  w->add_flag("-q,--quiet", wait.quiet, "no progress lines");

  std::string topo_config, vhost = "/";
  auto* t = cli.add_subcommand("topology", "print the broker topology as importable definitions JSON");
  t->add_option("-c,--config", topo_config, "syncbus YAML config (retry tiers, limits)");
  t->add_option("--vhost", vhost, "vhost to put in the definitions");

  CLI11_PARSE(cli, argc, argv);
  if (w->parsed()) {
    auto t1 = ParseDuration(timeout), t2 = ParseDuration(interval);
    if (!t1.ok() || !t2.ok()) {
      std::fprintf(stderr, "syncbusctl: %s\n", (!t1.ok() ? t1.status() : t2.status()).message().c_str());
      return 2;
    }
    wait.timeout = *t1;
    wait.interval = *t2;
    return ctl::RunWait(wait);
  }
  return ctl::RunTopology(topo_config, vhost);
}
