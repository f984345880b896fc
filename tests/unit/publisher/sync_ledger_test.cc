#include "publisher/sync_ledger.h"

#include <doctest/doctest.h>

#include "tests/fakes/common/fake_clock.h"

using namespace syncbus;
using namespace syncbus::publisher;
using namespace std::chrono_literals;

// Its own namespace: the unit tests of an area compile as one unity batch.
namespace sync_ledger_test {

ConfirmedRequest Confirmed(const std::string& revision, SteadyTime at, WallTime wall,
                           amqp::Lane lane = amqp::Lane::kChange, bool full_reapply = false) {
  ConfirmedRequest r;
  r.snapshot.revision = revision;
  r.secrets = {{"src/s", revision}};
  r.full_reapply = full_reapply;
  r.lane = lane;
  r.confirmed_at = at;
  r.sent_wall = wall;
  return r;
}

TEST_CASE("ledger: reapplies fall due in time order and leave the schedule") {
  FakeClock clock;
  SyncLedger ledger;
  WallTime now = clock.WallNow();
  ledger.ScheduleReapply("a/a", now + 2h);
  ledger.ScheduleReapply("b/b", now + 1h);
  ledger.ScheduleReapply("c/c", now + 3h);
  ledger.ScheduleReapply("c/c", std::nullopt);  // skipped now: off the schedule
  ledger.ScheduleReapply("a/a", now + 90min);   // rescheduled: the old time is gone
  CHECK(ledger.TakeDue(now + 59min, clock.Now(), 30min).empty());
  CHECK(ledger.TakeDue(now + 2h, clock.Now(), 30min) == std::vector<std::string>{"b/b", "a/a"});
  CHECK(ledger.TakeDue(now + 4h, clock.Now(), 30min).empty());  // taken once
}

TEST_CASE("ledger: reapplies due at the same time fall due by name, each once") {
  FakeClock clock;
  SyncLedger ledger;
  WallTime now = clock.WallNow();
  for (const std::string key : {"z/z", "b/b", "y/y"}) ledger.ScheduleReapply(key, now + 1h);
  ledger.ScheduleReapply("b/b", std::nullopt);
  CHECK(ledger.TakeDue(now + 1h, clock.Now(), 30min) == std::vector<std::string>{"y/y", "z/z"});
  // Taken off the schedule, a cluster can be scheduled again.
  ledger.ScheduleReapply("y/y", now + 2h);
  CHECK(ledger.TakeDue(now + 3h, clock.Now(), 30min) == std::vector<std::string>{"y/y"});
}

TEST_CASE("ledger: requests outstanding for the timeout or longer are due again") {
  FakeClock clock;
  SyncLedger ledger;
  ledger.RecordConfirmed("a/a", Confirmed("r1", clock.Now(), clock.WallNow()));
  clock.Advance(10min);
  ledger.RecordConfirmed("b/b", Confirmed("r1", clock.Now(), clock.WallNow()));
  CHECK(ledger.TakeDue(clock.WallNow(), clock.Now(), 10min) == std::vector<std::string>{"a/a"});
  // Still outstanding: due again in the next round too.
  CHECK(ledger.TakeDue(clock.WallNow(), clock.Now(), 10min) == std::vector<std::string>{"a/a"});
}

TEST_CASE("ledger: each request is due once its own timeout has passed, whenever it came") {
  FakeClock clock;
  SyncLedger ledger;
  auto due = [&] { return ledger.TakeDue(clock.WallNow(), clock.Now(), 10min); };
  ledger.RecordConfirmed("a/a", Confirmed("r1", clock.Now(), clock.WallNow()));
  CHECK(due().empty());
  clock.Advance(5min);
  ledger.RecordConfirmed("b/b", Confirmed("r1", clock.Now(), clock.WallNow()));
  CHECK(due().empty());
  clock.Advance(5min);
  CHECK(due() == std::vector<std::string>{"a/a"});
  clock.Advance(5min);
  CHECK(due() == std::vector<std::string>{"a/a", "b/b"});
  ledger.MarkProcessed("a/a");
  ledger.MarkProcessed("b/b");
  CHECK(due().empty());
  // The first request after none was outstanding.
  ledger.RecordConfirmed("c/c", Confirmed("r1", clock.Now(), clock.WallNow()));
  clock.Advance(9min);
  CHECK(due().empty());
  clock.Advance(1min);
  CHECK(due() == std::vector<std::string>{"c/c"});
  // A shorter timeout applies at once.
  ledger.RecordConfirmed("d/d", Confirmed("r1", clock.Now(), clock.WallNow()));
  ledger.DropOutstanding("c/c");
  CHECK(due().empty());
  clock.Advance(1min);
  CHECK(ledger.TakeDue(clock.WallNow(), clock.Now(), 1min) == std::vector<std::string>{"d/d"});
  CHECK(ledger.OldestFirstPublished(clock.Now()) == clock.Now() - 1min);
}

TEST_CASE("ledger: pending clusters remember whether they waited as start-up or bulk work") {
  SyncLedger ledger;
  ledger.KeepPending("a/a", {.startup = true, .bulk = false});
  ledger.KeepPending("b/b", {.startup = false, .bulk = true});
  ledger.KeepPending("c/c", {});
  CHECK(ledger.pending() == std::set<std::string>{"a/a", "b/b", "c/c"});
  auto a = ledger.TakePending("a/a");
  CHECK(a.startup);
  CHECK_FALSE(a.bulk);
  auto b = ledger.TakePending("b/b");
  CHECK(b.bulk);
  CHECK_FALSE(b.startup);
  auto c = ledger.TakePending("c/c");
  CHECK_FALSE((c.startup || c.bulk));
  CHECK(ledger.pending().empty());
  CHECK_FALSE(ledger.TakePending("a/a").startup);  // taken: forgotten
}

TEST_CASE("ledger: a re-send keeps the first publish, and a promotion keeps the resync's duties") {
  FakeClock clock;
  SyncLedger ledger;
  const SteadyTime first = clock.Now();
  const WallTime first_wall = clock.WallNow();
  CHECK(ledger.RecordConfirmed("a/a", Confirmed("r1", first, first_wall, amqp::Lane::kResync,
                                                /*full_reapply=*/true)) ==
        SyncLedger::Recorded::kFirst);
  const OutstandingRequest* o = ledger.outstanding("a/a");
  REQUIRE(o != nullptr);
  CHECK(o->resync_queued);
  CHECK_FALSE(o->promoted);
  CHECK(ledger.last_published("a/a") == first);

  clock.Advance(1min);
  ConfirmedRequest change = Confirmed("r2", clock.Now(), clock.WallNow());
  change.overtaken = *o;
  CHECK(ledger.RecordConfirmed("a/a", std::move(change)) == SyncLedger::Recorded::kPromoted);
  o = ledger.outstanding("a/a");
  REQUIRE(o != nullptr);
  CHECK(o->snapshot.revision == "r2");
  CHECK(o->promoted);
  CHECK(o->resync_queued);
  CHECK(o->full_reapply);                  // the queued resync still reapplies everything
  CHECK(o->published_wall == first_wall);  // and its lease renewal counts from its publish
  CHECK(o->first_published == first);
  CHECK(o->published_at == clock.Now());

  clock.Advance(1min);
  CHECK(ledger.RecordConfirmed("a/a", Confirmed("r3", clock.Now(), clock.WallNow())) ==
        SyncLedger::Recorded::kResent);
  CHECK(ledger.outstanding("a/a")->first_published == first);
  CHECK(ledger.OldestFirstPublished(clock.Now()) == first);
  CHECK(ledger.outstanding_count() == 1);
}

TEST_CASE("ledger: a processed full reapply records the Secrets it applied") {
  FakeClock clock;
  SyncLedger ledger;
  CHECK(ledger.applied_secrets("a/a") == nullptr);
  CHECK(ledger.AssumeAppliedSecrets("a/a", {{"src/s", "r0"}}) ==
        hive::SecretVersions{{"src/s", "r0"}});
  ledger.RecordConfirmed("a/a", Confirmed("r1", clock.Now(), clock.WallNow()));
  ledger.MarkProcessed("a/a");  // not a full reapply: the Secrets stay as they were
  CHECK(*ledger.applied_secrets("a/a") == hive::SecretVersions{{"src/s", "r0"}});
  CHECK(ledger.outstanding("a/a") == nullptr);
  ledger.RecordConfirmed("a/a", Confirmed("r2", clock.Now(), clock.WallNow(), amqp::Lane::kChange,
                                          /*full_reapply=*/true));
  ledger.MarkProcessed("a/a");
  CHECK(*ledger.applied_secrets("a/a") == hive::SecretVersions{{"src/s", "r2"}});
}

TEST_CASE("ledger: a deleted cluster is forgotten, and Clear forgets everything") {
  FakeClock clock;
  SyncLedger ledger;
  for (const std::string key : {"a/a", "b/b"}) {
    ledger.RecordConfirmed(key, Confirmed("r1", clock.Now(), clock.WallNow()));
    ledger.AssumeAppliedSecrets(key, {});
    ledger.ScheduleReapply(key, clock.WallNow() + 1h);
  }
  ledger.KeepPending("b/b", {.startup = true, .bulk = true});
  ledger.Forget("a/a");
  CHECK(ledger.outstanding("a/a") == nullptr);
  CHECK_FALSE(ledger.last_published("a/a").has_value());
  CHECK(ledger.applied_secrets("a/a") == nullptr);
  CHECK(ledger.TakeDue(clock.WallNow() + 2h, clock.Now(), 1h) == std::vector<std::string>{"b/b"});
  ledger.ScheduleReapply("b/b", clock.WallNow() + 1h);
  ledger.Clear();
  CHECK(ledger.outstanding_count() == 0);
  CHECK(ledger.pending().empty());
  CHECK(ledger.applied_secrets("b/b") == nullptr);
  CHECK(ledger.TakeDue(clock.WallNow() + 2h, clock.Now(), 0ms).empty());
  CHECK_FALSE(ledger.TakePending("b/b").startup);
}

TEST_CASE("ledger: clusters are counted by their state at their last evaluation") {
  SyncLedger ledger;
  ledger.SetState("a/a", ClusterState::kPending);
  ledger.SetState("b/b", ClusterState::kPending);
  ledger.SetState("a/a", ClusterState::kInSync);
  CHECK(ledger.state_count(ClusterState::kPending) == 1);
  CHECK(ledger.state_count(ClusterState::kInSync) == 1);
  ledger.Forget("a/a");  // deleted
  CHECK(ledger.state_count(ClusterState::kInSync) == 0);
  ledger.SetState("a/a", ClusterState::kSkipped);
  CHECK(ledger.state_count(ClusterState::kSkipped) == 1);
  ledger.Clear();
  for (ClusterState state : kClusterStates) CHECK(ledger.state_count(state) == 0);
}

TEST_CASE("ledger: a cluster's outstanding request lives and dies with its record") {
  FakeClock clock;
  SyncLedger ledger;
  const SteadyTime first = clock.Now();
  ledger.SetState("a/a", ClusterState::kPending);
  ledger.ScheduleReapply("a/a", clock.WallNow() + 2h);
  ledger.RecordConfirmed("a/a", Confirmed("r1", first, clock.WallNow()));
  clock.Advance(1min);
  ledger.RecordConfirmed("b/b", Confirmed("r1", clock.Now(), clock.WallNow()));
  ledger.RecordConfirmed("c/c", Confirmed("r1", clock.Now(), clock.WallNow()));
  CHECK(ledger.outstanding_count() == 3);
  CHECK(ledger.OldestFirstPublished(clock.Now()) == first);

  // Processed: the request goes, what else the record holds stays.
  ledger.MarkProcessed("a/a");
  CHECK(ledger.outstanding("a/a") == nullptr);
  CHECK(ledger.outstanding_count() == 2);
  CHECK(ledger.OldestFirstPublished(clock.Now()) == clock.Now());
  CHECK(ledger.last_published("a/a") == first);
  CHECK(ledger.state_count(ClusterState::kPending) == 1);
  ledger.MarkProcessed("a/a");  // twice: nothing more to forget
  CHECK(ledger.outstanding_count() == 2);

  // Dropped and forgotten requests leave the count and the timeouts too.
  ledger.DropOutstanding("b/b");
  CHECK(ledger.last_published("b/b").has_value());
  ledger.Forget("c/c");
  CHECK(ledger.outstanding_count() == 0);
  clock.Advance(1h);
  CHECK(ledger.TakeDue(clock.WallNow(), clock.Now(), 10min).empty());
  CHECK(ledger.TakeDue(clock.WallNow() + 1h, clock.Now(), 10min) ==
        std::vector<std::string>{"a/a"});

  // A new request of a cluster with a record is counted and times out like any other.
  ledger.RecordConfirmed("a/a", Confirmed("r2", clock.Now(), clock.WallNow()));
  CHECK(ledger.outstanding_count() == 1);
  CHECK(ledger.outstanding("a/a")->first_published == clock.Now());
  clock.Advance(10min);
  CHECK(ledger.TakeDue(clock.WallNow(), clock.Now(), 10min) == std::vector<std::string>{"a/a"});
}

}  // namespace sync_ledger_test
