#include "consumer/status_builder.h"

#include <doctest/doctest.h>

#include "common/time_format.h"
#include "tests/fakes/common/fake_clock.h"

using namespace syncbus;
using namespace syncbus::consumer;
using namespace std::chrono_literals;

namespace {

constexpr char kInstalled[] = "2020-01-01T00:00:00Z";

// A set not applied this round: its entry stays as it was.
SetOutcome Kept(const std::string& name, int64_t gen, SetKind kind = SetKind::kSyncSet) {
  SetOutcome o;
  o.kind = kind;
  o.name = name;
  o.generation = gen;
  return o;
}

SetOutcome Applied(const std::string& name, int64_t gen, bool ok,
                   SetKind kind = SetKind::kSyncSet) {
  SetOutcome o = Kept(name, gen, kind);
  o.applied = true;
  o.success = ok;
  o.failure_message = ok ? "" : "boom";
  return o;
}

SetOutcome Removed(const std::string& name, bool deleted,
                   std::vector<hive::SyncResourceReference> left = {}) {
  SetOutcome o;
  o.name = name;
  o.removed = true;
  o.applied = true;
  o.sync_mode = true;
  o.success = deleted;
  o.failure_message = deleted ? "" : "cannot delete";
  o.resources_to_delete = std::move(left);
  return o;
}

hive::SyncResourceReference Tracked(const std::string& api_version, const std::string& kind,
                                    const std::string& ns, const std::string& name) {
  return {api_version, kind, name, ns};
}

}  // namespace

TEST_CASE("first success sets entries, firstSuccessTime and a Success condition") {
  FakeClock clock;
  BuiltStatus built =
      BuildStatus({}, {Applied("a", 1, true), Applied("s", 2, true, SetKind::kSelectorSyncSet)},
                  clock.WallNow(), kInstalled);
  const hive::ClusterSyncStatus& st = built.status;
  REQUIRE(st.sync_sets.size() == 1);
  REQUIRE(st.selector_sync_sets.size() == 1);
  std::string now = FormatRfc3339(clock.WallNow());
  CHECK(st.sync_sets[0].first_success_time == now);
  CHECK(st.sync_sets[0].last_transition_time == now);
  CHECK(st.selector_sync_sets[0].observed_generation == 2);
  CHECK(st.first_success_time == now);
  CHECK(built.first_successes == std::vector<size_t>{0, 1});
  REQUIRE(built.cluster_first_success.has_value());
  REQUIRE(st.conditions.size() == 1);
  CHECK(st.conditions[0].type == "Failed");
  CHECK(st.conditions[0].status == "False");
  CHECK(st.conditions[0].reason == "Success");
  CHECK(st.conditions[0].message ==
        "All SyncSets and SelectorSyncSets have been applied to the cluster");
}

TEST_CASE("an entry's lastTransitionTime moves with any change to the entry, as Hive's DeepEqual") {
  FakeClock clock;
  hive::ClusterSyncStatus first =
      BuildStatus({}, {Applied("a", 1, true)}, clock.WallNow(), kInstalled).status;
  clock.Advance(1h);
  hive::ClusterSyncStatus same =
      BuildStatus(first, {Applied("a", 1, true)}, clock.WallNow(), kInstalled).status;
  CHECK(same.ToJson() == first.ToJson());
  hive::ClusterSyncStatus again =
      BuildStatus(first, {Applied("a", 2, true)}, clock.WallNow(), kInstalled).status;
  CHECK(again.sync_sets[0].last_transition_time ==
        FormatRfc3339(clock.WallNow()));  // the generation changed
  CHECK(again.sync_sets[0].first_success_time == first.sync_sets[0].first_success_time);
  CHECK(again.conditions[0].last_transition_time == first.conditions[0].last_transition_time);
  clock.Advance(1h);
  hive::ClusterSyncStatus failed =
      BuildStatus(again, {Applied("a", 2, false)}, clock.WallNow(), kInstalled).status;
  CHECK(failed.sync_sets[0].last_transition_time == FormatRfc3339(clock.WallNow()));
  CHECK(failed.sync_sets[0].failure_message == "boom");
  CHECK(failed.conditions[0].status == "True");
  CHECK(failed.conditions[0].message == "SyncSet a is failing");
  clock.Advance(1h);
  // The same failure again: the entry is unchanged.
  hive::ClusterSyncStatus still =
      BuildStatus(failed, {Applied("a", 2, false)}, clock.WallNow(), kInstalled).status;
  CHECK(still.ToJson() == failed.ToJson());
}

TEST_CASE("the Failed condition in Hive's words, rewritten alone when its message changes") {
  FakeClock clock;
  auto message = [&](std::vector<SetOutcome> sets) {
    return BuildStatus({}, sets, clock.WallNow(), kInstalled).status.conditions[0].message;
  };
  CHECK(message({Applied("x", 1, false), Applied("y", 1, false), Applied("z", 1, false)}) ==
        "SyncSets x, y, z are failing");
  CHECK(message({Applied("x", 1, false), Applied("z", 1, false, SetKind::kSelectorSyncSet)}) ==
        "SyncSet x and SelectorSyncSet z are failing");
  CHECK(message({Applied("z", 1, false, SetKind::kSelectorSyncSet)}) ==
        "SelectorSyncSet z is failing");
  // Another condition is dropped when Hive rewrites its own; kept while it is unchanged.
  hive::ClusterSyncStatus with_other;
  with_other.conditions = {{"Failed", "False", "Success",
                            "All SyncSets and SelectorSyncSets have been applied to the cluster",
                            "2020-01-01T00:00:00Z", "2020-01-01T00:00:00Z"},
                           {"Other", "True", "", "", "", ""}};
  CHECK(BuildStatus(with_other, {}, clock.WallNow(), "").status.conditions.size() == 2);
  hive::ClusterSyncStatus rewritten =
      BuildStatus(with_other, {Applied("x", 1, false)}, clock.WallNow(), "").status;
  REQUIRE(rewritten.conditions.size() == 1);
  CHECK(rewritten.conditions[0].last_probe_time == FormatRfc3339(clock.WallNow()));
}

TEST_CASE("unapplied sets keep their entry, removed sets go once their objects are deleted") {
  FakeClock clock;
  hive::ClusterSyncStatus st =
      BuildStatus({}, {Applied("a", 1, true), Applied("b", 1, false), Applied("gone", 1, true)},
                  clock.WallNow(), kInstalled)
          .status;
  hive::ClusterSyncStatus next =
      BuildStatus(st, {Removed("gone", true), Kept("a", 1), Applied("b", 1, false), Kept("new", 1)},
                  clock.WallNow(), kInstalled)
          .status;
  REQUIRE(next.sync_sets.size() == 2);
  CHECK(next.sync_sets[0].name == "a");
  CHECK(next.sync_sets[1].name == "b");
  // A removed set whose deletion failed keeps its entry, first, at generation 0.
  clock.Advance(1h);
  hive::ClusterSyncStatus kept =
      BuildStatus(st,
                  {Removed("gone", false, {Tracked("v1", "ConfigMap", "ns", "x")}), Kept("a", 1),
                   Kept("b", 1)},
                  clock.WallNow(), kInstalled)
          .status;
  REQUIRE(kept.sync_sets.size() == 3);
  CHECK(kept.sync_sets[0].name == "gone");
  CHECK(kept.sync_sets[0].observed_generation == 0);
  CHECK(kept.sync_sets[0].result == hive::SyncResult::kFailure);
  CHECK(kept.sync_sets[0].last_transition_time == FormatRfc3339(clock.WallNow()));
  CHECK(kept.conditions[0].message == "SyncSets gone, b are failing");
}

TEST_CASE("resourcesToDelete is sorted by apiVersion, kind, namespace, name, and Upsert drops it") {
  FakeClock clock;
  SetOutcome sync = Applied("s", 1, true);
  sync.sync_mode = true;
  sync.resources_to_delete = {
      Tracked("v1", "Service", "a", "x"), Tracked("v1", "ConfigMap", "b", "x"),
      Tracked("hive.openshift.io/v1", "ClusterDeployment", "a", "x"),
      Tracked("v1", "ConfigMap", "a", "y"), Tracked("v1", "ConfigMap", "a", "x")};
  hive::ClusterSyncStatus st = BuildStatus({}, {sync}, clock.WallNow(), kInstalled).status;
  std::vector<std::string> order;
  for (const auto& r : st.sync_sets[0].resources_to_delete)
    order.push_back(r.kind + "/" + r.ns + "/" + r.name);
  CHECK(order == std::vector<std::string>{"ClusterDeployment/a/x", "ConfigMap/a/x", "ConfigMap/a/y",
                                          "ConfigMap/b/x", "Service/a/x"});
  SetOutcome upsert = Applied("s", 1, true);
  hive::ClusterSyncStatus dropped = BuildStatus(st, {upsert}, clock.WallNow(), kInstalled).status;
  CHECK(dropped.sync_sets[0].resources_to_delete.empty());
}

TEST_CASE(
    "status.firstSuccessTime: the latest set's first success, only for an installed cluster") {
  FakeClock clock;
  hive::ClusterSyncStatus previous;
  hive::SyncStatus old_entry{
      "old", 1, {}, hive::SyncResult::kSuccess, "", "2020-01-02T03:04:05Z", "2020-01-02T03:14:05Z"};
  hive::SyncStatus new_entry{
      "new", 1, {}, hive::SyncResult::kSuccess, "", "2020-01-02T03:04:05Z", "2020-01-02T03:04:05Z"};
  previous.sync_sets = {new_entry, old_entry};
  CHECK(BuildStatus(previous, {Kept("new", 1), Kept("old", 1)}, clock.WallNow(), kInstalled)
            .status.first_success_time == "2020-01-02T03:14:05Z");
  CHECK(BuildStatus(previous, {Kept("new", 1), Kept("old", 1)}, clock.WallNow(), "")
            .status.first_success_time.empty());
  // A failing set with no first success yet: none.
  CHECK(BuildStatus({}, {Applied("a", 1, false)}, clock.WallNow(), kInstalled)
            .status.first_success_time.empty());
  // No set at all: now.
  CHECK(BuildStatus({}, {}, clock.WallNow(), kInstalled).status.first_success_time ==
        FormatRfc3339(clock.WallNow()));
}

TEST_CASE("failure messages are truncated on a UTF-8 boundary") {
  std::string long_msg(5000, 'x');
  CHECK(TruncateMessage(long_msg).size() <= kMaxFailureMessageBytes);
  CHECK(TruncateMessage(long_msg).find("(truncated)") != std::string::npos);
  std::string utf8;
  for (int i = 0; i < 600; ++i) utf8 += "\xC3\xA9";  // é
  std::string cut = TruncateMessage(utf8, 101);
  CHECK(cut.size() <= 101);
  size_t body = cut.find("...");
  CHECK(body % 2 == 0);  // never splits a two-byte character
  CHECK(TruncateMessage("short") == "short");
}
