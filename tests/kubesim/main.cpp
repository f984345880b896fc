// syncbus-kubesim: the Kubernetes API simulator (a hub with Hive's CRDs and N target clusters) on
// one port, with a generated fleet, fault injection, per-cluster credentials and a write journal.
// Thin main over SimServer.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <CLI/CLI.hpp>
#include <sys/resource.h>

#include "common/build_info.h"
#include "common/log.h"
#include "common/time_format.h"
#include "tests/kubesim/sim_server.h"

namespace {

using syncbus::Status;

// "host:port", "[v6]:port" or ":port".
Status ParseListen(const std::string& text, std::string* host, int* port) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos) return syncbus::InvalidArgument("--listen wants host:port");
  std::string h = text.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  try {
    size_t used = 0;
    int p = std::stoi(text.substr(colon + 1), &used);
    if (used != text.size() - colon - 1 || p < 0 || p > 65535) throw std::out_of_range("port");
    *port = p;
  } catch (const std::exception&) {
    return syncbus::InvalidArgument("--listen: bad port in " + text);
  }
  *host = h.empty() ? "0.0.0.0" : h;
  return Status::Ok();
}

// Writes via a temporary file and a rename, so readers never see a partial file.
Status WriteFileAtomically(const std::string& path, const std::string& content) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << content;
    if (!out.flush()) return syncbus::Unavailable("writing " + tmp);
  }
  std::error_code error;
  std::filesystem::rename(tmp, path, error);
  if (error)
    return syncbus::Unavailable("renaming " + tmp + " to " + path + ": " + error.message());
  return Status::Ok();
}

// Thousands of connections need more than the usual soft limit of 1024 descriptors.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace syncbus;
  CLI::App cli{"syncbus-kubesim: a simulated Kubernetes hub with Hive CRDs and target clusters"};
  cli.set_version_flag("--version", VersionText("syncbus-kubesim"));
  kubesim::SimServer::Options options;
  kubesim::Simulation::Options& sim = options.simulation;
  kubesim::FleetSpec& fleet = sim.fleet;
  kubesim::FaultSpec& faults = sim.faults;
  std::string listen = "127.0.0.1:0", port_file, kubeconfig_out, bookmark_interval = "5s";
  std::string log_level = "info";
  cli.add_option("--listen", listen, "host:port to serve on (port 0 = any free port)")
      ->capture_default_str();
  cli.add_option("--port-file", port_file, "write the chosen port here once listening");
  cli.add_option("--kubeconfig-out", kubeconfig_out,
                 "write a kubeconfig for the hub here once the fleet is ready");
  cli.add_option("--threads", options.threads, "event-loop threads")->capture_default_str();
  cli.add_option("--clusters", fleet.clusters, "target clusters (cluster-NNNN)");
  cli.add_option("--syncsets", fleet.syncsets, "SyncSets per cluster");
  cli.add_option("--selector-syncsets", fleet.selector_syncsets,
                 "SelectorSyncSets selecting the whole fleet");
  cli.add_option("--resources", fleet.resources, "ConfigMaps per SyncSet and SelectorSyncSet");
  cli.add_flag("--host-per-cluster", fleet.host_per_cluster,
               "admin kubeconfigs address <cluster>.localhost: one connection pool per cluster in "
               "clients, as with real clusters (plain HTTP only)");
  cli.add_option("--namespaces-per-cluster", fleet.namespaces_per_cluster,
                 "extra namespaces per target; resources spread over them instead of default");
  cli.add_option("--token", sim.token,
                 "require this bearer token (401 otherwise); with --cluster-credentials, on the "
                 "hub only");
  cli.add_flag("--cluster-credentials", sim.cluster_credentials,
               "give every target cluster its own random bearer token, which it alone accepts, "
               "and put it in the cluster's admin kubeconfig Secret on the hub with a client key "
               "and self-signed certificate of its own (EC P-256; not checked over HTTP)");
  cli.add_option("--journal", sim.journal_path,
                 "write one JSON line per request that changed an object (POST, PUT, PATCH, "
                 "DELETE) on the hub or a target to this file (truncated at start; written out "
                 "at least every 100ms, on POST /_sim/journal/flush and on exit)");
  cli.add_option("--tls-cert", options.tls_cert_file,
                 "serve HTTPS with this PEM certificate (kubeconfigs trust it as their CA)");
  cli.add_option("--tls-key", options.tls_key_file, "the certificate's PEM private key");
  cli.add_option("--crd-dir", sim.crd_dir, "directory of the hub's CRD YAML files")
      ->default_str(SYNCBUS_KUBESIM_CRD_DIR);
  cli.add_option("--seed", sim.seed, "seed for fault draws (reproducible runs)")
      ->capture_default_str();
  cli.add_option("--bookmark-interval", bookmark_interval,
                 "how often watches get a BOOKMARK (e.g. 5s, 500ms; 0 = never)")
      ->capture_default_str();
  cli.add_option("--latency-p50-ms", faults.latency_p50_ms,
                 "median added latency per request (lognormal; with --latency-p99-ms)");
  cli.add_option("--latency-p99-ms", faults.latency_p99_ms, "99th percentile added latency");
  cli.add_option("--error-rate", faults.error_rate, "fraction of requests answered 500/503");
  cli.add_option("--throttle-rate", faults.throttle_rate, "fraction answered 429");
  cli.add_option("--retry-after-seconds", faults.retry_after_seconds, "Retry-After on 429 answers")
      ->capture_default_str();
  cli.add_option("--timeout-rate", faults.timeout_rate, "fraction never answered");
  cli.add_option("--drop-rate", faults.drop_rate, "fraction whose connection is dropped");
  cli.add_option("--log-level", log_level, "trace|debug|info|warn|error")->capture_default_str();
  CLI11_PARSE(cli, argc, argv);

  log::Init(log_level, "text", "kubesim");
  Status status = ParseListen(listen, &options.host, &options.port);
  Result<std::chrono::milliseconds> interval = std::chrono::milliseconds(0);
  if (!status.ok()) {
    interval = status;
  } else if (bookmark_interval != "0") {
    interval = ParseDuration(bookmark_interval);
  }
  if (!interval.ok()) {
    std::fprintf(stderr, "syncbus-kubesim: %s\n", interval.status().message().c_str());
    return 2;
  }
  options.bookmark_interval = *interval;
  if (faults.latency_p50_ms > 0 && faults.latency_p99_ms == 0) {
    faults.latency_p99_ms = faults.latency_p50_ms;
  }

  // Stop signals are taken with sigwait below; block them before any thread starts.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // A write to a connection its client has reset (a killed consumer's watch, a request it gave
  // up on) must fail that connection only: without this, SIGPIPE ends the whole simulator.
  std::signal(SIGPIPE, SIG_IGN);
  RaiseOpenFileLimit();

  auto server = kubesim::SimServer::Start(options);
  if (!server.ok()) {
    log::Error("kubesim failed to start", {{"error", server.status().ToString()}});
    return 1;
  }
  kubesim::SimServer& sim_server = **server;
  log::Info(sim_server.fleet().ToString(fleet), {{"base_url", sim_server.base_url()}});
  if (!port_file.empty()) {
    status = WriteFileAtomically(port_file, std::to_string(sim_server.port()) + "\n");
  }
  if (status.ok() && !kubeconfig_out.empty()) {
    status = WriteFileAtomically(kubeconfig_out, sim_server.HubKubeconfig());
  }
  if (!status.ok()) {
    log::Error("kubesim failed to write its outputs", {{"error", status.ToString()}});
    return 1;
  }
  std::printf("kubesim listening on %s (hub) with %d clusters\n", sim_server.base_url().c_str(),
              fleet.clusters);
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  log::Info("kubesim stopping", {{"signal", signal_number}});
  sim_server.Stop();
  server->reset();
  return 0;
}
