// Test fixture for the consumer's apply engine: a simulated hub and one target cluster
// (cluster-0000) behind the in-process transport, a ClusterSyncer on a FakeClock, and helpers to
// write SyncSets on the hub and read objects on the target.
#pragma once

#include <memory>
#include <string>

#include <doctest/doctest.h>
#include <prometheus/registry.h>

#include "common/json.h"
#include "common/kube/client_impl.h"
#include "consumer/cluster_syncer.h"
#include "consumer/target_clients.h"
#include "tests/fakes/common/fake_clock.h"
#include "tests/fakes/common/http/in_process_transport.h"
#include "tests/kubesim/sim_simulation.h"

namespace syncbus::consumer::testing {

inline constexpr char kCluster[] = "cluster-0000";  // also its hub namespace

struct ApplyFixture {
  explicit ApplyFixture(SyncerOptions options = Defaults()) {
    kubesim::Simulation::Options sim_options;
    sim_options.fleet.clusters = 1;
    auto created = kubesim::Simulation::Create(sim_options);
    REQUIRE_MESSAGE(created.ok(), created.status().ToString());
    sim = std::move(*created);
    auto fleet = sim->GenerateFleet("http://sim.invalid");
    REQUIRE_MESSAGE(fleet.ok(), fleet.status().ToString());
    transport = std::make_shared<fakes::InProcessTransport>(*sim);
    kube::ClusterConfig cc;
    cc.server = "http://sim.invalid";
    hub = std::make_unique<kube::ClientImpl>(cc, transport);
    targets = std::make_unique<TargetClients>(transport, 0);
    reader = std::make_unique<DirectHubReader>(*hub);
    syncer = std::make_unique<ClusterSyncer>(options, *hub, *reader, *targets, clock, registry);
  }
  // A sync can return while the transport's worker still runs the end of its last completion,
  // whose callback holds the target's client. One request through the same worker first: once
  // it is answered, that callback is gone, so the client, and with it the transport, is never
  // released on the worker's own thread (which cannot join itself).
  ~ApplyFixture() {
    if (hub) (void)hub->GetPath("/version");
  }
  static SyncerOptions Defaults() {
    SyncerOptions o;
    o.per_cluster_qps = 0;
    return o;
  }

  kubesim::ApiServer& target() { return *sim->cluster(kCluster); }
  // Target latency of a few milliseconds, so that requests of one sync overlap.
  void SlowTarget() {
    kubesim::FaultSpec slow;
    slow.latency_p50_ms = 2;
    slow.latency_p99_ms = 6;
    REQUIRE(sim->faults().Set(kCluster, slow).ok());
  }

  // Creates or replaces a SyncSet for the cluster (a replace bumps its generation).
  void PutSyncSet(const std::string& name, Json spec) {
    spec["clusterDeploymentRefs"] = Json::array({{{"name", kCluster}}});
    Json obj = {{"apiVersion", "hive.openshift.io/v1"},
                {"kind", "SyncSet"},
                {"metadata", {{"name", name}, {"namespace", kCluster}}},
                {"spec", spec}};
    std::string path =
        std::string("/apis/hive.openshift.io/v1/namespaces/") + kCluster + "/syncsets";
    auto existing = sim->hub().Call("GET", path + "/" + name);
    if (existing.status == 200) {
      obj["metadata"]["resourceVersion"] =
          Json::parse(existing.body)["metadata"]["resourceVersion"];
      auto r = sim->hub().Call("PUT", path + "/" + name, obj);
      REQUIRE_MESSAGE(r.status == 200, r.body);
    } else {
      auto r = sim->hub().Call("POST", path, obj);
      REQUIRE_MESSAGE(r.status == 201, r.body);
    }
  }
  void DeleteSyncSet(const std::string& name) {
    auto r = sim->hub().Call("DELETE", std::string("/apis/hive.openshift.io/v1/namespaces/") +
                                           kCluster + "/syncsets/" + name);
    REQUIRE_MESSAGE(r.status == 200, r.body);
  }
  void PutHub(const std::string& collection_path, const Json& obj) {
    auto r = sim->hub().Call("POST", collection_path, obj);
    REQUIRE_MESSAGE(r.status == 201, r.body);
  }
  void PutTarget(const std::string& collection_path, const Json& obj) {
    auto r = target().Call("POST", collection_path, obj);
    REQUIRE_MESSAGE(r.status == 201, r.body);
  }

  // A target object, or null when absent.
  Json TargetGet(const std::string& path) {
    auto r = target().Call("GET", path);
    if (r.status == 404) return nullptr;
    REQUIRE_MESSAGE(r.status == 200, r.body);
    return Json::parse(r.body);
  }
  Json ConfigMapOnTarget(const std::string& name, const std::string& ns = "default") {
    return TargetGet("/api/v1/namespaces/" + ns + "/configmaps/" + name);
  }
  Json ClusterSync() {
    auto r =
        sim->hub().Call("GET", std::string("/apis/hiveinternal.openshift.io/v1alpha1/namespaces/") +
                                   kCluster + "/clustersyncs/" + kCluster);
    if (r.status == 404) return nullptr;
    REQUIRE_MESSAGE(r.status == 200, r.body);
    return Json::parse(r.body);
  }
  Json Entry(const std::string& set_name) {
    Json cs = ClusterSync();
    if (cs.is_null()) return nullptr;
    for (const auto& e : cs["status"].value("syncSets", Json::array())) {
      if (e["name"] == set_name) return e;
    }
    return nullptr;
  }

  // One sync of the cluster, as a request would start it.
  Result<SyncOutcome> TrySync(bool full_reapply = false) {
    SyncRequest req;
    req.cluster_namespace = kCluster;
    req.cluster_name = kCluster;
    req.full_reapply = full_reapply;
    return syncer->Sync(req);
  }
  SyncOutcome Sync(bool full_reapply = false) {
    auto out = TrySync(full_reapply);
    REQUIRE_MESSAGE(out.ok(), out.status().ToString());
    return *out;
  }

  FakeClock clock;
  prometheus::Registry registry;
  std::unique_ptr<kubesim::Simulation> sim;
  std::shared_ptr<fakes::InProcessTransport> transport;
  std::unique_ptr<kube::ClientImpl> hub;
  std::unique_ptr<TargetClients> targets;
  std::unique_ptr<DirectHubReader> reader;
  std::unique_ptr<ClusterSyncer> syncer;
};

// A ConfigMap in `ns` ("": none, which Hive's kubectl refuses for a namespaced kind).
inline Json ConfigMap(const std::string& name, Json data, const std::string& ns = "default") {
  Json cm = {
      {"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", name}}}, {"data", data}};
  if (!ns.empty()) cm["metadata"]["namespace"] = ns;
  return cm;
}

}  // namespace syncbus::consumer::testing
