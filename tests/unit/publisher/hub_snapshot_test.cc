#include "publisher/hub_snapshot.h"

#include <atomic>
#include <thread>

#include <doctest/doctest.h>

#include "common/bus/config.h"
#include "common/time_format.h"
#include "publisher/hub_cache.h"
#include "tests/fakes/common/fake_clock.h"

using namespace syncbus;
using namespace syncbus::publisher;
using namespace std::chrono_literals;

// Its own namespace: the unit tests of an area compile as one unity batch.
namespace hub_snapshot_test {

Json Cd(const std::string& name, Json labels = {{"fleet", "a"}}) {
  return {
      {"metadata", {{"name", name}, {"namespace", name}, {"uid", "u-" + name}, {"labels", labels}}},
      {"spec",
       {{"installed", true}, {"clusterMetadata", {{"adminKubeconfigSecretRef", {{"name", "k"}}}}}}},
      {"status", {{"conditions", Json::array({{{"type", "Unreachable"}, {"status", "False"}}})}}}};
}

Json Sss(const std::string& name, int gen, const std::string& secret = "") {
  Json sss = {{"metadata", {{"name", name}, {"generation", gen}}},
              {"spec", {{"clusterDeploymentSelector", {{"matchLabels", {{"fleet", "a"}}}}}}}};
  if (!secret.empty()) {
    sss["spec"]["secretMappings"] =
        Json::array({{{"sourceRef", {{"name", secret}, {"namespace", "src"}}},
                      {"targetRef", {{"name", secret}, {"namespace", "dst"}}}}});
  }
  return sss;
}

// SyncSet <name> in namespace <cluster> for that cluster, reading Secret <cluster>/<secret>.
Json Ss(const std::string& cluster, const std::string& name, int gen, const std::string& secret) {
  return {
      {"metadata", {{"name", name}, {"namespace", cluster}, {"generation", gen}}},
      {"spec",
       {{"clusterDeploymentRefs", Json::array({{{"name", cluster}}})},
        {"secretMappings",
         Json::array({{{"sourceRef", {{"name", secret}}}, {"targetRef", {{"name", secret}}}}})}}}};
}

Json Secret(const std::string& ns, const std::string& name, const std::string& rv,
            WallTime written) {
  return {{"metadata",
           {{"name", name},
            {"namespace", ns},
            {"resourceVersion", rv},
            {"creationTimestamp", FormatRfc3339(written)}}}};
}

// A cache past its first lists, empty.
struct Hub {
  HubCache cache{static_cast<size_t>(PublisherConfig{}.bulk_edit_clusters)};
  Hub() {
    for (HubKind k : {HubKind::kClusterDeployment, HubKind::kSyncSet, HubKind::kSelectorSyncSet,
                      HubKind::kClusterSync, HubKind::kClusterSyncLease, HubKind::kSecret}) {
      cache.Replace(k, {});
    }
  }
};

TEST_CASE("hub snapshot: a view has the applicable sets, the Secrets they read and the versions") {
  FakeClock clock;
  Hub hub;
  HubCache& cache = hub.cache;
  cache.Replace(HubKind::kClusterDeployment, {Cd("a"), Cd("b", {{"fleet", "b"}})});
  cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 3, "shared")});
  cache.Replace(HubKind::kSyncSet, {Ss("a", "own", 2, "mine")});
  cache.Replace(HubKind::kSecret, {Secret("src", "shared", "11", clock.WallNow() - 1h),
                                   Secret("a", "mine", "12", clock.WallNow()),
                                   Secret("a", "k", "13", clock.WallNow())});
  cache.Listed(HubKind::kSyncSet, "100");

  HubSnapshot snapshot = cache.Snapshot({"a/a", "b/b", "gone/gone"});
  REQUIRE(snapshot.clusters.size() == 3);
  ClusterView a = snapshot.View(snapshot.clusters[0]);
  REQUIRE(a.cd != nullptr);
  CHECK(a.desired.cluster_key == "a/a");
  REQUIRE(a.desired.sets.size() == 2);
  CHECK(a.desired.sets[0].name == "own");
  CHECK(a.desired.sets[1].name == "s");
  CHECK(a.secrets == hive::SecretVersions{{"a/mine", "12"}, {"src/shared", "11"}});
  CHECK(a.secrets_written_at == clock.WallNow());
  CHECK(a.kubeconfig_version == "13");
  CHECK(a.seen.sync_sets == "100");
  // b's labels match no set: no Secret is read, and none is missing.
  ClusterView b = snapshot.View(snapshot.clusters[1]);
  CHECK(b.desired.sets.empty());
  CHECK(b.secrets.empty());
  CHECK(b.kubeconfig_version.empty());
  ClusterView gone = snapshot.View(snapshot.clusters[2]);
  CHECK(gone.cd == nullptr);
  CHECK(gone.status == nullptr);
}

TEST_CASE("hub snapshot: a Secret a set reads that does not exist has an empty version") {
  Hub hub;
  HubCache& cache = hub.cache;
  cache.Replace(HubKind::kClusterDeployment, {Cd("a")});
  cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1, "missing")});
  HubSnapshot snapshot = cache.Snapshot({"a/a"});
  ClusterView a = snapshot.View(snapshot.clusters[0]);
  CHECK(a.secrets == hive::SecretVersions{{"src/missing", ""}});
  CHECK_FALSE(a.secrets_written_at.has_value());
}

TEST_CASE("hub snapshot: later writes to the cache do not change a snapshot taken before") {
  Hub hub;
  HubCache& cache = hub.cache;
  cache.Replace(HubKind::kClusterDeployment, {Cd("a")});
  cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  HubSnapshot before = cache.Snapshot({"a/a"});
  const std::string revision = before.View(before.clusters[0]).desired.revision;
  cache.Upsert(HubKind::kSelectorSyncSet, Sss("s", 2));
  cache.Replace(HubKind::kClusterDeployment, {});  // the cluster is gone
  ClusterView view = before.View(before.clusters[0]);
  REQUIRE(view.cd != nullptr);
  CHECK(view.desired.revision == revision);
  CHECK(view.desired.sets[0].generation == 1);
  HubSnapshot after = cache.Snapshot({"a/a"});
  CHECK(after.View(after.clusters[0]).cd == nullptr);
}

TEST_CASE(
    "hub snapshot: views are computed while the watch threads write the cache "
    "[concurrent]") {
  Hub hub;
  HubCache& cache = hub.cache;
  std::vector<Json> cds;
  std::vector<std::string> keys;
  for (int i = 0; i < 50; ++i) {
    cds.push_back(Cd("c" + std::to_string(i)));
    keys.push_back("c" + std::to_string(i) + "/c" + std::to_string(i));
  }
  cache.Replace(HubKind::kClusterDeployment, cds);
  cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  std::atomic<bool> done{false};
  std::thread watch([&] {
    for (int gen = 2; gen <= 200; ++gen) {
      cache.Upsert(HubKind::kSelectorSyncSet, Sss("s", gen));
      cache.Upsert(HubKind::kClusterDeployment, Cd("c" + std::to_string(gen % 50)));
    }
    done = true;
  });
  int64_t last = 0;
  size_t rounds = 0;
  while (!done.load() || rounds == 0) {
    HubSnapshot snapshot = cache.Snapshot(keys);
    int64_t generation = -1;
    for (const auto& cluster : snapshot.clusters) {
      ClusterView view = snapshot.View(cluster);
      REQUIRE(view.desired.sets.size() == 1);
      // One snapshot, one state of the hub: every cluster sees the same generation.
      if (generation < 0) generation = view.desired.sets[0].generation;
      CHECK(view.desired.sets[0].generation == generation);
    }
    CHECK(generation >= last);
    last = generation;
    ++rounds;
  }
  watch.join();
  HubSnapshot final_state = cache.Snapshot({keys[0]});
  CHECK(final_state.View(final_state.clusters[0]).desired.sets[0].generation == 200);
}

}  // namespace hub_snapshot_test
