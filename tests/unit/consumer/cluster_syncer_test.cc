// ClusterSyncer against the simulator in process: what one sync costs the hub, by verb and
// resource, and when the admin kubeconfig Secret is read.
#include <doctest/doctest.h>

#include <prometheus/registry.h>

#include "common/kube/client_impl.h"
#include "consumer/cluster_syncer.h"
#include "tests/fakes/in_process_transport.h"
#include "tests/unit/kubesim/api_test_util.h"

using namespace syncbus;
using namespace syncbus::consumer;

namespace {

struct Rig {
  std::unique_ptr<kubesim::Simulation> sim;
  std::shared_ptr<fakes::InProcessTransport> transport;
  std::unique_ptr<kube::ClientImpl> hub;
  prometheus::Registry registry;
  std::unique_ptr<TargetClients> targets;
  std::unique_ptr<ClusterSyncer> syncer;

  Rig() {
    sim = kubesim::testing::MakeSimulation({.clusters = 2, .syncsets = 1, .selector_syncsets = 1, .resources = 2});
    auto generated = sim->GenerateFleet("http://kubesim.test");
    REQUIRE_MESSAGE(generated.ok(), generated.status().ToString());
    transport = std::make_shared<fakes::InProcessTransport>(*sim);
    kube::ClusterConfig config;
    config.server = "http://kubesim.test";
    hub = std::make_unique<kube::ClientImpl>(config, transport);
    targets = std::make_unique<TargetClients>(transport, 0);
    syncer = std::make_unique<ClusterSyncer>(SyncerOptions{}, *hub, *targets, RealClock(), registry);
  }
  Result<SyncOutcome> Sync(bool full_reapply = false) {
    SyncRequest r;
    r.cluster_namespace = "cluster-0001";
    r.cluster_name = "cluster-0001";
    r.full_reapply = full_reapply;
    return syncer->Sync(r);
  }
  uint64_t HubCount(const std::string& verb, const std::string& resource) {
    return sim->Stats()["hubRequests"].value(verb, Json::object()).value(resource, uint64_t{0});
  }
  void Faults(double error_rate) {
    Json body = {{"clusters", Json::array({"cluster-0001"})}, {"errorRate", error_rate}};
    REQUIRE(sim->faults().Apply(body, [](const std::string&) { return true; }).ok());
  }
  // Bumps a set's generation so the next sync applies it.
  void EditSelectorSyncSet() {
    auto sss = hub->Get(kube::Object(kube::resources::kSelectorSyncSets, "", "fleet-sss-00"));
    REQUIRE(sss.ok());
    (*sss)["spec"]["resources"][0]["data"]["edited"] = std::to_string(++edits_);
    REQUIRE(hub->Update(kube::Object(kube::resources::kSelectorSyncSets, "", "fleet-sss-00"), *sss).ok());
  }

 private:
  int edits_ = 0;
};

}  // namespace

TEST_CASE("a cluster's kubeconfig Secret is read once while its syncs succeed") {
  Rig rig;
  auto first = rig.Sync();
  REQUIRE_MESSAGE(first.ok(), first.status().ToString());
  CHECK(first->kind == SyncOutcome::Kind::kSynced);
  CHECK(rig.HubCount("get", "secrets") == 1);

  rig.EditSelectorSyncSet();
  auto second = rig.Sync();
  REQUIRE(second.ok());
  CHECK(second->kind == SyncOutcome::Kind::kSynced);
  CHECK(second->applies > 0);
  CHECK(rig.HubCount("get", "secrets") == 1);   // the kept client, no read

  // A full reapply reads it again (bounding how long rotated credentials go unnoticed).
  REQUIRE(rig.Sync(true).ok());
  CHECK(rig.HubCount("get", "secrets") == 2);
}

TEST_CASE("after a failed sync the next one reads the kubeconfig Secret again") {
  Rig rig;
  REQUIRE(rig.Sync().ok());
  CHECK(rig.HubCount("get", "secrets") == 1);
  rig.Faults(1.0);
  rig.EditSelectorSyncSet();
  auto failed = rig.Sync();
  REQUIRE(failed.ok());
  CHECK_FALSE(failed->failed_sets.empty());
  CHECK(rig.HubCount("get", "secrets") == 1);   // the failing sync itself used the kept client
  rig.Faults(0.0);
  auto healed = rig.Sync();
  REQUIRE(healed.ok());
  CHECK(healed->failed_sets.empty());
  CHECK(rig.HubCount("get", "secrets") == 2);
}
