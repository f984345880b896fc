#include "tests/support/process_rig.h"

#include <fstream>

#include <doctest/doctest.h>

#include "common/bus/config.h"
#include "common/bus/topology.h"
#include "common/http/curl_transport.h"
#include "common/kube/config.h"
#include "tests/support/files.h"
#include "tests/support/wait.h"

namespace syncbus::testing {

ProcessRig::ProcessRig(const std::string& prefix)
    : dir(MakeTempDir(prefix)), vhost(NewTestVhost()) {}

void ProcessRig::StartSimulator(const std::vector<std::string>& fleet_args) {
  std::vector<std::string> argv = {BinaryDir() + "/tests/kubesim/syncbus-kubesim"};
  argv.insert(argv.end(), fleet_args.begin(), fleet_args.end());
  argv.insert(argv.end(),
              {"--port-file", dir + "/kubesim.port", "--kubeconfig-out", dir + "/hub.kubeconfig"});
  auto p = ChildProcess::Start(argv, dir + "/kubesim.log");
  REQUIRE_MESSAGE(p.ok(), p.status().ToString());
  sim.emplace(std::move(*p));
  REQUIRE_MESSAGE(
      WaitFor([&] { return !ReadFile(dir + "/hub.kubeconfig").empty(); }, std::chrono::seconds(30)),
      sim->Log());
  sim_port = std::stoi(ReadFile(dir + "/kubesim.port"));
  auto t = http::CurlTransport::Create({});
  REQUIRE(t.ok());
  transport = std::move(*t);
  auto cfg = kube::LoadKubeconfigFile(dir + "/hub.kubeconfig");
  REQUIRE_MESSAGE(cfg.ok(), cfg.status().ToString());
  hub = std::make_unique<kube::ClientImpl>(*cfg, transport);
}

void ProcessRig::WriteConfig(const std::string& sections) const {
  std::ofstream(dir + "/syncbus.yaml") << vhost.ConfigYaml(", heartbeatSeconds: 10")
                                       << "hub: {kubeconfig: " << dir << "/hub.kubeconfig}\n"
                                       << sections;
  // The policies of that topology, as a deployment has them (the daemons cannot set policies).
  auto config = LoadConfigFile(dir + "/syncbus.yaml");
  REQUIRE_MESSAGE(config.ok(), config.status().ToString());
  Status applied = vhost.ApplyPolicies(amqp::SyncbusTopology(config->topology).policies);
  REQUIRE_MESSAGE(applied.ok(), applied.ToString());
}

ChildProcess ProcessRig::StartDaemon(const std::string& binary,
                                     const std::vector<std::string>& args,
                                     const std::string& log) const {
  std::vector<std::string> argv = {BinaryDir() + "/" + binary, "--config", dir + "/syncbus.yaml"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto p = ChildProcess::Start(argv, dir + "/" + log);
  REQUIRE_MESSAGE(p.ok(), p.status().ToString());
  return std::move(*p);
}

}  // namespace syncbus::testing
