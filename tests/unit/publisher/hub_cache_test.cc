#include "publisher/hub_cache.h"

#include <doctest/doctest.h>

#include "common/bus/config.h"
#include "common/time_format.h"

using namespace syncbus;
using namespace syncbus::publisher;
using namespace std::chrono_literals;

// Its own namespace: the unit tests of an area compile as one unity batch.
namespace hub_cache_test {

Json Cd(const std::string& name) {
  return {{"metadata", {{"name", name}, {"namespace", name}, {"labels", {{"fleet", "a"}}}}},
          {"spec", {{"installed", true}}}};
}

// A ClusterSync of cluster <name> reporting SyncSet "a" at `generation`; a ClusterSyncLease.
Json Cs(const std::string& name, int generation = 1) {
  return {{"metadata", {{"name", name}, {"namespace", name}}},
          {"status",
           {{"syncSets", Json::array({{{"name", "a"}, {"observedGeneration", generation}}})}}}};
}
Json Lease(const std::string& name) {
  return {{"metadata", {{"name", name}, {"namespace", name}}},
          {"spec", {{"renewTime", "2026-01-01T00:00:00.000000Z"}}}};
}

// Which of cluster <name>'s objects a snapshot has: "d" ClusterDeployment, "s" status, "l" lease.
std::string Held(const HubCache& cache, const std::string& name) {
  HubSnapshot snapshot = cache.Snapshot({name + "/" + name});
  const ClusterInputs& c = snapshot.clusters.at(0);
  return std::string(c.cd ? "d" : "") + (c.status ? "s" : "") + (c.lease_renewal ? "l" : "");
}

HubCache MakeCache() {
  return HubCache(static_cast<size_t>(PublisherConfig{}.bulk_edit_clusters));
}

TEST_CASE("hub cache: a list's pages are parsed as they arrive, and replace the kind at its end") {
  HubCache cache = MakeCache();
  cache.Replace(HubKind::kClusterDeployment, {Cd("old")});
  CHECK(cache.TakeDirty(0ms) == std::vector<std::string>{"old/old"});

  HubCache::Listing listing(HubKind::kClusterDeployment);
  std::vector<Json> page1 = {Cd("a"), Cd("b")};
  listing.AddPage(page1);
  CHECK(page1.empty());  // taken: the page's JSON is not kept
  std::vector<Json> page2 = {Cd("c")};
  listing.AddPage(page2);
  CHECK(page2.empty());
  // Until the list completes, the cache holds what it had.
  CHECK(cache.AllClusterKeys() == std::vector<std::string>{"old/old"});
  CHECK(cache.TakeDirty(0ms).empty());

  cache.Replace(std::move(listing));
  CHECK(cache.AllClusterKeys() == std::vector<std::string>{"a/a", "b/b", "c/c"});
  // A relist makes every cluster dirty; one gone from the list is gone.
  CHECK(cache.TakeDirty(0ms) == std::vector<std::string>{"a/a", "b/b", "c/c"});
}

TEST_CASE("hub cache: an invalid object of a page is left out and counted") {
  HubCache cache = MakeCache();
  HubCache::Listing listing(HubKind::kClusterDeployment);
  Json bad = Cd("bad");
  bad["metadata"]["labels"] = "not a map";
  std::vector<Json> page = {Cd("a"), bad};
  listing.AddPage(page);
  cache.Replace(std::move(listing));
  CHECK(cache.AllClusterKeys() == std::vector<std::string>{"a/a"});
  CHECK(cache.invalid_objects() == 1);
}

TEST_CASE("hub cache: a cluster's objects are listed, replaced and deleted kind by kind") {
  HubCache cache = MakeCache();
  cache.Replace(HubKind::kClusterDeployment, {Cd("a"), Cd("b")});
  cache.Replace(HubKind::kClusterSync, {Cs("a"), Cs("c")});
  cache.Replace(HubKind::kClusterSyncLease, {Lease("a")});
  // A ClusterSync without its ClusterDeployment is no cluster, but is kept.
  CHECK(cache.AllClusterKeys() == std::vector<std::string>{"a/a", "b/b"});
  CHECK(cache.cluster_count() == 2);
  CHECK(Held(cache, "a") == "dsl");
  CHECK(Held(cache, "b") == "d");
  CHECK(Held(cache, "c") == "s");

  // A relist of one kind replaces that kind only.
  cache.Replace(HubKind::kClusterSync, {Cs("b", 2)});
  CHECK(Held(cache, "a") == "dl");
  CHECK(Held(cache, "b") == "ds");
  CHECK(cache.Snapshot({"b/b"}).clusters.at(0).status->sets()[0].observed_generation == 2);
  CHECK(Held(cache, "c").empty());
  cache.Upsert(HubKind::kClusterSync, Cs("a", 3));
  CHECK(Held(cache, "a") == "dsl");

  cache.Delete(HubKind::kClusterSyncLease, Lease("a"));
  CHECK(Held(cache, "a") == "ds");
  cache.Delete(HubKind::kClusterDeployment, Cd("a"));
  CHECK(Held(cache, "a") == "s");
  CHECK(cache.AllClusterKeys() == std::vector<std::string>{"b/b"});
  cache.Replace(HubKind::kClusterDeployment, {});
  CHECK(cache.AllClusterKeys().empty());
  CHECK(Held(cache, "b") == "s");
  // Status and lease events mark their cluster; a relist marks the clusters that exist.
  CHECK(cache.TakeDirty(0ms) == std::vector<std::string>{"a/a", "b/b"});
}

TEST_CASE(
    "hub cache: of a ClusterDeployment's conditions only Unreachable's type and status stay") {
  HubCache cache = MakeCache();
  const std::string text(200, 'x');  // past any small-string buffer
  Json cd = Cd("a");
  cd["status"]["conditions"] =
      Json::array({{{"type", "ProvisionFailed"}, {"status", "False"}, {"message", text}},
                   {{"type", "Unreachable"},
                    {"status", "False"},
                    {"reason", text},
                    {"message", text},
                    {"lastTransitionTime", text},
                    {"lastProbeTime", text}}});
  cache.Replace(HubKind::kClusterDeployment, {cd});
  const auto kept = cache.Snapshot({"a/a"}).clusters.at(0).cd;
  REQUIRE(kept != nullptr);
  REQUIRE(kept->conditions.size() == 1);
  const hive::Condition& unreachable = kept->conditions[0];
  CHECK(unreachable.type == "Unreachable");
  CHECK(unreachable.status == "False");
  CHECK_FALSE(kept->unreachable());
  // What was dropped is freed, not only emptied: no string keeps the text's heap block.
  const size_t small = std::string().capacity();
  for (const std::string* s : {&unreachable.reason, &unreachable.message,
                               &unreachable.last_transition_time, &unreachable.last_probe_time}) {
    CHECK(s->empty());
    CHECK(s->capacity() == small);
  }
  CHECK(kept->conditions.capacity() == 1);
}

TEST_CASE(
    "hub cache: a cluster's report and renew time are held in its entry, shared by snapshots") {
  HubCache cache = MakeCache();
  cache.Replace(HubKind::kClusterDeployment, {Cd("a"), Cd("b")});
  cache.Replace(HubKind::kClusterSync, {Cs("a", 4)});
  Json bad_time = Lease("b");
  bad_time["spec"]["renewTime"] = "yesterday";
  cache.Replace(HubKind::kClusterSyncLease, {Lease("a"), bad_time});
  const HubSnapshot first = cache.Snapshot({"a/a", "b/b"});
  const HubSnapshot second = cache.Snapshot({"a/a"});
  const ClusterInputs& a = first.clusters.at(0);
  REQUIRE(a.status.has_value());
  REQUIRE(second.clusters.at(0).status.has_value());
  // Snapshots copy a pointer to the entries, never the entries.
  CHECK(a.status->sets().data() == second.clusters.at(0).status->sets().data());
  REQUIRE(a.lease_renewal.has_value());
  CHECK(FormatRfc3339Micro(*a.lease_renewal) == "2026-01-01T00:00:00.000000Z");
  // A renewTime that is no time is no renew time, as before.
  CHECK(Held(cache, "b") == "d");

  // The cache replaces the report; a snapshot taken before keeps what it saw.
  cache.Upsert(HubKind::kClusterSync, Cs("a", 5));
  CHECK(a.status->sets()[0].observed_generation == 4);
  CHECK(cache.Snapshot({"a/a"}).clusters.at(0).status->sets()[0].observed_generation == 5);
  cache.Delete(HubKind::kClusterSync, Cs("a"));
  CHECK(Held(cache, "a") == "dl");
  CHECK(a.status->Find(hive::SetKind::kSyncSet, "a") != nullptr);
}

}  // namespace hub_cache_test
