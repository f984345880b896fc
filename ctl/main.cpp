// syncbusctl: operators' command line for syncbus.
#include <CLI/CLI.hpp>

#include "common/build_info.h"
#include "common/time_format.h"
#include "ctl/commands.h"

int main(int argc, char** argv) {
  using namespace syncbus;
  CLI::App cli{"syncbusctl: operate syncbus (fleet status and traces, barrier, dead-letter queue, topology)"};
  cli.require_subcommand(1);
  cli.set_version_flag("--version", VersionText("syncbusctl"));

  ctl::WaitOptions wait;
  std::string timeout = "10m", interval = "1s";
  auto* w = cli.add_subcommand("wait", "wait until every cluster has its current SyncSets applied (a barrier)");
  w->add_option("--kubeconfig", wait.kubeconfig, "hub kubeconfig (default: the config file's hub.kubeconfig, else $KUBECONFIG, ~/.kube/config, in-cluster)");
  w->add_option("--context", wait.context, "kubeconfig context");
  w->add_option("-c,--config", wait.config_file, "syncbus YAML config");
  w->add_option("-n,--namespace", wait.ns, "only clusters in this namespace");
  w->add_option("--timeout", timeout, "give up after this long (e.g. 90s, 10m)");
  w->add_option("--interval", interval, "poll interval");
  w->add_option("--metrics-url", wait.metrics_urls, "consumer /metrics URL to count applies (repeatable)");
  w->add_option("--start-time", wait.start_time, "unix time the run started (elapsed and rate)");
  w->add_flag("--json", wait.json, "print the result as JSON");
  w->add_flag("-q,--quiet", wait.quiet, "no progress lines");

  ctl::StatusOptions status;
  std::string status_since = "1h", output;
  auto* st = cli.add_subcommand("status", "the fleet at a glance, or one cluster: its request, lease and sets");
  st->add_option("cluster", status.cluster, "one cluster: NAMESPACE/NAME, or NAME with -n");
  st->add_option("--kubeconfig", status.kubeconfig, "hub kubeconfig (default: the config file's hub.kubeconfig, else $KUBECONFIG, ~/.kube/config, in-cluster)");
  st->add_option("--context", status.context, "kubeconfig context");
  st->add_option("-c,--config", status.config_file, "syncbus YAML config (hub and amqp sections)");
  st->add_option("-n,--namespace", status.ns, "only clusters in this namespace");
  st->add_option("--since", status_since, "trace window to locate requests in (e.g. 30m, 6h)");
  st->add_option("-o,--output", output, "table (default), wide (every cluster) or json")
      ->check(CLI::IsMember({"table", "wide", "json"}));
  st->add_flag("--json", status.json, "same as -o json");

  ctl::TraceOptions trace;
  std::string trace_since = "1h";
  auto* tr = cli.add_subcommand("trace", "a cluster's recent timeline: decided, published, delivered, attempts, applied, acked");
  tr->add_option("cluster", trace.cluster, "NAMESPACE/NAME, or a name in any namespace");
  tr->add_flag("--all", trace.all, "every cluster's events instead, one JSON object per line");
  tr->add_option("-c,--config", trace.config_file, "syncbus YAML config (its amqp section)");
  tr->add_option("--since", trace_since, "how far back to read the trace stream (e.g. 30m, 6h)");
  tr->add_flag("-f,--follow", trace.follow, "keep printing new steps until interrupted");
  tr->add_option("-o,--output", output, "table (default) or json")->check(CLI::IsMember({"table", "json"}));
  tr->add_flag("--json", trace.json, "same as -o json");

  std::string topo_config, vhost = "/";
  auto* t = cli.add_subcommand("topology", "print the broker topology as importable definitions JSON");
  t->add_option("-c,--config", topo_config, "syncbus YAML config (retry tiers, limits)");
  t->add_option("--vhost", vhost, "vhost to put in the definitions");

  ctl::DlqOptions dlq;
  std::string older_than, newer_than;
  auto* d = cli.add_subcommand("dlq", "inspect, replay or purge the dead-letter queue (syncbus.dead)");
  d->require_subcommand(1);
  auto* dlq_list = d->add_subcommand("list", "show parked messages (cluster, reason, attempts, first failure, age, last error)");
  auto* dlq_replay = d->add_subcommand("replay", "republish matching messages to the work exchange with attempts reset");
  auto* dlq_purge = d->add_subcommand("purge", "delete matching messages (asks first unless --yes)");
  for (auto* sub : {dlq_list, dlq_replay, dlq_purge}) {
    sub->add_option("-c,--config", dlq.config_file, "syncbus YAML config (its amqp section)")->required();
    sub->add_option("--cluster", dlq.filter.cluster, "only this cluster: ns/name, or a name in any namespace");
    sub->add_option("--reason", dlq.filter.reason, "only this reason: max-attempts, undecodable, delivery_limit");
    sub->add_option("--older-than", older_than, "only messages parked at least this long ago (e.g. 10m)");
    sub->add_option("--newer-than", newer_than, "only messages parked less than this long ago");
    sub->add_option("--limit", dlq.limit, "act on at most this many matches");
    sub->add_flag("--json", dlq.json, "print the messages as JSON");
    sub->add_flag("-q,--quiet", dlq.quiet, "no progress lines");
  }
  for (auto* sub : {dlq_replay, dlq_purge}) sub->add_flag("--dry-run", dlq.dry_run, "show what would be done");
  dlq_replay->add_option("--rate", dlq.rate_per_second, "at most this many replays per second (0 = no limit)");
  dlq_purge->add_flag("-y,--yes", dlq.yes, "do not ask for confirmation");

  CLI11_PARSE(cli, argc, argv);
  if (st->parsed() || tr->parsed()) {
    auto since = ParseDuration(st->parsed() ? status_since : trace_since);
    if (!since.ok()) {
      std::fprintf(stderr, "syncbusctl: --since: %s\n", since.status().message().c_str());
      return 2;
    }
    if (st->parsed()) {
      status.since = *since;
      status.json = status.json || output == "json";
      status.wide = output == "wide";
      return ctl::RunStatus(status);
    }
    if (trace.all == !trace.cluster.empty()) {
      std::fprintf(stderr, "syncbusctl trace: give a cluster or --all\n");
      return 2;
    }
    trace.since = *since;
    trace.json = trace.json || output == "json";
    return ctl::RunTrace(trace);
  }
  if (d->parsed()) {
    for (auto [text, field] : {std::pair{&older_than, &dlq.filter.older_than}, std::pair{&newer_than, &dlq.filter.newer_than}}) {
      if (text->empty()) continue;
      auto parsed = ParseDuration(*text);
      if (!parsed.ok()) {
        std::fprintf(stderr, "syncbusctl: %s\n", parsed.status().message().c_str());
        return 2;
      }
      *field = *parsed;
    }
    dlq.action = dlq_replay->parsed() ? ctl::DlqAction::kReplay
                 : dlq_purge->parsed() ? ctl::DlqAction::kPurge
                                       : ctl::DlqAction::kList;
    return ctl::RunDlq(dlq);
  }
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
