// syncbusctl's commands as functions (main.cpp only parses flags). Each returns the process exit
// code: 0 success, 1 the operation did not succeed (e.g. timeout), 2 bad input.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace syncbus::ctl {

struct WaitOptions {
  std::string kubeconfig;                 // empty: the config file's hub section / in-cluster
  std::string context;
  std::string config_file;                // optional syncbus.yaml for hub settings
  std::string ns;
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  std::chrono::milliseconds interval{std::chrono::seconds(1)};
  std::vector<std::string> metrics_urls;  // consumers' /metrics, for applies and rate
  double start_time = 0;                  // unix seconds the run started (elapsed, rate); 0 = now
  bool json = false;
  bool quiet = false;
};

// The barrier: waits until every eligible cluster reports every applicable set at its current
// generation with Success. Progress on stderr; the summary line (or JSON) on stdout.
int RunWait(const WaitOptions& options);

// Prints the topology as `rabbitmqctl import_definitions` JSON for `vhost`.
int RunTopology(const std::string& config_file, const std::string& vhost);

}  // namespace syncbus::ctl
