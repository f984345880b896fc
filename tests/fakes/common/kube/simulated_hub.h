// SimulatedHub: a simulator with a generated fleet and a real kube::ClientImpl of its hub over an
// InProcessTransport, for unit tests of code that reads and writes the hub. REQUIREs that the
// simulator starts and the fleet is generated. Members are declared in destruction-safe order
// (the client before the transport before the simulator). Thread-compatible.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include <doctest/doctest.h>

#include "common/kube/client_impl.h"
#include "tests/fakes/common/http/in_process_transport.h"
#include "tests/kubesim/sim_simulation.h"

namespace syncbus::fakes {

struct SimulatedHub {
  explicit SimulatedHub(kubesim::FleetSpec fleet, std::string server = "http://sim.invalid") {
    kubesim::Simulation::Options options;
    options.fleet = std::move(fleet);
    auto created = kubesim::Simulation::Create(options);
    REQUIRE_MESSAGE(created.ok(), created.status().ToString());
    sim = std::move(*created);
    auto generated = sim->GenerateFleet(server);
    REQUIRE_MESSAGE(generated.ok(), generated.status().ToString());
    transport = std::make_shared<InProcessTransport>(*sim);
    kube::ClusterConfig config;
    config.server = std::move(server);
    hub = std::make_unique<kube::ClientImpl>(config, transport);
  }

  std::unique_ptr<kubesim::Simulation> sim;
  std::shared_ptr<InProcessTransport> transport;
  std::unique_ptr<kube::ClientImpl> hub;
};

}  // namespace syncbus::fakes
