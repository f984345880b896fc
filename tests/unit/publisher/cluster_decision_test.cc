#include "publisher/cluster_decision.h"

#include <iterator>

#include <doctest/doctest.h>

#include "common/hive/status_rules.h"
#include "common/time_format.h"
#include "tests/fakes/common/fake_clock.h"
#include "tests/support/hive_objects.h"

using namespace syncbus;
using namespace syncbus::hive;
using namespace syncbus::publisher;
using namespace std::chrono_literals;

// Its own namespace: the unit tests of an area compile as one unity batch.
namespace cluster_decision_test {

const std::string kKey = "c1/c1";

// One cluster with SyncSet "a" applying to it, and what the decision needs around it.
struct Cluster {
  FakeClock clock;
  ClusterDeployment cd;
  ClusterSync status;
  SyncReport report;  // of `status`, as the hub cache keeps it (Report())
  ClusterView view;
  OutstandingRequest outstanding;
  hive::SecretVersions applied;
  ClusterFacts facts;
  RoundFacts round;
  DecisionPolicy policy;

  explicit Cluster(int64_t desired_gen = 1, int64_t status_gen = 1,
                   SyncResult result = SyncResult::kSuccess) {
    cd.meta.name = cd.meta.ns = "c1";
    view.cd = &cd;
    view.desired.cluster_key = kKey;
    view.desired.sets = {{SetKind::kSyncSet, "a", desired_gen}};
    view.desired.revision = "rev-" + std::to_string(desired_gen);
    status.status.sync_sets = {testing::SyncStatusEntry("a", status_gen, result)};
    status.status.conditions = {ExpectedFailedCondition(status.status)};
    Report();
    view.lease_renewal = std::chrono::floor<std::chrono::seconds>(clock.WallNow());
    view.secrets = {{"src/s", "1"}};
    applied = view.secrets;
    facts.applied_secrets = &applied;
    round.now = clock.Now();
    round.now_wall = clock.WallNow();
    policy.reapply = {1h, 0.1};
    policy.outstanding_timeout = 10min;
  }
  // The view shows `status` as it is now.
  void Report() {
    report = SyncReport::Of(status);
    view.status = &report;
  }
  // A request for generation `gen` outstanding since `ago`, on `lane`.
  void Outstanding(int64_t gen, Duration ago, amqp::Lane lane) {
    outstanding.snapshot = view.desired;
    outstanding.snapshot.sets = {{SetKind::kSyncSet, "a", gen}};
    outstanding.snapshot.revision = "rev-" + std::to_string(gen);
    outstanding.published_at = clock.Now() - ago;
    outstanding.first_published = outstanding.published_at;
    outstanding.published_wall = clock.WallNow();
    outstanding.resync_queued = lane == amqp::Lane::kResync;
    facts.outstanding = &outstanding;
    facts.last_published = outstanding.published_at;
  }
  ClusterDecision Decide() const { return DecideCluster(kKey, view, facts, round, policy); }
};

TEST_CASE("cluster decision: in sync, paused and skipped clusters need nothing, each its state") {
  Cluster c;
  auto d = c.Decide();
  CHECK(d.action == ClusterAction::kNone);
  CHECK(d.state == ClusterState::kInSync);
  c.view.desired.skip_reason = "paused";
  c.facts.applied_secrets = nullptr;  // a skipped cluster's Secrets are not looked at
  CHECK(c.Decide().state == ClusterState::kPaused);
  c.view.desired.skip_reason = "unreachable";
  CHECK(c.Decide().state == ClusterState::kSkipped);
  CHECK(c.Decide().action == ClusterAction::kNone);
}

TEST_CASE("cluster decision: the state names are the metric's labels") {
  CHECK(ClusterStateName(ClusterState::kInSync) == "in_sync");
  CHECK(ClusterStateName(ClusterState::kPending) == "pending");
  CHECK(ClusterStateName(ClusterState::kFailing) == "failing");
  CHECK(ClusterStateName(ClusterState::kPaused) == "paused");
  CHECK(ClusterStateName(ClusterState::kSkipped) == "skipped");
  CHECK(std::size(kClusterStates) == 5);
}

TEST_CASE(
    "cluster decision: a single edit goes on the change lane, start-up and bulk work on "
    "the resync lane") {
  Cluster c(/*desired_gen=*/2);
  auto d = c.Decide();
  CHECK(d.action == ClusterAction::kSend);
  CHECK(d.state == ClusterState::kPending);
  CHECK(d.lane == amqp::Lane::kChange);
  CHECK(d.reason == SyncReason::kGenerationChanged);
  CHECK_FALSE(d.full_reapply);  // the lease is fresh
  CHECK_FALSE(d.bulk_change);

  c.round.startup = true;
  d = c.Decide();
  CHECK(d.lane == amqp::Lane::kResync);
  CHECK(d.reason == SyncReason::kStartup);

  c.round.startup = false;
  c.round.bulk = true;
  d = c.Decide();
  CHECK(d.lane == amqp::Lane::kResync);
  CHECK(d.reason == SyncReason::kGenerationChanged);
  CHECK(d.bulk_change);
}

TEST_CASE(
    "cluster decision: a change without a lease, or with its reapply due, is a full "
    "reapply") {
  Cluster c(2);
  c.view.lease_renewal.reset();
  CHECK(c.Decide().full_reapply);
  Cluster due(2);
  due.round.now_wall += 2h;
  CHECK(due.Decide().full_reapply);
  // A due reapply alone: the resync lane.
  Cluster reapply;
  reapply.round.now_wall += 2h;
  auto d = reapply.Decide();
  CHECK(d.reason == SyncReason::kReapplyDue);
  CHECK(d.lane == amqp::Lane::kResync);
  CHECK(d.full_reapply);
}

TEST_CASE("cluster decision: a changed source Secret is a change with a full reapply") {
  Cluster c;
  c.applied = {{"src/s", "0"}};
  auto d = c.Decide();
  CHECK(d.action == ClusterAction::kSend);
  CHECK(d.reason == SyncReason::kSecretChanged);
  CHECK(d.lane == amqp::Lane::kChange);
  CHECK(d.full_reapply);
}

TEST_CASE("cluster decision: an outstanding request coalesces, until it times out") {
  Cluster c(3, 1);
  c.Outstanding(2, 1min, amqp::Lane::kChange);
  CHECK(c.Decide().action == ClusterAction::kCoalesce);
  c.Outstanding(2, 10min, amqp::Lane::kChange);
  auto d = c.Decide();
  CHECK(d.action == ClusterAction::kSend);
  CHECK(d.reason == SyncReason::kResend);
}

TEST_CASE("cluster decision: a change overtakes the request queued on the resync lane, once") {
  Cluster c(3, 1);
  c.Outstanding(2, 1min, amqp::Lane::kResync);
  c.outstanding.full_reapply = true;
  auto d = c.Decide();
  CHECK(d.action == ClusterAction::kSend);
  CHECK(d.promote);
  CHECK(d.lane == amqp::Lane::kChange);
  CHECK(d.reason == SyncReason::kGenerationChanged);
  CHECK_FALSE(d.full_reapply);  // the queued resync does it
  // Promoted already and not processed: a further change waits for it.
  c.outstanding.promoted = true;
  CHECK(c.Decide().action == ClusterAction::kCoalesce);
  // The same revision as queued: nothing to overtake.
  Cluster same(2, 1);
  same.Outstanding(2, 1min, amqp::Lane::kResync);
  CHECK(same.Decide().action == ClusterAction::kCoalesce);
  // A bulk change never overtakes: it is resync work itself.
  c.outstanding.promoted = false;
  c.round.bulk = true;
  CHECK(c.Decide().action == ClusterAction::kCoalesce);
}

TEST_CASE("cluster decision: a failing cluster is left to the consumer's retries for a while") {
  Cluster c(1, 1, SyncResult::kFailure);
  c.facts.last_published = c.clock.Now() - 5min;
  auto d = c.Decide();
  CHECK(d.state == ClusterState::kFailing);
  CHECK(d.action == ClusterAction::kLeaveToRetries);
  c.facts.last_published = c.clock.Now() - 10min;
  d = c.Decide();
  CHECK(d.action == ClusterAction::kSend);
  CHECK(d.reason == SyncReason::kFailed);
}

TEST_CASE("cluster decision: the outstanding cap defers resync work, never a single change") {
  Cluster c(2);
  c.round.cap_reached = true;
  CHECK(c.Decide().action == ClusterAction::kSend);
  c.round.startup = true;
  CHECK(c.Decide().action == ClusterAction::kDefer);
  c.round.startup = false;
  c.round.bulk = true;
  auto d = c.Decide();
  CHECK(d.action == ClusterAction::kDefer);
  CHECK(d.bulk_change);  // stays bulk while deferred
}

TEST_CASE(
    "cluster decision: a request is processed once the status and, for a full reapply, "
    "the lease show it") {
  Cluster c(2, 1);
  c.Outstanding(2, 1min, amqp::Lane::kChange);
  CHECK_FALSE(RequestProcessed(c.outstanding, c.view));
  c.status.status.sync_sets = {testing::SyncStatusEntry("a", 2)};
  c.Report();
  CHECK(RequestProcessed(c.outstanding, c.view));
  c.outstanding.full_reapply = true;
  c.outstanding.published_wall = c.clock.WallNow() + 2s;
  CHECK_FALSE(RequestProcessed(c.outstanding, c.view));  // the lease predates the publish
  c.view.lease_renewal = std::chrono::floor<std::chrono::seconds>(c.clock.WallNow() + 2s);
  CHECK(RequestProcessed(c.outstanding, c.view));
  c.view.lease_renewal.reset();
  CHECK_FALSE(RequestProcessed(c.outstanding, c.view));
}

TEST_CASE("cluster decision: reapply schedule and the Secrets a new cluster is assumed to run") {
  Cluster c;
  auto next = NextReapply(kKey, c.view, c.policy.reapply);
  REQUIRE(next.has_value());
  CHECK(*next == ReapplyDueAt(kKey, c.view.lease_renewal, c.policy.reapply));
  c.view.desired.skip_reason = "paused";
  CHECK_FALSE(NextReapply(kKey, c.view, c.policy.reapply).has_value());
  c.view.desired.skip_reason.clear();
  c.view.cd = nullptr;
  CHECK_FALSE(NextReapply(kKey, c.view, c.policy.reapply).has_value());

  Cluster s;
  CHECK(AssumedAppliedSecrets(s.view) == s.view.secrets);  // nothing known written
  s.view.secrets_written_at = s.clock.WallNow() - 1h;
  CHECK(AssumedAppliedSecrets(s.view) == s.view.secrets);  // written before the last reapply
  s.view.secrets_written_at = s.clock.WallNow() + 1h;
  CHECK(AssumedAppliedSecrets(s.view).empty());  // written after it: not applied yet
}

TEST_CASE("cluster decision: the request names the cluster, its revision and the reason's text") {
  Cluster c(2);
  c.view.seen.sync_sets = "42";
  c.view.kubeconfig_version = "7";
  auto d = c.Decide();
  SyncRequest r = RequestFor(kKey, c.view.desired.revision, c.view.seen, c.view.kubeconfig_version,
                             d, c.clock.WallNow());
  CHECK(r.cluster_namespace == "c1");
  CHECK(r.cluster_name == "c1");
  CHECK(r.revision == "rev-2");
  CHECK(r.reason == "generation-changed");
  CHECK(r.lane == amqp::Lane::kChange);
  CHECK(r.seen.sync_sets == "42");
  CHECK(r.kubeconfig_version == "7");
  CHECK(r.enqueued_at == FormatRfc3339Millis(c.clock.WallNow()));
}

}  // namespace cluster_decision_test
