#include <doctest/doctest.h>

#include <prometheus/registry.h>

#include "common/amqp/fake_session.h"
#include "common/amqp/syncbus_topology.h"
#include "common/fake_clock.h"
#include "common/sync_message.h"
#include "common/time_format.h"
#include "publisher/publisher.h"

using namespace syncbus;
using namespace syncbus::publisher;
using namespace std::chrono_literals;

namespace {

Json Cd(const std::string& name, Json labels = Json::object()) {
  return {{"metadata", {{"name", name}, {"namespace", name}, {"uid", "u-" + name}, {"labels", labels}}},
          {"spec", {{"installed", true}, {"clusterMetadata", {{"adminKubeconfigSecretRef", {{"name", "k"}}}}}}}};
}

Json Sss(const std::string& name, int gen, Json match = Json{{"fleet", "a"}}) {
  return {{"metadata", {{"name", name}, {"generation", gen}}},
          {"spec", {{"clusterDeploymentSelector", {{"matchLabels", match}}}}}};
}

Json Cs(const std::string& name, const std::string& set, int gen, const char* result = "Success") {
  return {{"metadata", {{"name", name}, {"namespace", name}}},
          {"status", {{"selectorSyncSets", Json::array({{{"name", set}, {"observedGeneration", gen},
                                                          {"result", result},
                                                          {"lastTransitionTime", "2026-01-01T00:00:00Z"}}})}}}};
}

Json Lease(const std::string& name, WallTime t) {
  return {{"metadata", {{"name", name}, {"namespace", name}}}, {"spec", {{"renewTime", FormatRfc3339(t)}}}};
}

struct Fixture {
  FakeClock clock;
  amqp::FakeBroker broker{clock};
  amqp::FakeSession session{broker, "publisher"};
  prometheus::Registry registry;
  HubCache cache;
  PublisherOptions options;
  std::unique_ptr<Publisher> publisher;

  Fixture() {
    REQUIRE(session.Connect().ok());
    REQUIRE(session.Declare(amqp::SyncbusTopology()).ok());
    options.max_publish_rate = 1000;
    for (HubKind k : {HubKind::kClusterDeployment, HubKind::kSyncSet, HubKind::kSelectorSyncSet,
                      HubKind::kClusterSync, HubKind::kClusterSyncLease}) {
      cache.Replace(k, {});
    }
  }
  Publisher& pub() {
    if (!publisher) publisher = std::make_unique<Publisher>(options, cache, session, clock, registry);
    return *publisher;
  }
  std::vector<SyncRequest> Queue(amqp::Lane lane) {
    std::vector<SyncRequest> out;
    for (const auto& m : broker.ReadyMessages(amqp::WorkQueueName(lane))) {
      auto r = DecodeSyncRequest(m.body);
      REQUIRE(r.ok());
      out.push_back(*r);
    }
    return out;
  }
  ReconcileStats Round(bool startup = false) {
    auto s = pub().Reconcile(cache.TakeDirty(0ms), startup);
    REQUIRE_MESSAGE(s.ok(), s.status().ToString());
    return *s;
  }
};

}  // namespace

TEST_CASE("startup enqueues only what is out of sync, on the resync lane") {
  Fixture f;
  f.cache.Replace(HubKind::kClusterDeployment, {Cd("a", {{"fleet", "a"}}), Cd("b", {{"fleet", "a"}}), Cd("c")});
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  f.cache.Replace(HubKind::kClusterSync, {Cs("a", "s", 1)});
  f.cache.Replace(HubKind::kClusterSyncLease, {Lease("a", f.clock.WallNow())});
  auto stats = f.Round(true);
  CHECK(stats.published == 1);   // b has no status; a is in sync; c has no sets
  auto q = f.Queue(amqp::Lane::kResync);
  REQUIRE(q.size() == 1);
  CHECK(q[0].cluster_name == "b");
  CHECK(q[0].reason == "startup");
  CHECK(f.Queue(amqp::Lane::kChange).empty());
}

TEST_CASE("a burst of edits while a request is outstanding sends nothing more (latest wins)") {
  Fixture f;
  f.cache.Replace(HubKind::kClusterDeployment, {Cd("a", {{"fleet", "a"}})});
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  f.cache.Replace(HubKind::kClusterSync, {Cs("a", "s", 1)});
  f.cache.Replace(HubKind::kClusterSyncLease, {Lease("a", f.clock.WallNow())});
  f.Round(true);
  for (int gen = 2; gen <= 51; ++gen) {
    f.cache.Upsert(HubKind::kSelectorSyncSet, Sss("s", gen));
    f.Round();
  }
  auto q = f.Queue(amqp::Lane::kChange);
  REQUIRE(q.size() == 1);   // 50 edits, one message
  CHECK(q[0].reason == "generation-changed");
  // The consumer processes it (status at the newest generation): nothing more is needed.
  f.cache.Upsert(HubKind::kClusterSync, Cs("a", "s", 51));
  CHECK(f.Round().published == 0);
  CHECK(f.pub().outstanding() == 0);
  // A further edit is sent again.
  f.cache.Upsert(HubKind::kSelectorSyncSet, Sss("s", 52));
  CHECK(f.Round().published == 1);
}

TEST_CASE("an outstanding request processed at an older generation lets the next one go") {
  Fixture f;
  f.cache.Replace(HubKind::kClusterDeployment, {Cd("a", {{"fleet", "a"}})});
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 2)});
  f.cache.Replace(HubKind::kClusterSync, {Cs("a", "s", 1)});
  f.cache.Replace(HubKind::kClusterSyncLease, {Lease("a", f.clock.WallNow())});
  f.Round();
  f.cache.Upsert(HubKind::kSelectorSyncSet, Sss("s", 3));
  CHECK(f.Round().coalesced == 1);
  // The status shows generation 2 processed: the request for generation 2 is done, 3 is needed.
  f.cache.Upsert(HubKind::kClusterSync, Cs("a", "s", 2));
  CHECK(f.Round().published == 1);
  CHECK(f.Queue(amqp::Lane::kChange).size() == 2);
}

TEST_CASE("selector fan-out and label changes moving clusters in and out") {
  Fixture f;
  std::vector<Json> cds;
  for (int i = 0; i < 20; ++i) cds.push_back(Cd("c" + std::to_string(i), {{"fleet", i < 15 ? "a" : "b"}}));
  f.cache.Replace(HubKind::kClusterDeployment, cds);
  f.Round(true);
  f.cache.Upsert(HubKind::kSelectorSyncSet, Sss("s", 1));
  CHECK(f.Round().published == 15);
  // c17 gets the label: it starts matching and is enqueued.
  f.cache.Upsert(HubKind::kClusterDeployment, Cd("c17", {{"fleet", "a"}}));
  auto stats = f.Round();
  CHECK(stats.published == 1);
  // c3 loses the label while it has a status entry for s: the set must be removed there.
  f.cache.Upsert(HubKind::kClusterSync, Cs("c3", "s", 1));
  f.cache.Upsert(HubKind::kClusterDeployment, Cd("c3", {{"fleet", "b"}}));
  f.Round();
  bool c3_enqueued = false;
  for (const auto& r : f.Queue(amqp::Lane::kChange)) c3_enqueued |= r.cluster_name == "c3" && r.reason == "set-removed";
  CHECK(c3_enqueued);
}

TEST_CASE("reapply comes due with the injected clock, on the resync lane with fullReapply") {
  Fixture f;
  f.options.reapply = {1h, 0.1};
  f.cache.Replace(HubKind::kClusterDeployment, {Cd("a", {{"fleet", "a"}})});
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  f.cache.Replace(HubKind::kClusterSync, {Cs("a", "s", 1)});
  f.cache.Replace(HubKind::kClusterSyncLease, {Lease("a", f.clock.WallNow())});
  CHECK(f.Round(true).published == 0);
  auto jitter = ReapplyJitter("a/a", f.options.reapply);
  f.clock.Advance(1h + jitter - 1s);
  CHECK(f.Round().published == 0);
  f.clock.Advance(2s);
  CHECK(f.Round().published == 1);   // nothing was dirty: the schedule found it
  auto q = f.Queue(amqp::Lane::kResync);
  REQUIRE(q.size() == 1);
  CHECK(q[0].full_reapply);
  CHECK(q[0].reason == "reapply-due");
}

TEST_CASE("rate limit and outstanding cap defer work without losing it") {
  Fixture f;
  f.options.max_publish_rate = 10;
  std::vector<Json> cds;
  for (int i = 0; i < 25; ++i) cds.push_back(Cd("c" + std::to_string(i), {{"fleet", "a"}}));
  f.cache.Replace(HubKind::kClusterDeployment, cds);
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  auto first = f.Round(true);
  CHECK(first.published == 10);
  CHECK(first.deferred == 15);
  CHECK(f.Round().published == 0);      // no time passed: no tokens
  f.clock.Advance(1s);
  CHECK(f.Round().published == 10);
  f.clock.Advance(1s);
  CHECK(f.Round().published == 5);
  CHECK(f.pub().pending() == 0);
  CHECK(f.Queue(amqp::Lane::kResync).size() + f.Queue(amqp::Lane::kChange).size() == 25);
}

TEST_CASE("a broker outage loses nothing: unconfirmed clusters are published after reconnecting") {
  Fixture f;
  f.cache.Replace(HubKind::kClusterDeployment, {Cd("a", {{"fleet", "a"}}), Cd("b", {{"fleet", "a"}})});
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  f.broker.SetAvailable(false);
  auto failed = f.pub().Reconcile(f.cache.AllClusterKeys(), true);
  CHECK_FALSE(failed.ok());
  CHECK(f.pub().pending() == 2);
  f.broker.SetAvailable(true);
  REQUIRE(f.session.Connect().ok());
  auto ok = f.pub().Reconcile({}, false);
  REQUIRE(ok.ok());
  CHECK(ok->published == 2);
}

TEST_CASE("a request outstanding longer than the timeout is re-sent") {
  Fixture f;
  f.options.outstanding_timeout = 10min;
  f.cache.Replace(HubKind::kClusterDeployment, {Cd("a", {{"fleet", "a"}})});
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  CHECK(f.Round(true).published == 1);
  f.clock.Advance(9min);
  CHECK(f.Round().published == 0);
  f.clock.Advance(2min);
  auto stats = f.Round();
  CHECK(stats.published == 1);
  auto q = f.Queue(amqp::Lane::kChange);
  REQUIRE(q.size() == 1);
  CHECK(q[0].reason == "resend");
}

TEST_CASE("a lapsed leader publishes nothing") {
  Fixture f;
  bool leader = false;
  f.options.may_publish = [&] { return leader; };
  f.cache.Replace(HubKind::kClusterDeployment, {Cd("a", {{"fleet", "a"}})});
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  auto r = f.pub().Reconcile(f.cache.AllClusterKeys(), true);
  CHECK(r.status().code() == Code::kCancelled);
  CHECK(f.Queue(amqp::Lane::kResync).empty());
  leader = true;
  CHECK(f.Round().published == 1);
}
