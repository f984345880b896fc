// NoWriteReason: when a sync of a cluster's state would end without a write. DeliveryLoop settles
// a returned request without running it on this answer, so every way the state can still call
// for a write must say "".
#include "consumer/sync_plan.h"

#include <memory>

#include <doctest/doctest.h>

#include "common/hive/status_rules.h"

using namespace syncbus;
using namespace syncbus::consumer;

namespace {

std::shared_ptr<hive::ClusterDeployment> Cd() {
  auto cd = std::make_shared<hive::ClusterDeployment>();
  cd->meta.ns = cd->meta.name = "c1";
  cd->installed = true;
  cd->installed_timestamp = "2026-01-01T00:00:00Z";
  hive::Condition reachable;
  reachable.type = "Unreachable";
  reachable.status = "False";
  cd->conditions = {reachable};
  return cd;
}

hive::SyncStatus Entry(const std::string& name, int64_t generation, hive::SyncResult result) {
  hive::SyncStatus e;
  e.name = name;
  e.observed_generation = generation;
  e.result = result;
  e.first_success_time = "2026-01-01T00:00:00Z";
  return e;
}

// Cluster c1 with SyncSet "a" at generation 2, SelectorSyncSet "fleet" at generation 1, and a
// ClusterSync that reports both applied at those generations, with Hive's condition and
// firstSuccessTime: a state that needs no write.
struct State {
  std::shared_ptr<hive::ClusterDeployment> cd = Cd();
  std::shared_ptr<hive::SyncSet> ss = std::make_shared<hive::SyncSet>();
  std::shared_ptr<hive::SelectorSyncSet> sss = std::make_shared<hive::SelectorSyncSet>();
  hive::ClusterSync status;

  State() {
    ss->meta.ns = "c1";
    ss->meta.name = "a";
    ss->meta.generation = 2;
    sss->meta.name = "fleet";
    sss->meta.generation = 1;
    status.meta.ns = status.meta.name = "c1";
    status.status.sync_sets = {Entry("a", 2, hive::SyncResult::kSuccess)};
    status.status.selector_sync_sets = {Entry("fleet", 1, hive::SyncResult::kSuccess)};
    status.status.first_success_time = "2026-01-01T00:00:00Z";
  }
  ClusterState Build(bool with_status = true) {
    status.status.conditions = {hive::ExpectedFailedCondition(status.status)};
    ClusterState s;
    s.cd = cd;
    s.sync_sets = {ss};
    s.selector_sync_sets = {sss};
    if (with_status) s.status = std::make_shared<hive::ClusterSync>(status);
    return s;
  }
};

}  // namespace

TEST_CASE("a cluster whose status reports every set applied at its generation needs no write") {
  State st;
  CHECK(NoWriteReason(st.Build(), false) == "up-to-date");
}

TEST_CASE("every way the state still calls for a write is told apart from up to date") {
  SUBCASE("a full reapply writes every set") {
    State st;
    CHECK(NoWriteReason(st.Build(), true) == "");
  }
  SUBCASE("no ClusterSync yet") {
    State st;
    CHECK(NoWriteReason(st.Build(false), false) == "");
  }
  SUBCASE("a set at a newer generation than its entry") {
    State st;
    st.ss->meta.generation = 3;
    CHECK(NoWriteReason(st.Build(), false) == "");
  }
  SUBCASE("a set without an entry") {
    State st;
    st.status.status.selector_sync_sets.clear();
    CHECK(NoWriteReason(st.Build(), false) == "");
  }
  SUBCASE("a set that failed at its generation: its retries are still owed") {
    State st;
    st.status.status.sync_sets = {Entry("a", 2, hive::SyncResult::kFailure)};
    CHECK(NoWriteReason(st.Build(), false) == "");
  }
  SUBCASE("an entry of a set that no longer applies: its objects are deleted") {
    State st;
    st.status.status.sync_sets.push_back(Entry("gone", 1, hive::SyncResult::kSuccess));
    CHECK(NoWriteReason(st.Build(), false) == "");
  }
  SUBCASE("a condition that does not say what the entries call for") {
    State st;
    ClusterState s = st.Build();
    auto outdated = std::make_shared<hive::ClusterSync>(*s.status);
    outdated->status.conditions.clear();
    s.status = outdated;
    CHECK(NoWriteReason(s, false) == "");
  }
  SUBCASE("firstSuccessTime due on an installed cluster") {
    State st;
    st.status.status.first_success_time.clear();
    CHECK(NoWriteReason(st.Build(), false) == "");
  }
}

TEST_CASE("a cluster that is gone or skipped needs no write, with the syncer's reason") {
  State st;
  ClusterState gone = st.Build();
  gone.cd = nullptr;
  CHECK(NoWriteReason(gone, false) == "cluster-gone");
  st.cd->meta.annotations["hive.openshift.io/syncset-pause"] = "true";
  st.ss->meta.generation = 3;  // a change waits, but a paused cluster gets none
  CHECK(NoWriteReason(st.Build(), false) == "skipped:" + st.cd->SkipReason());
  CHECK(st.cd->SkipReason() != "");
}
