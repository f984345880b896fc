#include "publisher/sync_decision.h"

#include <doctest/doctest.h>

#include "common/hive/status_rules.h"
#include "common/time_format.h"
#include "tests/fakes/common/fake_clock.h"
#include "tests/support/hive_objects.h"

using namespace syncbus;
using namespace syncbus::hive;
using namespace syncbus::publisher;
using namespace std::chrono_literals;

namespace {

DesiredState Desired(std::vector<DesiredSet> sets) {
  DesiredState d;
  d.cluster_key = "c1/c1";
  d.sets = std::move(sets);
  return d;
}

// A status as the consumer writes it: the entries and the Failed condition they call for.
ClusterSync StatusWith(std::vector<SyncStatus> ss, std::vector<SyncStatus> sss = {}) {
  ClusterSync cs;
  cs.meta.name = "c1";
  cs.status.sync_sets = std::move(ss);
  cs.status.selector_sync_sets = std::move(sss);
  cs.status.conditions = {ExpectedFailedCondition(cs.status)};
  return cs;
}

// The decision on the status as the hub cache keeps it (its SyncReport).
SyncNeed Decide(const DesiredState& desired, const ClusterSync* status,
                std::optional<WallTime> lease, WallTime now, const ReapplyPolicy& policy) {
  if (status == nullptr) return DecideSync(desired, nullptr, lease, now, policy);
  const SyncReport report = SyncReport::Of(*status);
  return DecideSync(desired, &report, lease, now, policy);
}

bool Processed(const DesiredState& snapshot, const ClusterSync* status) {
  if (status == nullptr) return SnapshotProcessed(snapshot, nullptr);
  const SyncReport report = SyncReport::Of(*status);
  return SnapshotProcessed(snapshot, &report);
}

// A lease renewed at `t`, as the hub cache keeps it (renewTime to the second).
std::optional<WallTime> Lease(WallTime t) {
  ClusterSyncLease l;
  l.renew_time = FormatRfc3339(t);
  return LeaseRenewal(l);
}

}  // namespace

TEST_CASE("decision: a lease's renewTime is read as a time, and none when absent or not a time") {
  ClusterSyncLease lease;
  CHECK_FALSE(LeaseRenewal(lease).has_value());
  lease.renew_time = "yesterday";
  CHECK_FALSE(LeaseRenewal(lease).has_value());
  lease.renew_time = "2026-01-01T00:00:01.500000Z";
  REQUIRE(LeaseRenewal(lease).has_value());
  CHECK(FormatRfc3339Micro(*LeaseRenewal(lease)) == lease.renew_time);
}

TEST_CASE("decision: missing, changed, removed, failed, in sync") {
  FakeClock clock;
  ReapplyPolicy policy;
  auto lease = Lease(clock.WallNow());
  auto d = Desired({{SetKind::kSyncSet, "a", 2}, {SetKind::kSelectorSyncSet, "b", 1}});
  CHECK(Decide(d, nullptr, lease, clock.WallNow(), policy).reason == SyncReason::kMissingStatus);
  auto missing = StatusWith({testing::SyncStatusEntry("a", 2)});
  CHECK(Decide(d, &missing, lease, clock.WallNow(), policy).reason == SyncReason::kMissingStatus);
  auto old = StatusWith({testing::SyncStatusEntry("a", 1)}, {testing::SyncStatusEntry("b", 1)});
  CHECK(Decide(d, &old, lease, clock.WallNow(), policy).kind == NeedKind::kChange);
  CHECK(Decide(d, &old, lease, clock.WallNow(), policy).reason == SyncReason::kGenerationChanged);
  auto extra = StatusWith({testing::SyncStatusEntry("a", 2), testing::SyncStatusEntry("gone", 1)},
                          {testing::SyncStatusEntry("b", 1)});
  CHECK(Decide(d, &extra, lease, clock.WallNow(), policy).reason == SyncReason::kSetRemoved);
  auto failed = StatusWith({testing::SyncStatusEntry("a", 2, SyncResult::kFailure)},
                           {testing::SyncStatusEntry("b", 1)});
  CHECK(Decide(d, &failed, lease, clock.WallNow(), policy).kind == NeedKind::kFailed);
  auto good = StatusWith({testing::SyncStatusEntry("a", 2)}, {testing::SyncStatusEntry("b", 1)});
  CHECK(Decide(d, &good, lease, clock.WallNow(), policy).kind == NeedKind::kNone);
}

TEST_CASE("decision: a cluster with no set gets its ClusterSync, then its lease renewed when due") {
  FakeClock clock;
  ReapplyPolicy policy{2h, 0.1};
  auto d = Desired({});
  CHECK(Decide(d, nullptr, std::nullopt, clock.WallNow(), policy).reason ==
        SyncReason::kMissingStatus);
  auto empty = StatusWith({});
  CHECK(Decide(d, &empty, std::nullopt, clock.WallNow(), policy).kind == NeedKind::kReapply);
  auto lease = Lease(clock.WallNow());
  CHECK(Decide(d, &empty, lease, clock.WallNow(), policy).kind == NeedKind::kNone);
  clock.Advance(3h);
  CHECK(Decide(d, &empty, lease, clock.WallNow(), policy).kind == NeedKind::kReapply);
}

TEST_CASE(
    "decision: a status whose condition or firstSuccessTime is not what Hive derives is brought up "
    "to date") {
  FakeClock clock;
  ReapplyPolicy policy;
  auto lease = Lease(clock.WallNow());
  auto d = Desired({{SetKind::kSyncSet, "a", 1}});
  auto good = StatusWith({testing::SyncStatusEntry("a", 1)});
  CHECK(Decide(d, &good, lease, clock.WallNow(), policy).kind == NeedKind::kNone);
  auto no_condition = good;
  no_condition.status.conditions.clear();
  CHECK(Decide(d, &no_condition, lease, clock.WallNow(), policy).reason ==
        SyncReason::kStatusOutdated);
  auto other_words = good;
  other_words.status.conditions[0].message = "SyncSet a is failing";
  CHECK(Decide(d, &other_words, lease, clock.WallNow(), policy).reason ==
        SyncReason::kStatusOutdated);
  // Installed, every set has first succeeded, no firstSuccessTime yet.
  d.installed = true;
  auto first = StatusWith({testing::SyncStatusEntry("a", 1)});
  first.status.sync_sets[0].first_success_time = "2020-01-01T00:00:00Z";
  first.status.conditions = {ExpectedFailedCondition(first.status)};
  CHECK(Decide(d, &first, lease, clock.WallNow(), policy).reason == SyncReason::kStatusOutdated);
  first.status.first_success_time = "2020-01-01T00:00:00Z";
  CHECK(Decide(d, &first, lease, clock.WallNow(), policy).kind == NeedKind::kNone);
}

TEST_CASE("decision: skipped clusters need nothing") {
  FakeClock clock;
  auto d = Desired({{SetKind::kSyncSet, "a", 1}});
  d.skip_reason = "unreachable";
  auto s = Decide(d, nullptr, std::nullopt, clock.WallNow(), {});
  CHECK(s.kind == NeedKind::kNone);
  CHECK_FALSE(s.reason.has_value());  // no request, so no reason: d.skip_reason says why
}

TEST_CASE("reapply: due after interval plus a jitter stable per cluster") {
  FakeClock clock;
  ReapplyPolicy policy{2h, 0.1};
  auto j1 = ReapplyJitter("ns/c1", policy);
  CHECK(j1 == ReapplyJitter("ns/c1", policy));  // never re-drawn
  CHECK(j1 >= 0ms);
  CHECK(j1 < 12min);
  int distinct = 0;
  for (int i = 0; i < 50; ++i) distinct += ReapplyJitter("ns/c" + std::to_string(i), policy) != j1;
  CHECK(distinct >= 45);  // spread across clusters

  auto d = Desired({{SetKind::kSyncSet, "a", 1}});
  d.cluster_key = "ns/c1";
  auto good = StatusWith({testing::SyncStatusEntry("a", 1)});
  auto lease = Lease(clock.WallNow());
  CHECK(Decide(d, &good, std::nullopt, clock.WallNow(), policy).reason == SyncReason::kReapplyDue);
  CHECK(Decide(d, &good, lease, clock.WallNow(), policy).kind == NeedKind::kNone);
  clock.Advance(2h + j1 - 1s);
  CHECK(Decide(d, &good, lease, clock.WallNow(), policy).kind == NeedKind::kNone);
  clock.Advance(1s);
  CHECK(Decide(d, &good, lease, clock.WallNow(), policy).kind == NeedKind::kReapply);
  // Evaluating repeatedly after the due time never un-dues it.
  for (int i = 0; i < 10; ++i) {
    clock.Advance(1s);
    CHECK(Decide(d, &good, lease, clock.WallNow(), policy).kind == NeedKind::kReapply);
  }
}

TEST_CASE("snapshot processed when status reaches its generations") {
  auto snap = Desired({{SetKind::kSyncSet, "a", 2}});
  auto before = StatusWith({testing::SyncStatusEntry("a", 1)});
  auto after = StatusWith({testing::SyncStatusEntry("a", 2, SyncResult::kFailure)});
  auto newer = StatusWith({testing::SyncStatusEntry("a", 3)});
  auto with_stale =
      StatusWith({testing::SyncStatusEntry("a", 2), testing::SyncStatusEntry("old", 1)});
  CHECK_FALSE(Processed(snap, nullptr));
  CHECK_FALSE(Processed(snap, &before));
  CHECK(Processed(snap, &after));
  CHECK(Processed(snap, &newer));
  CHECK_FALSE(Processed(snap, &with_stale));
}

TEST_CASE("decision: the entry of a set a rollout holds back is left as it is") {
  FakeClock clock;
  ReapplyPolicy policy;
  auto lease = Lease(clock.WallNow());
  // "b" is held: its entry is at an older generation, failed, and "b" may not even apply now.
  auto d = Desired({{SetKind::kSyncSet, "a", 2}});
  d.held = {{SetKind::kSelectorSyncSet, "b", 5}};
  auto status = StatusWith({testing::SyncStatusEntry("a", 2)},
                           {testing::SyncStatusEntry("b", 4, SyncResult::kFailure)});
  CHECK(Decide(d, &status, lease, clock.WallNow(), policy).kind == NeedKind::kNone);
  CHECK(Processed(d, &status));
  // Released, it is a change like any other.
  d.held.clear();
  d.sets.push_back({SetKind::kSelectorSyncSet, "b", 5});
  CHECK(Decide(d, &status, lease, clock.WallNow(), policy).reason ==
        SyncReason::kGenerationChanged);
}
