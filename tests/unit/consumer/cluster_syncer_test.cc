// ClusterSyncer against the simulator in process: what one sync costs the hub, by verb and
// resource (reading its state from the hub, or from a mirror fed by real reflectors), and when the
// admin kubeconfig Secret is read.
#include "consumer/cluster_syncer.h"

#include <map>

#include <doctest/doctest.h>
#include <prometheus/registry.h>

#include "common/kube/client_impl.h"
#include "common/kube/reflector.h"
#include "consumer/hub_mirror.h"
#include "tests/fakes/common/http/in_process_transport.h"
#include "tests/support/wait.h"
#include "tests/unit/kubesim/api_test_util.h"

using namespace syncbus;
using namespace syncbus::consumer;

namespace doctest {
template <>
struct StringMaker<std::map<std::string, uint64_t>> {
  static String convert(const std::map<std::string, uint64_t>& m) {
    std::string out = "{";
    for (const auto& [k, n] : m) out += " " + k + ": " + std::to_string(n) + ",";
    return (out + " }").c_str();
  }
};
}  // namespace doctest

namespace {

struct Rig {
  std::unique_ptr<kubesim::Simulation> sim;
  std::shared_ptr<fakes::InProcessTransport> transport;
  std::unique_ptr<kube::ClientImpl> hub;
  prometheus::Registry registry;
  std::unique_ptr<TargetClients> targets;
  std::unique_ptr<DirectHubReader> direct;
  HubMirror mirror;
  std::vector<std::unique_ptr<kube::Reflector>> reflectors;
  std::unique_ptr<MirrorHubReader> mirrored;
  std::unique_ptr<ClusterSyncer> syncer;
  HubVersions seen;  // what a publisher would have seen: the last write this rig made

  explicit Rig(bool with_mirror = false,
               std::chrono::milliseconds max_wait = std::chrono::seconds(30)) {
    sim = kubesim::testing::MakeSimulation(
        {.clusters = 2, .syncsets = 1, .selector_syncsets = 1, .resources = 2});
    auto generated = sim->GenerateFleet("http://kubesim.test");
    REQUIRE_MESSAGE(generated.ok(), generated.status().ToString());
    transport = std::make_shared<fakes::InProcessTransport>(*sim);
    kube::ClusterConfig config;
    config.server = "http://kubesim.test";
    hub = std::make_unique<kube::ClientImpl>(config, transport);
    targets = std::make_unique<TargetClients>(transport, 0);
    direct = std::make_unique<DirectHubReader>(*hub);
    HubReader* reader = direct.get();
    if (with_mirror) {
      namespace res = kube::resources;
      const std::pair<HubCollection, kube::ObjectRef> watched[] = {
          {HubCollection::kClusterDeployments, kube::Collection(res::kClusterDeployments)},
          {HubCollection::kSyncSets, kube::Collection(res::kSyncSets)},
          {HubCollection::kSelectorSyncSets, kube::Collection(res::kSelectorSyncSets)},
          {HubCollection::kClusterSyncs, kube::Collection(res::kClusterSyncs)},
          {HubCollection::kClusterSyncLeases, kube::Collection(res::kClusterSyncLeases)},
      };
      for (const auto& [collection, ref] : watched) {
        reflectors.push_back(std::make_unique<kube::Reflector>(
            *hub, ref, mirror.handler(collection), kube::Reflector::Options{}));
        reflectors.back()->Start();
      }
      mirrored = std::make_unique<MirrorHubReader>(mirror, *direct, max_wait, registry);
      reader = mirrored.get();
      // Every collection listed, as a consumer waits for before it consumes: a list still to come
      // would be counted among the requests of a sync (the Leases', which no sync waits for).
      REQUIRE(
          syncbus::testing::WaitFor([this] { return mirror.synced(); }, std::chrono::seconds(10)));
      // Sees the fleet as generated: a publisher's view, which lists from the watch cache.
      auto version = [&](const kube::ObjectRef& collection) {
        kube::ListOptions cached;
        cached.resource_version = "0";
        auto list = hub->List(collection, cached);
        REQUIRE(list.ok());
        return list->resource_version;
      };
      seen = {version(kube::Collection(res::kClusterDeployments)),
              version(kube::Collection(res::kSyncSets)),
              version(kube::Collection(res::kSelectorSyncSets))};
    }
    syncer = std::make_unique<ClusterSyncer>(SyncerOptions{}, *hub, *reader, *targets, RealClock(),
                                             registry);
  }
  ~Rig() {
    for (auto& r : reflectors) r->Stop();
  }
  Result<SyncOutcome> Sync(bool full_reapply = false, const std::string& kubeconfig_version = "",
                           const SyncFence& fence = {}) {
    SyncRequest r;
    r.cluster_namespace = "cluster-0001";
    r.cluster_name = "cluster-0001";
    r.full_reapply = full_reapply;
    r.seen = seen;
    r.kubeconfig_version = kubeconfig_version;
    return syncer->Sync(r, fence);
  }
  // The resourceVersion of the cluster's admin kubeconfig Secret, as the publisher would see it.
  std::string KubeconfigVersion() {
    auto cd = hub->Get(
        kube::Object(kube::resources::kClusterDeployments, "cluster-0001", "cluster-0001"));
    REQUIRE(cd.ok());
    const std::string name = (*cd)["spec"]["clusterMetadata"]["adminKubeconfigSecretRef"]["name"];
    auto secret = hub->Get(kube::Object(kube::resources::kSecrets, "cluster-0001", name));
    REQUIRE(secret.ok());
    return (*secret)["metadata"]["resourceVersion"];
  }
  // Every hub request so far, as "verb resource" -> count.
  std::map<std::string, uint64_t> HubRequests() {
    std::map<std::string, uint64_t> out;
    const Json stats = sim->Stats();
    for (const auto& [verb, by_resource] : stats["hubRequests"].items()) {
      for (const auto& [resource, n] : by_resource.items())
        out[verb + " " + resource] = n.get<uint64_t>();
    }
    return out;
  }
  // The requests made since `before`, without the reflectors' list and watch.
  std::map<std::string, uint64_t> SyncRequests(const std::map<std::string, uint64_t>& before) {
    std::map<std::string, uint64_t> out;
    for (const auto& [key, n] : HubRequests()) {
      uint64_t was = before.count(key) ? before.at(key) : 0;
      if (n > was && key.rfind("watch ", 0) != 0) out[key] = n - was;
    }
    return out;
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
    auto updated =
        hub->Update(kube::Object(kube::resources::kSelectorSyncSets, "", "fleet-sss-00"), *sss);
    REQUIRE(updated.ok());
    seen.selector_sync_sets = (*updated)["metadata"].value("resourceVersion", "");
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
  const uint64_t target_before = rig.sim->cluster("cluster-0001")->stats().requests;
  auto second =
      rig.Sync(false, "", [] { return Status::Ok(); });  // under a claim, as consumers run
  REQUIRE(second.ok());
  CHECK(second->kind == SyncOutcome::Kind::kSynced);
  CHECK(second->applies > 0);
  CHECK(rig.HubCount("get", "secrets") == 1);  // the kept client, no read
  // Nor is the cluster asked whether it answers (its last sync said so): its applies only.
  CHECK(rig.sim->cluster("cluster-0001")->stats().requests - target_before ==
        static_cast<uint64_t>(second->applies));

  // A full reapply that knows the Secret's version keeps the client built from it; one that
  // knows none (the publisher watches no Secrets) reads it again, bounding how long rotated
  // credentials go unnoticed.
  const std::string version = rig.KubeconfigVersion();  // the test's own read
  const uint64_t before = rig.HubCount("get", "secrets");
  REQUIRE(rig.Sync(true, version).ok());
  CHECK(rig.HubCount("get", "secrets") == before);
  REQUIRE(rig.Sync(true).ok());
  CHECK(rig.HubCount("get", "secrets") == before + 1);
}

TEST_CASE("a request that knows a newer kubeconfig Secret than the kept client's reads it again") {
  Rig rig;
  // The Secret reads each sync makes (the test's own reads come before or after).
  auto secret_reads = [&](const std::string& version) {
    const uint64_t before = rig.HubCount("get", "secrets");
    rig.EditSelectorSyncSet();
    auto out = rig.Sync(false, version);
    REQUIRE_MESSAGE(out.ok(), out.status().ToString());
    CHECK(out->failed_sets.empty());
    return rig.HubCount("get", "secrets") - before;
  };
  const std::string version = rig.KubeconfigVersion();
  CHECK(secret_reads(version) == 1);
  CHECK(secret_reads(version) == 0);  // the version the client was built from: kept
  CHECK(secret_reads("") == 0);       // no version known (Secrets not watched): kept
  // The Secret is written again (a rotation whose old credentials still work); the next request
  // carries its new version, and that sync reads it.
  const std::string secret_name = "cluster-0001-admin-kubeconfig";
  auto secret = rig.hub->Get(kube::Object(kube::resources::kSecrets, "cluster-0001", secret_name));
  REQUIRE(secret.ok());
  (*secret)["metadata"]["annotations"]["rotated"] = "yes";
  REQUIRE(
      rig.hub->Update(kube::Object(kube::resources::kSecrets, "cluster-0001", secret_name), *secret)
          .ok());
  const std::string rotated = rig.KubeconfigVersion();
  REQUIRE(rotated != version);
  CHECK(secret_reads(version) == 0);  // a request decided before the rotation
  CHECK(secret_reads(rotated) == 1);
  CHECK(secret_reads(rotated) == 0);
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
  CHECK(rig.HubCount("get", "secrets") == 1);  // the failing sync itself used the kept client
  rig.Faults(0.0);
  auto healed = rig.Sync();
  REQUIRE(healed.ok());
  CHECK(healed->failed_sets.empty());
  CHECK(rig.HubCount("get", "secrets") == 2);
}

TEST_CASE(
    "with the mirror, a steady-state sync costs the hub one request: its status write "
    "[concurrent]") {
  Rig rig(/*with_mirror=*/true);
  auto first = rig.Sync();
  REQUIRE_MESSAGE(first.ok(), first.status().ToString());
  CHECK(first->kind == SyncOutcome::Kind::kSynced);

  rig.EditSelectorSyncSet();
  auto before = rig.HubRequests();
  auto second = rig.Sync();
  REQUIRE_MESSAGE(second.ok(), second.status().ToString());
  CHECK(second->kind == SyncOutcome::Kind::kSynced);
  CHECK(second->applies > 0);
  std::map<std::string, uint64_t> expected = {{"update clustersyncs/status", 1}};
  CHECK(rig.SyncRequests(before) == expected);

  // The request the publisher would send again once the status shows the edit: no hub request.
  before = rig.HubRequests();
  auto again = rig.Sync();
  REQUIRE(again.ok());
  CHECK(again->kind == SyncOutcome::Kind::kUpToDate);
  CHECK(rig.SyncRequests(before).empty());
}

TEST_CASE("reading from the hub, the same sync costs four reads more") {
  Rig rig;
  REQUIRE(rig.Sync().ok());
  rig.EditSelectorSyncSet();
  auto before = rig.HubRequests();
  auto second = rig.Sync();
  REQUIRE(second.ok());
  std::map<std::string, uint64_t> expected = {{"get clusterdeployments", 1},
                                              {"list syncsets", 1},
                                              {"list selectorsyncsets", 1},
                                              {"get clustersyncs", 1},
                                              {"update clustersyncs/status", 1}};
  CHECK(rig.SyncRequests(before) == expected);
}

TEST_CASE("a status written by someone else since the mirror saw it: a 409, one re-read, merged") {
  Rig rig(/*with_mirror=*/true);
  REQUIRE(rig.Sync().ok());
  // Another writer (the mirror may or may not have seen it yet when the sync runs).
  auto cs =
      rig.hub->Get(kube::Object(kube::resources::kClusterSyncs, "cluster-0001", "cluster-0001"));
  REQUIRE(cs.ok());
  (*cs)["status"]["syncSets"][0]["lastTransitionTime"] = "2020-01-01T00:00:00Z";
  auto written = rig.hub->Update(
      kube::StatusOf(kube::resources::kClusterSyncs, "cluster-0001", "cluster-0001"), *cs);
  REQUIRE(written.ok());
  rig.EditSelectorSyncSet();
  auto synced = rig.Sync();
  REQUIRE_MESSAGE(synced.ok(), synced.status().ToString());
  CHECK(synced->kind == SyncOutcome::Kind::kSynced);
  auto after =
      rig.hub->Get(kube::Object(kube::resources::kClusterSyncs, "cluster-0001", "cluster-0001"));
  REQUIRE(after.ok());
  auto parsed = hive::ClusterSync::FromJson(*after);
  REQUIRE(parsed.ok());
  REQUIRE(parsed->status.selector_sync_sets.size() == 1);
  CHECK(parsed->status.selector_sync_sets[0].observed_generation == 2);
  REQUIRE(parsed->status.sync_sets.size() ==
          1);  // the other writer's entry, kept through the merge
  CHECK(parsed->status.sync_sets[0].last_transition_time == "2020-01-01T00:00:00Z");
}

TEST_CASE(
    "a publisher ahead of the consumer mirror: the sync applies what the publisher saw "
    "[concurrent]") {
  Rig rig(/*with_mirror=*/true, std::chrono::milliseconds(200));
  REQUIRE(rig.Sync().ok());
  // The mirror's SelectorSyncSet watch stalls; the publisher sees an edit the mirror never gets.
  rig.reflectors[2]->Stop();
  rig.EditSelectorSyncSet();
  auto before = rig.HubRequests();
  auto synced = rig.Sync();
  REQUIRE_MESSAGE(synced.ok(), synced.status().ToString());
  CHECK(synced->kind == SyncOutcome::Kind::kSynced);
  REQUIRE(synced->sets.size() == 1);
  CHECK(synced->sets[0].name == "fleet-sss-00");
  CHECK(synced->sets[0].generation == 2);  // the edit, not the mirror's older generation
  // Read from the hub after the bounded wait, and said so.
  auto requests = rig.SyncRequests(before);
  CHECK(requests["list selectorsyncsets"] == 1);
  CHECK(requests["get clusterdeployments"] == 1);
  bool counted = false;
  for (const auto& family : rig.registry.Collect()) {
    if (family.name != "syncbus_consumer_hub_state_reads_total") continue;
    for (const auto& m : family.metric) {
      for (const auto& l : m.label)
        counted = counted || (l.value == "behind" && m.counter.value == 1);
    }
  }
  CHECK(counted);
}

TEST_CASE(
    "a sync overtaken between its read and its claim reads the hub again and applies the newer "
    "state [concurrent]") {
  Rig rig(/*with_mirror=*/true);
  REQUIRE(rig.Sync(/*full_reapply=*/true).ok());
  auto sss = rig.hub->Get(kube::Object(kube::resources::kSelectorSyncSets, "", "fleet-sss-00"));
  REQUIRE(sss.ok());
  const Json first = (*sss)["spec"]["resources"][0];
  const std::string target_path = "/clusters/cluster-0001/api/v1/namespaces/" +
                                  first["metadata"].value("namespace", "default") + "/configmaps/" +
                                  first["metadata"]["name"].get<std::string>();
  // A second consumer, reading the hub directly.
  ClusterSyncer other(SyncerOptions{}, *rig.hub, *rig.direct, *rig.targets, RealClock(),
                      rig.registry);
  SyncRequest request;
  request.cluster_namespace = request.cluster_name = "cluster-0001";
  request.full_reapply = true;  // a queued resync: it has work even with nothing changed
  request.seen = rig.seen;
  // Between this sync's read and its claim, the set is edited and the other consumer applies the
  // edit (a change that overtook the resync) and stores its status.
  auto overtake = [&]() -> Status {
    rig.EditSelectorSyncSet();
    SyncRequest change = request;
    change.full_reapply = false;
    auto synced = other.Sync(change);
    REQUIRE_MESSAGE(synced.ok(), synced.status().ToString());
    REQUIRE(synced->kind == SyncOutcome::Kind::kSynced);
    const std::string written = synced->status_version;
    REQUIRE(syncbus::testing::WaitFor(
        [&] { return rig.mirror.StatusVersion("cluster-0001", "cluster-0001") == written; },
        std::chrono::seconds(10)));
    return Status::Ok();
  };
  bool claimed = false;
  auto outcome = rig.syncer->Sync(request, [&]() -> Status {
    if (claimed) return Status::Ok();
    claimed = true;
    return overtake();
  });
  REQUIRE_MESSAGE(outcome.ok(), outcome.status().ToString());
  CHECK(outcome->kind == SyncOutcome::Kind::kSynced);
  auto cm = rig.hub->GetPath(target_path);
  REQUIRE(cm.ok());
  CHECK((*cm)["data"].value("edited", "") == "1");  // the resync did not put the old content back
  double overtaken = 0;
  for (const auto& fam : rig.registry.Collect()) {
    if (fam.name != "syncbus_consumer_hub_state_reads_total") continue;
    for (const auto& m : fam.metric) {
      for (const auto& l : m.label) {
        if (l.name == "result" && l.value == "overtaken") overtaken += m.counter.value;
      }
    }
  }
  CHECK(overtaken == 1);
}
