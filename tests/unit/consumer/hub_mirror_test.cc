// HubMirror and the freshness rule of MirrorHubReader, with the mirror fed by hand as its
// reflectors would feed it, and a counting stand-in for the direct hub read.
#include "consumer/hub_mirror.h"

#include <future>
#include <thread>

#include <doctest/doctest.h>
#include <prometheus/registry.h>

#include "consumer/hub_reader.h"

using namespace syncbus;
using namespace syncbus::consumer;

namespace {

Json Meta(const std::string& ns, const std::string& name, const std::string& version,
          int64_t generation = 1) {
  Json m = {{"name", name}, {"resourceVersion", version}, {"generation", generation}};
  if (!ns.empty()) m["namespace"] = ns;
  return m;
}

Json Cd(const std::string& name, const std::string& version) {
  return {{"metadata", Meta(name, name, version)},
          {"spec",
           {{"installed", true},
            {"clusterMetadata", {{"adminKubeconfigSecretRef", {{"name", "kc"}}}}}}}};
}

Json SyncSet(const std::string& ns, const std::string& name, const std::string& cluster,
             const std::string& version, int64_t generation = 1) {
  return {{"metadata", Meta(ns, name, version, generation)},
          {"spec",
           {{"clusterDeploymentRefs", Json::array({{{"name", cluster}}})},
            {"resources", Json::array()}}}};
}

Json SelectorSyncSet(const std::string& name, const std::string& version) {
  return {{"metadata", Meta("", name, version)},
          {"spec", {{"clusterDeploymentSelector", Json::object()}, {"resources", Json::array()}}}};
}

Json ClusterSyncObject(const std::string& name, const std::string& version) {
  return {{"metadata", Meta(name, name, version)}, {"status", Json::object()}};
}

// Lists every collection of `mirror` at `version` with one cluster "c1", its SyncSet "a" and one
// SelectorSyncSet.
void ListAll(HubMirror& mirror, const std::string& version) {
  auto list = [&](HubCollection c, std::vector<Json> items) {
    mirror.handler(c).OnReplace(std::move(items));
    mirror.handler(c).OnSynced();
    mirror.handler(c).OnCheckpoint(version, false);
  };
  list(HubCollection::kClusterDeployments, {Cd("c1", "5")});
  list(HubCollection::kSyncSets, {SyncSet("c1", "a", "c1", "6")});
  list(HubCollection::kSelectorSyncSets, {SelectorSyncSet("fleet", "7")});
  list(HubCollection::kClusterSyncs, {});
  list(HubCollection::kClusterSyncLeases, {});
}

// Stands in for the hub: counts direct reads and answers with an empty state.
class CountingReader final : public HubReader {
 public:
  Result<ClusterState> Read(const SyncRequest&) override {
    ++reads;
    return ClusterState{};
  }
  int reads = 0;
};

SyncRequest MirrorRequest(HubVersions seen) {
  SyncRequest r;
  r.cluster_namespace = "c1";
  r.cluster_name = "c1";
  r.seen = std::move(seen);
  return r;
}

struct ReaderRig {
  HubMirror mirror;
  CountingReader hub;
  prometheus::Registry registry;
  MirrorHubReader reader;
  explicit ReaderRig(std::chrono::milliseconds max_wait)
      : reader(mirror, hub, max_wait, registry) {}
  double Reads(const std::string& result) {
    for (const auto& family : registry.Collect()) {
      if (family.name != "syncbus_consumer_hub_state_reads_total") continue;
      for (const auto& m : family.metric) {
        for (const auto& l : m.label) {
          if (l.name == "result" && l.value == result) return m.counter.value;
        }
      }
    }
    return -1;
  }
};

}  // namespace

TEST_CASE("the mirror serves a cluster's applicable sets and its status") {
  HubMirror mirror;
  CHECK_FALSE(mirror.synced());
  ListAll(mirror, "10");
  CHECK(mirror.synced());
  mirror.handler(HubCollection::kSyncSets).OnUpsert(SyncSet("c1", "other-cluster", "c2", "11"));
  mirror.handler(HubCollection::kClusterSyncs).OnUpsert(ClusterSyncObject("c1", "12"));
  ClusterState state = mirror.Read("c1", "c1");
  REQUIRE(state.cd);
  CHECK(state.cd->meta.name == "c1");
  REQUIRE(state.sync_sets.size() == 1);  // not the SyncSet of another cluster
  CHECK(state.sync_sets[0]->meta.name == "a");
  CHECK(state.selector_sync_sets.size() == 1);
  REQUIRE(state.status);
  CHECK(state.status->meta.resource_version == "12");
  CHECK(mirror.version(HubCollection::kClusterSyncs) == "12");

  mirror.handler(HubCollection::kSyncSets).OnDelete(SyncSet("c1", "a", "c1", "13"));
  CHECK(mirror.Read("c1", "c1").sync_sets.empty());
  CHECK_FALSE(mirror.Read("c9", "c9").cd);  // unknown cluster: gone
}

TEST_CASE("the mirror keeps the status this process wrote until the watch brings a newer one") {
  HubMirror mirror;
  ListAll(mirror, "10");
  mirror.NoteWritten(HubCollection::kClusterSyncs, ClusterSyncObject("c1", "20"));
  // The watch still delivers an older write first.
  mirror.handler(HubCollection::kClusterSyncs).OnUpsert(ClusterSyncObject("c1", "15"));
  CHECK(mirror.Read("c1", "c1").status->meta.resource_version == "20");
  mirror.handler(HubCollection::kClusterSyncs).OnUpsert(ClusterSyncObject("c1", "25"));
  CHECK(mirror.Read("c1", "c1").status->meta.resource_version == "25");
}

TEST_CASE(
    "the mirror serves a ClusterSyncLease as the hub sent it, the newer of a write and an event") {
  HubMirror mirror;
  ListAll(mirror, "10");
  auto lease = [](const std::string& version, const std::string& holder) {
    return Json{{"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
                {"kind", "ClusterSyncLease"},
                {"metadata",
                 {{"name", "c1"},
                  {"namespace", "c1"},
                  {"resourceVersion", version},
                  {"annotations", {{"syncbus.io/holder", holder}}}}},
                {"spec", {{"renewTime", "2026-11-29T08:00:00.000000Z"}}}};
  };
  CHECK_FALSE(mirror.ClusterSyncLease("c1", "c1").has_value());
  mirror.handler(HubCollection::kClusterSyncLeases).OnUpsert(lease("11", "consumer-a"));
  REQUIRE(mirror.ClusterSyncLease("c1", "c1").has_value());
  CHECK(*mirror.ClusterSyncLease("c1", "c1") == lease("11", "consumer-a"));
  mirror.NoteWritten(HubCollection::kClusterSyncLeases, lease("20", "consumer-b"));
  // An older event is kept out.
  mirror.handler(HubCollection::kClusterSyncLeases).OnUpsert(lease("15", "consumer-a"));
  CHECK(*mirror.ClusterSyncLease("c1", "c1") == lease("20", "consumer-b"));
  mirror.handler(HubCollection::kClusterSyncLeases).OnDelete(lease("21", "consumer-b"));
  CHECK_FALSE(mirror.ClusterSyncLease("c1", "c1").has_value());
}

TEST_CASE("an invalid object is dropped from the mirror, not served in its older form") {
  HubMirror mirror;
  ListAll(mirror, "10");
  Json broken = SyncSet("c1", "a", "c1", "11");
  broken["spec"]["resources"] = "not a list";
  mirror.handler(HubCollection::kSyncSets).OnUpsert(broken);
  CHECK(mirror.Read("c1", "c1").sync_sets.empty());
  CHECK(mirror.invalid_objects() == 1);
}

TEST_CASE("caught up: the sync reads the mirror and the hub not at all") {
  ReaderRig rig(std::chrono::seconds(30));
  ListAll(rig.mirror, "100");
  auto state = rig.reader.Read(MirrorRequest({"90", "100", "100"}));
  REQUIRE(state.ok());
  CHECK(state->cd);
  CHECK(rig.hub.reads == 0);
  CHECK(rig.Reads("fresh") == 1);
}

TEST_CASE("behind: the sync waits until the mirror catches up, then reads it [concurrent]") {
  ReaderRig rig(std::chrono::seconds(30));
  ListAll(rig.mirror, "100");
  auto read = std::async(std::launch::async, [&] {
    return rig.reader.Read(MirrorRequest({"", "105", ""}));
  });
  // The publisher saw an edit of SyncSet "a" at 105 that this mirror has yet to receive.
  rig.mirror.handler(HubCollection::kSyncSets).OnUpsert(SyncSet("c1", "a", "c1", "105", 2));
  auto state = read.get();
  REQUIRE(state.ok());
  REQUIRE(state->sync_sets.size() == 1);
  CHECK(state->sync_sets[0]->meta.generation == 2);
  CHECK(rig.hub.reads == 0);
  CHECK(rig.Reads("waited") + rig.Reads("fresh") == 1);  // "fresh" if the edit came first
}

TEST_CASE("a bookmark catches the mirror up too [concurrent]") {
  ReaderRig rig(std::chrono::seconds(30));
  ListAll(rig.mirror, "100");
  auto read = std::async(std::launch::async, [&] {
    return rig.reader.Read(MirrorRequest({"", "", "150"}));
  });
  rig.mirror.handler(HubCollection::kSelectorSyncSets).OnCheckpoint("160", true);
  REQUIRE(read.get().ok());
  CHECK(rig.hub.reads == 0);
}

TEST_CASE("never catches up: after the wait the sync reads the hub directly") {
  ReaderRig rig(std::chrono::milliseconds(0));
  ListAll(rig.mirror, "100");
  REQUIRE(rig.reader.Read(MirrorRequest({"", "105", ""})).ok());
  CHECK(rig.hub.reads == 1);
  CHECK(rig.Reads("behind") == 1);
}

TEST_CASE("a request that does not say what the publisher saw reads the hub") {
  ReaderRig rig(std::chrono::seconds(30));
  ListAll(rig.mirror, "100");
  REQUIRE(rig.reader.Read(MirrorRequest({})).ok());
  CHECK(rig.hub.reads == 1);
  CHECK(rig.Reads("unknown") == 1);
}

TEST_CASE(
    "ReadIfFresh serves the mirror only when it is already fresh: it never waits and never reads "
    "the hub") {
  ReaderRig rig(std::chrono::seconds(30));
  ListAll(rig.mirror, "100");
  auto state = rig.reader.ReadIfFresh(MirrorRequest({"90", "100", "100"}));
  REQUIRE(state);
  CHECK(state->cd);
  CHECK(state->sync_sets.size() == 1);
  CHECK_FALSE(rig.reader.ReadIfFresh(MirrorRequest({"", "105", ""})));  // behind: no wait (30 s)
  CHECK_FALSE(rig.reader.ReadIfFresh(MirrorRequest({})));               // unknown: no hub read
  CHECK(rig.hub.reads == 0);
  CHECK_FALSE(rig.hub.ReadIfFresh(MirrorRequest({"90", "100", "100"})));  // a reader without a copy
}

TEST_CASE("a 410 during the wait: the stale mirror serves nothing until its relist [concurrent]") {
  ReaderRig rig(std::chrono::seconds(30));
  ListAll(rig.mirror, "100");
  rig.mirror.handler(HubCollection::kSyncSets).OnStale();
  // Stale: not fresh even at a version it had reached.
  CHECK_FALSE(rig.mirror.FreshAt({"", "100", ""}));
  CHECK_FALSE(rig.mirror.synced());
  auto read = std::async(std::launch::async, [&] {
    return rig.reader.Read(MirrorRequest({"", "100", ""}));
  });
  // The relist brings the current state (SyncSet "a" gone) at a newer version.
  rig.mirror.handler(HubCollection::kSyncSets).OnReplace({});
  rig.mirror.handler(HubCollection::kSyncSets).OnSynced();
  rig.mirror.handler(HubCollection::kSyncSets).OnCheckpoint("120", false);
  auto state = read.get();
  REQUIRE(state.ok());
  CHECK(state->sync_sets.empty());
  CHECK(rig.hub.reads == 0);
  CHECK(rig.Reads("waited") + rig.Reads("fresh") == 1);
}

TEST_CASE("a collection that has not listed yet is fresh at no version") {
  HubMirror mirror;
  CHECK_FALSE(mirror.FreshAt({}));
  mirror.handler(HubCollection::kSyncSets).OnCheckpoint("5", false);
  CHECK_FALSE(mirror.FreshAt({"", "5", ""}));  // the others have not listed
}

TEST_CASE(
    "hub mirror: a list's pages are parsed as they arrive and replace the collection when it "
    "completes") {
  HubMirror mirror;
  ListAll(mirror, "10");
  kube::ReflectorHandler& sets = mirror.handler(HubCollection::kSyncSets);
  // A relist: its first page is taken (parsed), the mirror still serves the old list.
  sets.OnListStart();
  std::vector<Json> page = {SyncSet("c1", "b", "c1", "11")};
  sets.OnListPage(page);
  CHECK(page.empty());
  REQUIRE(mirror.Read("c1", "c1").sync_sets.size() == 1);
  CHECK(mirror.Read("c1", "c1").sync_sets[0]->meta.name == "a");
  // That list failed on its second page; the retry starts over: nothing of the failed one stays.
  sets.OnListStart();
  page = {SyncSet("c1", "c", "c1", "12")};
  sets.OnListPage(page);
  sets.OnReplace(
      {SyncSet("c1", "d", "c1", "12"), Json{{"metadata", {{"name", "bad"}, {"namespace", "c1"}}},
                                            {"spec", {{"resources", "not a list"}}}}});
  std::vector<std::string> names;
  for (const auto& set : mirror.Read("c1", "c1").sync_sets) names.push_back(set->meta.name);
  CHECK(names == std::vector<std::string>{"c", "d"});
  CHECK(mirror.invalid_objects() == 1);
}
