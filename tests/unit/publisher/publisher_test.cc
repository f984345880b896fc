#include "publisher/publisher.h"

#include <doctest/doctest.h>
#include <prometheus/registry.h>

#include "common/bus/config.h"
#include "common/bus/sync_message.h"
#include "common/bus/topology.h"
#include "common/time_format.h"
#include "tests/fakes/common/amqp/fake_session.h"
#include "tests/fakes/common/fake_clock.h"

using namespace syncbus;
using namespace syncbus::publisher;
using namespace std::chrono_literals;

namespace {

// Installed and reachable, as Hive's controllers mark a running cluster.
Json Cd(const std::string& name, Json labels = Json::object()) {
  return {
      {"metadata", {{"name", name}, {"namespace", name}, {"uid", "u-" + name}, {"labels", labels}}},
      {"spec",
       {{"installed", true}, {"clusterMetadata", {{"adminKubeconfigSecretRef", {{"name", "k"}}}}}}},
      {"status", {{"conditions", Json::array({{{"type", "Unreachable"}, {"status", "False"}}})}}}};
}

Json Sss(const std::string& name, int gen, Json match = Json{{"fleet", "a"}}) {
  return {{"metadata", {{"name", name}, {"generation", gen}}},
          {"spec", {{"clusterDeploymentSelector", {{"matchLabels", match}}}}}};
}

// A status as the consumer writes it, with the Failed condition its entry calls for.
Json Cs(const std::string& name, const std::string& set, int gen, const char* result = "Success") {
  bool ok = std::string(result) == "Success";
  return {
      {"metadata", {{"name", name}, {"namespace", name}}},
      {"status",
       {{"selectorSyncSets", Json::array({{{"name", set},
                                           {"observedGeneration", gen},
                                           {"result", result},
                                           {"lastTransitionTime", "2026-01-01T00:00:00Z"}}})},
        {"conditions",
         Json::array(
             {{{"type", "Failed"},
               {"status", ok ? "False" : "True"},
               {"reason", ok ? "Success" : "Failure"},
               {"message", ok ? "All SyncSets and SelectorSyncSets have been applied to the cluster"
                              : "SelectorSyncSet " + set + " is failing"}}})}}}};
}

// The ClusterSync of a cluster no set applies to.
Json CsNoSets(const std::string& name) {
  return {{"metadata", {{"name", name}, {"namespace", name}}},
          {"status",
           {{"conditions",
             Json::array(
                 {{{"type", "Failed"},
                   {"status", "False"},
                   {"reason", "Success"},
                   {"message",
                    "All SyncSets and SelectorSyncSets have been applied to the cluster"}}})}}}};
}

Json Lease(const std::string& name, WallTime t) {
  return {{"metadata", {{"name", name}, {"namespace", name}}},
          {"spec", {{"renewTime", FormatRfc3339(t)}}}};
}

// A SelectorSyncSet whose secretMapping reads Secret src/<secret>.
Json SssWithSecret(const std::string& name, int gen, const std::string& secret) {
  Json sss = Sss(name, gen);
  sss["spec"]["secretMappings"] =
      Json::array({{{"sourceRef", {{"name", secret}, {"namespace", "src"}}},
                    {"targetRef", {{"name", secret}, {"namespace", "dst"}}}}});
  return sss;
}

Json Secret(const std::string& name, const std::string& rv, WallTime written) {
  return {{"metadata",
           {{"name", name},
            {"namespace", "src"},
            {"resourceVersion", rv},
            {"creationTimestamp", "2025-01-01T00:00:00Z"},
            {"managedFields",
             Json::array({{{"manager", "kubectl"}, {"time", FormatRfc3339(written)}}})}}},
          {"data", {{"k", "dg=="}}}};
}

// SyncSet <name> in namespace <cluster>, for that one cluster.
Json Ss(const std::string& cluster, const std::string& name, int gen) {
  return {{"metadata", {{"name", name}, {"namespace", cluster}, {"generation", gen}}},
          {"spec", {{"clusterDeploymentRefs", Json::array({{{"name", cluster}}})}}}};
}

Json CdWith(const std::string& name, Json labels, Json annotations, bool installed = true) {
  Json cd = Cd(name, std::move(labels));
  cd["metadata"]["annotations"] = std::move(annotations);
  cd["spec"]["installed"] = installed;
  return cd;
}

struct Fixture {
  FakeClock clock;
  amqp::FakeBroker broker{clock};
  amqp::FakeSession session{broker, "publisher"};
  prometheus::Registry registry;
  HubCache cache;
  PublisherOptions options;
  std::unique_ptr<Publisher> publisher;

  explicit Fixture(amqp::TopologyOptions topology = {},
                   int bulk_edit_clusters = PublisherConfig{}.bulk_edit_clusters)
      : cache(static_cast<size_t>(bulk_edit_clusters)) {
    REQUIRE(session.Connect().ok());
    REQUIRE(session.Declare(amqp::SyncbusTopology(topology)).ok());
    broker.SetPolicies(amqp::SyncbusTopology(topology).policies);  // max-length
    options.max_publish_rate = 1000;
    for (HubKind k : {HubKind::kClusterDeployment, HubKind::kSyncSet, HubKind::kSelectorSyncSet,
                      HubKind::kClusterSync, HubKind::kClusterSyncLease, HubKind::kSecret}) {
      cache.Replace(k, {});
    }
  }
  Publisher& pub() {
    if (!publisher)
      publisher = std::make_unique<Publisher>(options, cache, session, clock, registry);
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
    DirtyEdits edits;
    std::vector<std::string> keys = cache.TakeDirty(0ms, &edits);
    auto s = pub().Reconcile(keys, startup, edits);
    REQUIRE_MESSAGE(s.ok(), s.status().ToString());
    return *s;
  }
};

}  // namespace

TEST_CASE("startup enqueues only what is out of sync, on the resync lane") {
  Fixture f;
  f.cache.Replace(HubKind::kClusterDeployment,
                  {Cd("a", {{"fleet", "a"}}), Cd("b", {{"fleet", "a"}}), Cd("c")});
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  f.cache.Replace(HubKind::kClusterSync, {Cs("a", "s", 1)});
  f.cache.Replace(HubKind::kClusterSyncLease, {Lease("a", f.clock.WallNow())});
  auto stats = f.Round(true);
  // b and c have no status (Hive keeps one for a cluster without sets too); a is in sync.
  CHECK(stats.published == 2);
  auto q = f.Queue(amqp::Lane::kResync);
  REQUIRE(q.size() == 2);
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
  REQUIRE(q.size() == 1);  // 50 edits, one message
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
  for (int i = 0; i < 20; ++i)
    cds.push_back(Cd("c" + std::to_string(i), {{"fleet", i < 15 ? "a" : "b"}}));
  f.cache.Replace(HubKind::kClusterDeployment, cds);
  f.Round(true);
  f.cache.Upsert(HubKind::kSelectorSyncSet, Sss("s", 1));
  CHECK(f.Round().published == 15);
  // c17 gets the label: it starts matching and is enqueued.
  f.cache.Upsert(HubKind::kClusterDeployment, Cd("c17", {{"fleet", "a"}}));
  auto stats = f.Round();
  CHECK(stats.published == 1);
  // c3 loses the label while it has a status entry for s: the set must be removed there.
  // (Its first request was a full reapply, as it had no lease: the consumer renewed the lease.)
  f.cache.Upsert(HubKind::kClusterSync, Cs("c3", "s", 1));
  f.cache.Upsert(HubKind::kClusterSyncLease, Lease("c3", f.clock.WallNow()));
  f.cache.Upsert(HubKind::kClusterDeployment, Cd("c3", {{"fleet", "b"}}));
  f.Round();
  bool c3_enqueued = false;
  for (const auto& r : f.Queue(amqp::Lane::kChange))
    c3_enqueued |= r.cluster_name == "c3" && r.reason == "set-removed";
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
  CHECK(f.Round().published == 1);  // nothing was dirty: the schedule found it
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
  CHECK(f.Round().published == 0);  // no time passed: no tokens
  f.clock.Advance(1s);
  CHECK(f.Round().published == 10);
  f.clock.Advance(1s);
  CHECK(f.Round().published == 5);
  CHECK(f.pub().pending() == 0);
  // Start-up work deferred by the rate limit is still start-up work: all of it on the resync
  // lane, none flooding the change lane.
  auto resync = f.Queue(amqp::Lane::kResync);
  CHECK(resync.size() == 25);
  for (const auto& r : resync) CHECK(r.reason == "startup");
  CHECK(f.Queue(amqp::Lane::kChange).empty());
}

TEST_CASE(
    "an edit made while thousands of clusters wait as start-up work goes out in the next round, "
    "and every waiting cluster goes out in turn") {
  Fixture f;
  f.options.max_publish_rate = 1e6;
  f.options.round_clusters = 1000;
  constexpr int kClusters = 3500;
  auto name = [](int i) {
    std::string digits = std::to_string(i);
    return "c" + std::string(4 - digits.size(), '0') + digits;  // the keys' order is the fleet's
  };
  std::vector<Json> cds;
  for (int i = 0; i < kClusters; ++i) cds.push_back(Cd(name(i), {{"fleet", "a"}}));
  f.cache.Replace(HubKind::kClusterDeployment, cds);
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  // As the app starts: the first round over every cluster, which the initial lists also left
  // dirty for the next one.
  auto first = f.pub().Reconcile(f.cache.AllClusterKeys(), true);
  REQUIRE(first.ok());
  CHECK(first->evaluated == 1000);
  CHECK(first->published == 1000);
  CHECK(first->more);  // only the round's size held the rest back: the next round comes at once
  CHECK(f.pub().pending() == kClusters - 1000);

  // The fleet's last cluster, the last in turn, is edited: it goes out in the very next round, on
  // the change lane, beside the next 1,000 in turn.
  f.cache.Upsert(HubKind::kClusterDeployment,
                 Cd(name(kClusters - 1), {{"fleet", "a"}, {"edited", "yes"}}));
  auto second = f.Round();
  CHECK(second.evaluated == 1001);
  CHECK(second.published == 1001);
  CHECK(second.more);
  auto change = f.Queue(amqp::Lane::kChange);
  REQUIRE(change.size() == 1);
  CHECK(change[0].cluster_name == name(kClusters - 1));
  CHECK(change[0].reason != "startup");

  // The others follow a round's size at a time, in turn, as start-up work (being dirty from the
  // lists made them no change). So do those the lists left dirty that went out already: they
  // come back in their turn, after the rest, and find their request outstanding.
  std::vector<size_t> evaluated;
  for (int round = 0; round < 10; ++round) {
    auto next = f.Round();
    evaluated.push_back(next.evaluated);
    if (!next.more) break;
  }
  CHECK(evaluated == std::vector<size_t>{1000, 1000, 499});
  CHECK(f.pub().pending() == 0);
  auto resync = f.Queue(amqp::Lane::kResync);
  REQUIRE(resync.size() == kClusters - 1);
  for (int i = 0; i < kClusters - 1; ++i) {
    CHECK(resync[i].cluster_name == name(i));
    CHECK(resync[i].reason == "startup");
  }
  CHECK(f.Round().evaluated == 0);  // nothing waits: a round looks at what changes
}

TEST_CASE("the turn goes round: a cluster left behind is taken after those after it") {
  Fixture f;
  f.options.round_clusters = 2;
  f.options.max_publish_rate = 2;  // burst two: the second round gets no token
  std::vector<Json> cds;
  for (const char* name : {"a", "b", "c", "d", "e"}) cds.push_back(Cd(name, {{"fleet", "a"}}));
  f.cache.Replace(HubKind::kClusterDeployment, cds);
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  auto first = f.Round(true);
  CHECK(first.published == 2);  // a, b
  CHECK(first.more);
  auto starved = f.Round();  // c, d: no token left
  CHECK(starved.evaluated == 2);
  CHECK(starved.deferred == 2);
  CHECK_FALSE(starved.more);  // held back by the rate: no round at once
  f.clock.Advance(1s);
  auto after = f.Round();  // e, then round to c; d waits for the next round
  CHECK(after.published == 2);
  f.clock.Advance(1s);
  CHECK(f.Round().published == 1);
  std::vector<std::string> order;
  for (const auto& r : f.Queue(amqp::Lane::kResync)) order.push_back(r.cluster_name);
  CHECK(order == std::vector<std::string>{"a", "b", "c", "e", "d"});
}

TEST_CASE("a round held back by the outstanding cap leaves no more work for at once") {
  Fixture f;
  f.options.round_clusters = 2;
  f.options.max_outstanding = 2;
  std::vector<Json> cds;
  for (int i = 0; i < 6; ++i) cds.push_back(Cd("c" + std::to_string(i), {{"fleet", "a"}}));
  f.cache.Replace(HubKind::kClusterDeployment, cds);
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  f.cache.TakeDirty(0ms);
  auto first = f.pub().Reconcile(f.cache.AllClusterKeys(), true);
  REQUIRE(first.ok());
  CHECK(first->published == 2);
  CHECK(first->more);
  auto capped = f.Round();
  CHECK(capped.evaluated == 2);  // a round's size, not all four that wait
  CHECK(capped.deferred == 2);
  CHECK_FALSE(capped.more);
  CHECK(f.pub().pending() == 4);
}

TEST_CASE("a broker outage loses nothing: unconfirmed clusters are published after reconnecting") {
  Fixture f;
  f.cache.Replace(HubKind::kClusterDeployment,
                  {Cd("a", {{"fleet", "a"}}), Cd("b", {{"fleet", "a"}})});
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

TEST_CASE("the oldest outstanding request's age counts from its first publish, re-sends included") {
  Fixture f;
  f.options.outstanding_timeout = 10min;
  auto oldest = [&f] {
    for (const auto& fam : f.registry.Collect()) {
      if (fam.name == "syncbus_publisher_oldest_outstanding_seconds")
        return fam.metric[0].gauge.value;
    }
    FAIL("syncbus_publisher_oldest_outstanding_seconds is not registered");
    return -1.0;
  };
  f.cache.Replace(HubKind::kClusterDeployment,
                  {Cd("a", {{"fleet", "a"}}), Cd("b", {{"fleet", "a"}})});
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  CHECK(f.Round(true).published == 2);
  CHECK(oldest() == 0);
  f.clock.Advance(9min);
  f.Round();
  CHECK(oldest() == 540);
  f.clock.Advance(2min);
  CHECK(f.Round().published == 2);  // both re-sent: the age goes on
  CHECK(oldest() == 660);
  f.cache.Replace(HubKind::kClusterSync, {Cs("a", "s", 1), Cs("b", "s", 1)});
  f.cache.Replace(HubKind::kClusterSyncLease,
                  {Lease("a", f.clock.WallNow()), Lease("b", f.clock.WallNow())});
  f.clock.Advance(1min);
  f.Round();
  CHECK(f.pub().outstanding() == 0);
  CHECK(oldest() == 0);

  // A leader that steps down reports nothing outstanding.
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 2)});
  CHECK(f.Round().published == 2);
  f.clock.Advance(1min);
  f.Round();
  CHECK(oldest() == 60);
  f.pub().Reset();
  CHECK(oldest() == 0);
  for (const auto& fam : f.registry.Collect()) {
    if (fam.name != "syncbus_publisher_outstanding" && fam.name != "syncbus_publisher_clusters")
      continue;
    for (const auto& m : fam.metric) CHECK_MESSAGE(m.gauge.value == 0, fam.name);
  }
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

TEST_CASE("a source Secret change is a change: full reapply on the change lane, until processed") {
  Fixture f;
  f.cache.Replace(HubKind::kClusterDeployment,
                  {Cd("a", {{"fleet", "a"}}), Cd("b", {{"fleet", "b"}})});
  f.cache.Replace(HubKind::kSelectorSyncSet, {SssWithSecret("s", 1, "pull")});
  f.cache.Replace(HubKind::kSecret, {Secret("pull", "10", f.clock.WallNow() - 1h)});
  f.cache.Replace(HubKind::kClusterSync, {Cs("a", "s", 1), CsNoSets("b")});
  f.cache.Replace(HubKind::kClusterSyncLease,
                  {Lease("a", f.clock.WallNow()), Lease("b", f.clock.WallNow())});
  CHECK(f.Round(true).published == 0);  // in sync, Secret older than the last full reapply

  f.clock.Advance(1min);
  f.cache.Upsert(HubKind::kSecret, Secret("pull", "11", f.clock.WallNow()));
  auto stats = f.Round();
  CHECK(stats.evaluated == 1);  // only the cluster whose set reads it
  CHECK(stats.published == 1);
  auto q = f.Queue(amqp::Lane::kChange);
  REQUIRE(q.size() == 1);
  CHECK(q[0].cluster_name == "a");
  CHECK(q[0].reason == "secret-changed");
  CHECK(q[0].full_reapply);
  // More writes while it is outstanding coalesce.
  f.cache.Upsert(HubKind::kSecret, Secret("pull", "12", f.clock.WallNow()));
  CHECK(f.Round().coalesced == 1);
  // The consumer's full reapply renews the lease: processed, but version 12 came after the
  // published snapshot (11), so one more request goes out; once that is processed, nothing.
  f.clock.Advance(5s);
  f.cache.Upsert(HubKind::kClusterSyncLease, Lease("a", f.clock.WallNow()));
  CHECK(f.Round().published == 1);
  f.clock.Advance(5s);
  f.cache.Upsert(HubKind::kClusterSyncLease, Lease("a", f.clock.WallNow()));
  CHECK(f.Round().published == 0);
  CHECK(f.pub().outstanding() == 0);
  CHECK(f.Queue(amqp::Lane::kChange).size() == 2);
  // A Secret nobody maps changes nothing.
  f.cache.Upsert(HubKind::kSecret, Secret("other", "1", f.clock.WallNow()));
  CHECK(f.Round().evaluated == 0);
}

TEST_CASE(
    "a Secret written after the last full reapply while no publisher ran is reapplied at startup") {
  Fixture f;
  f.cache.Replace(HubKind::kClusterDeployment,
                  {Cd("a", {{"fleet", "a"}}), Cd("b", {{"fleet", "a"}})});
  f.cache.Replace(HubKind::kSelectorSyncSet, {SssWithSecret("s", 1, "pull")});
  f.cache.Replace(HubKind::kSecret, {Secret("pull", "10", f.clock.WallNow() - 10min)});
  f.cache.Replace(HubKind::kClusterSync, {Cs("a", "s", 1), Cs("b", "s", 1)});
  f.cache.Replace(HubKind::kClusterSyncLease,
                  {Lease("a", f.clock.WallNow() - 20min), Lease("b", f.clock.WallNow() - 5min)});
  CHECK(f.Round(true).published == 1);
  auto q = f.Queue(amqp::Lane::kResync);
  REQUIRE(q.size() == 1);
  CHECK(q[0].cluster_name == "a");  // b's last full reapply came after the write
  CHECK(q[0].full_reapply);
}

TEST_CASE("a skipped cluster that becomes eligible is enqueued at once") {
  Fixture f;
  Json pause = {{"hive.openshift.io/syncset-pause", "true"}};
  f.cache.Replace(
      HubKind::kClusterDeployment,
      {CdWith("a", {{"fleet", "a"}}, pause), CdWith("b", {{"fleet", "a"}}, Json::object(), false)});
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  auto start = f.Round(true);
  CHECK(start.published == 0);
  CHECK(start.skipped == 2);
  f.cache.Upsert(HubKind::kSelectorSyncSet, Sss("s", 2));  // edits while skipped: nothing
  CHECK(f.Round().published == 0);
  f.cache.Upsert(HubKind::kClusterDeployment, CdWith("a", {{"fleet", "a"}}, Json::object()));
  f.cache.Upsert(HubKind::kClusterDeployment, CdWith("b", {{"fleet", "a"}}, Json::object(), true));
  auto stats = f.Round();  // the very next round, no time passing
  CHECK(stats.published == 2);
  auto q = f.Queue(amqp::Lane::kChange);
  REQUIRE(q.size() == 2);
  CHECK(q[0].reason == "missing-status");
}

TEST_CASE(
    "publishes refused by a full work queue keep the cluster pending, are counted, and go out "
    "later") {
  amqp::TopologyOptions topology;
  topology.max_length = 3;
  Fixture f(topology);
  std::vector<Json> cds;
  for (int i = 0; i < 6; ++i) cds.push_back(Cd("c" + std::to_string(i), {{"fleet", "a"}}));
  f.cache.Replace(HubKind::kClusterDeployment, cds);
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  auto first = f.pub().Reconcile(f.cache.AllClusterKeys(), true);
  REQUIRE_MESSAGE(first.ok(), first.status().ToString());  // not a broker failure
  CHECK(first->rejected > 0);
  CHECK(first->published + first->rejected == 6);
  CHECK(f.session.connected());  // the connection was kept
  CHECK(f.pub().pending() == first->rejected);
  double rejected_metric = 0;
  for (const auto& fam : f.registry.Collect()) {
    if (fam.name == "syncbus_publisher_rejected_total")
      rejected_metric = fam.metric[0].counter.value;
  }
  CHECK(rejected_metric == static_cast<double>(first->rejected));
  // Held off: nothing is tried at once.
  CHECK(f.Round().published == 0);
  // Consumers drain the queue; after the hold-off the pending clusters go out.
  size_t drained = 0;
  while (true) {
    auto d = f.session.Get(amqp::WorkQueueName(amqp::Lane::kResync));
    REQUIRE(d.ok());
    if (!d->has_value()) break;
    REQUIRE(f.session.Ack((*d)->delivery_tag).ok());
    ++drained;
  }
  CHECK(drained == first->published);
  f.clock.Advance(1s);
  auto second = f.Round();
  CHECK(second.published == first->rejected);
  CHECK(f.pub().pending() == 0);
}

TEST_CASE("while publishes keep being refused the publisher tries again at least every 2 s") {
  // A nack may be a queue without a leader (a RabbitMQ node died): once the queue is back, the
  // pending clusters must go out within seconds, however long the refusals lasted.
  amqp::TopologyOptions topology;
  topology.max_length = 1;
  Fixture f(topology);
  std::vector<Json> cds;
  for (int i = 0; i < 6; ++i) cds.push_back(Cd("c" + std::to_string(i), {{"fleet", "a"}}));
  f.cache.Replace(HubKind::kClusterDeployment, cds);
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  auto first = f.pub().Reconcile(f.cache.AllClusterKeys(), true);
  REQUIRE(first.ok());
  REQUIRE(first->rejected > 0);
  // Refusals that last end a round with an error after 3 s, then 6 s, 12 s... (the caller opens
  // a new connection: a stale channel may refuse for ever); the refused clusters stay pending.
  std::vector<int> renewed_at;
  for (int round = 1; round <= 12; ++round) {
    f.clock.Advance(2s);
    auto stats = f.pub().Reconcile({}, false);
    if (!stats.ok()) {
      CHECK(stats.status().message().find("opening a new connection") != std::string::npos);
      CHECK(f.pub().pending() == static_cast<size_t>(first->rejected));
      renewed_at.push_back(2 * round);
      f.session.Close();
      REQUIRE(f.session.Connect().ok());
      continue;
    }
    CHECK_MESSAGE(stats->rejected == first->rejected,
                  "round " << round << ": the refused clusters were not tried again");
  }
  CHECK(renewed_at == std::vector<int>{4, 12});
}

TEST_CASE("each confirmed request is traced with why it was sent, its lane and its message id") {
  Fixture f;
  TraceRecorder trace("publisher-1", f.registry);
  f.options.trace = &trace;
  f.cache.Replace(HubKind::kClusterDeployment,
                  {Cd("a", {{"fleet", "a"}}), Cd("b", {{"fleet", "a"}})});
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  CHECK(f.Round(true).published == 2);
  auto requests = f.broker.ReadyMessages(amqp::WorkQueueName(amqp::Lane::kResync));
  REQUIRE(requests.size() == 2);
  CHECK(trace.buffered() == 2);  // recorded once confirmed; the daemon's TraceFlusher publishes
  REQUIRE(trace.Flush(f.session).ok());
  auto traced = f.broker.ReadyMessages(amqp::kTraceQueue);
  REQUIRE(traced.size() == 1);  // one batch
  auto decoded = DecodeTraceMessage(traced[0].body);
  REQUIRE(decoded.ok());
  REQUIRE(decoded->events.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    const TraceEvent* e = &decoded->events[i];
    CHECK(e->step == TraceStep::kPublished);
    CHECK(e->request == requests[i].message_id);
    CHECK(e->cluster == requests[i].headers[kClusterHeader].get<std::string>());
    CHECK(e->reason == "startup");
    CHECK(e->lane == "resync");
    CHECK(e->actor == "publisher-1");
    CHECK(e->decided_at == f.clock.WallNow());
  }
}

TEST_CASE("a request carries how far the cache had got: its lists and its last events") {
  Fixture f;
  f.cache.Replace(HubKind::kClusterDeployment, {Cd("a", {{"fleet", "a"}})});
  for (HubKind k : {HubKind::kClusterDeployment, HubKind::kSyncSet, HubKind::kSelectorSyncSet}) {
    f.cache.Listed(k, "100");
  }
  Json edited = Sss("s", 1);
  edited["metadata"]["resourceVersion"] = "120";
  f.cache.Upsert(HubKind::kSelectorSyncSet, edited);
  f.Round(true);
  auto q = f.Queue(amqp::Lane::kResync);
  REQUIRE(q.size() == 1);
  CHECK(q[0].seen == HubVersions{"100", "100", "120"});
}

TEST_CASE(
    "a request carries the version of the cluster's kubeconfig Secret, and a change of it alone "
    "sends nothing") {
  Fixture f;
  Json kubeconfig = Secret("k", "77", f.clock.WallNow());
  kubeconfig["metadata"]["namespace"] = "a";
  f.cache.Replace(HubKind::kSecret, {kubeconfig});
  f.cache.Replace(HubKind::kClusterDeployment,
                  {Cd("a", {{"fleet", "a"}}), Cd("b", {{"fleet", "a"}})});
  f.Round(true);
  auto q = f.Queue(amqp::Lane::kResync);
  REQUIRE(q.size() == 2);
  CHECK(q[0].cluster_name == "a");
  CHECK(q[0].kubeconfig_version == "77");
  // b's Secret is not on the hub, as far as the cache knows.
  CHECK(q[1].kubeconfig_version.empty());
  // Hive does not watch kubeconfig Secrets: a rotation is picked up by the cluster's next sync.
  kubeconfig["metadata"]["resourceVersion"] = "78";
  f.cache.Upsert(HubKind::kSecret, kubeconfig);
  CHECK(f.cache.TakeDirty(0ms).empty());
}

TEST_CASE("a change does not wait behind the resync lane: it goes out on the change lane at once") {
  Fixture f;
  f.cache.Replace(HubKind::kClusterDeployment, {Cd("b", {{"fleet", "a"}})});
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  f.Round(true);  // no status, no lease: a full reapply waits on the resync lane
  REQUIRE(f.Queue(amqp::Lane::kResync).size() == 1);
  CHECK(f.Queue(amqp::Lane::kResync)[0].full_reapply);

  f.cache.Upsert(HubKind::kSelectorSyncSet, Sss("s", 2));
  CHECK(f.Round().published == 1);
  auto change = f.Queue(amqp::Lane::kChange);
  REQUIRE(change.size() == 1);
  CHECK(change[0].reason == "missing-status");
  CHECK_FALSE(change[0].full_reapply);  // the queued resync still does the full reapply
  CHECK(f.Queue(amqp::Lane::kResync).size() == 1);
  CHECK(f.pub().outstanding() == 1);

  // Further edits before the change is processed coalesce into it.
  f.cache.Upsert(HubKind::kSelectorSyncSet, Sss("s", 3));
  CHECK(f.Round().published == 0);

  // The change is processed; the resync has not run yet (no lease renewal): nothing is sent,
  // not even the reapply the missing lease makes due.
  f.cache.Upsert(HubKind::kClusterSync, Cs("b", "s", 3));
  CHECK(f.Round().published == 0);
  CHECK(f.pub().outstanding() == 1);

  // A new change while the resync still waits is promoted again.
  f.cache.Upsert(HubKind::kSelectorSyncSet, Sss("s", 4));
  CHECK(f.Round().published == 1);
  CHECK(f.Queue(amqp::Lane::kChange).size() == 2);

  // The resync runs (full reapply: lease renewed) and the status is current: nothing outstanding.
  f.clock.Advance(1s);
  f.cache.Upsert(HubKind::kClusterSync, Cs("b", "s", 4));
  f.cache.Upsert(HubKind::kClusterSyncLease, Lease("b", f.clock.WallNow()));
  CHECK(f.Round().published == 0);
  CHECK(f.pub().outstanding() == 0);
  CHECK(f.Queue(amqp::Lane::kResync).size() == 1);
  CHECK(f.Queue(amqp::Lane::kChange).size() == 2);
  double promoted = 0;
  for (const auto& fam : f.registry.Collect()) {
    if (fam.name == "syncbus_publisher_promoted_total") promoted = fam.metric[0].counter.value;
  }
  CHECK(promoted == 2);
}

TEST_CASE(
    "a change overtaking a start-up request that is no full reapply leaves nothing outstanding "
    "once applied") {
  Fixture f;
  f.cache.Replace(HubKind::kClusterDeployment, {Cd("a", {{"fleet", "a"}})});
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 2)});
  f.cache.Replace(HubKind::kClusterSync, {Cs("a", "s", 1)});
  f.cache.Replace(HubKind::kClusterSyncLease, {Lease("a", f.clock.WallNow())});
  f.Round(true);
  auto resync = f.Queue(amqp::Lane::kResync);
  REQUIRE(resync.size() == 1);
  CHECK_FALSE(resync[0].full_reapply);
  f.cache.Upsert(HubKind::kSelectorSyncSet, Sss("s", 3));
  CHECK(f.Round().published == 1);
  REQUIRE(f.Queue(amqp::Lane::kChange).size() == 1);
  f.cache.Upsert(HubKind::kClusterSync, Cs("a", "s", 3));
  CHECK(f.Round().published == 0);
  CHECK(f.pub().outstanding() == 0);
}

TEST_CASE("the outstanding cap holds back periodic reapplies, never a change") {
  Fixture f;
  f.options.max_outstanding = 2;
  f.options.reapply = {1h, 0.0};
  std::vector<Json> cds, statuses, leases;
  for (const char* name : {"a", "b", "c", "d"}) {
    cds.push_back(Cd(name, {{"fleet", "a"}}));
    statuses.push_back(Cs(name, "s", 1));
    leases.push_back(Lease(name, f.clock.WallNow()));
  }
  f.cache.Replace(HubKind::kClusterDeployment, cds);
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  f.cache.Replace(HubKind::kClusterSync, statuses);
  f.cache.Replace(HubKind::kClusterSyncLease, leases);
  CHECK(f.Round(true).published == 0);
  f.clock.Advance(1h + 1s);
  auto due = f.Round();
  CHECK(due.published == 2);  // every reapply is due; the cap lets two out
  CHECK(due.deferred == 2);
  CHECK(f.pub().pending() == 2);
  // An edit reaches all four at once: two overtake their queued reapply, two were held back.
  f.cache.Upsert(HubKind::kSelectorSyncSet, Sss("s", 2));
  CHECK(f.Round().published == 4);
  CHECK(f.Queue(amqp::Lane::kChange).size() == 4);
  CHECK(f.Queue(amqp::Lane::kResync).size() == 2);
  CHECK(f.pub().outstanding() == 4);
}

TEST_CASE(
    "a cluster whose deferred start-up request has not gone out yet and that changes meanwhile "
    "takes the change lane") {
  Fixture f;
  f.options.max_publish_rate = 2;
  std::vector<Json> cds;
  for (const char* name : {"a", "b", "c", "d"}) cds.push_back(Cd(name, {{"fleet", "a"}}));
  f.cache.Replace(HubKind::kClusterDeployment, cds);
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  auto first = f.Round(true);
  CHECK(first.published == 2);  // a and b; c and d wait for tokens as start-up work
  CHECK(f.pub().pending() == 2);
  f.cache.Upsert(HubKind::kClusterDeployment, Cd("d", {{"fleet", "a"}, {"edited", "yes"}}));
  CHECK(f.Round().published == 0);  // no tokens yet
  f.clock.Advance(1s);
  CHECK(f.Round().published == 2);
  auto change = f.Queue(amqp::Lane::kChange);
  REQUIRE(change.size() == 1);
  CHECK(change[0].cluster_name == "d");
  CHECK(change[0].reason != "startup");
  auto resync = f.Queue(amqp::Lane::kResync);
  REQUIRE(resync.size() == 3);
  for (const auto& r : resync) CHECK(r.reason == "startup");
}

TEST_CASE("changes take the rate limit's tokens before resync work") {
  Fixture f;
  f.options.max_publish_rate = 1;
  std::vector<Json> cds;
  for (const char* name : {"a", "b", "c", "d"}) cds.push_back(Cd(name, {{"fleet", "a"}}));
  f.cache.Replace(HubKind::kClusterDeployment, cds);
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  CHECK(f.Round(true).published == 1);  // a; b, c and d wait as start-up work
  f.cache.Upsert(HubKind::kClusterDeployment, Cd("d", {{"fleet", "a"}, {"edited", "yes"}}));
  f.clock.Advance(1s);
  CHECK(f.Round().published == 1);  // one token: the change to d, ahead of b and c
  auto change = f.Queue(amqp::Lane::kChange);
  REQUIRE(change.size() == 1);
  CHECK(change[0].cluster_name == "d");
  CHECK(f.Queue(amqp::Lane::kResync).size() == 1);
}

namespace {

// `n` clusters in sync with SelectorSyncSet "s" (generation 1) and SyncSet "own" (generation 1)
// each, a fleet of a bulk edit's size for a cache whose bulk edits start above 5 clusters.
void SyncedFleet(Fixture& f, int n) {
  std::vector<Json> cds, syncsets, statuses, leases;
  for (int i = 0; i < n; ++i) {
    std::string name = "c" + std::to_string(i);
    cds.push_back(Cd(name, {{"fleet", "a"}}));
    syncsets.push_back(Ss(name, "own", 1));
    Json cs = Cs(name, "s", 1);
    cs["status"]["syncSets"] = Json::array({{{"name", "own"},
                                             {"observedGeneration", 1},
                                             {"result", "Success"},
                                             {"lastTransitionTime", "2026-01-01T00:00:00Z"}}});
    statuses.push_back(cs);
    leases.push_back(Lease(name, f.clock.WallNow()));
  }
  f.cache.Replace(HubKind::kClusterDeployment, cds);
  f.cache.Replace(HubKind::kSyncSet, syncsets);
  f.cache.Replace(HubKind::kSelectorSyncSet, {Sss("s", 1)});
  f.cache.Replace(HubKind::kClusterSync, statuses);
  f.cache.Replace(HubKind::kClusterSyncLease, leases);
  REQUIRE(f.Round(true).published == 0);
}

}  // namespace

TEST_CASE("the hub cache tells single edits from bulk ones by how many clusters they make dirty") {
  HubCache cache(5);
  std::vector<Json> cds;
  for (int i = 0; i < 8; ++i)
    cds.push_back(Cd("c" + std::to_string(i), {{"fleet", i < 6 ? "a" : "b"}}));
  cache.Replace(HubKind::kClusterDeployment, cds);
  for (HubKind k : {HubKind::kSyncSet, HubKind::kSelectorSyncSet, HubKind::kClusterSync,
                    HubKind::kClusterSyncLease, HubKind::kSecret}) {
    cache.Replace(k, {});
  }
  DirtyEdits edits;
  CHECK(cache.TakeDirty(0ms, &edits).size() == 8);  // a relist marks everything, as no edit
  CHECK(edits.bulk.empty());
  CHECK(edits.single.empty());

  // Six clusters match: more than five, a bulk edit.
  cache.Upsert(HubKind::kSelectorSyncSet, Sss("wide", 1));
  CHECK(cache.TakeDirty(0ms, &edits).size() == 6);
  CHECK(edits.bulk.size() == 6);
  CHECK(edits.single.empty());
  // Two match: a single edit, as is a SyncSet of one cluster and a ClusterDeployment edit.
  cache.Upsert(HubKind::kSelectorSyncSet, Sss("narrow", 1, {{"fleet", "b"}}));
  cache.Upsert(HubKind::kSyncSet, Ss("c0", "own", 1));
  cache.Upsert(HubKind::kClusterDeployment, Cd("c1", {{"fleet", "a"}, {"edited", "yes"}}));
  cache.TakeDirty(0ms, &edits);
  CHECK(edits.bulk.empty());
  CHECK(edits.single == std::set<std::string>{"c0/c0", "c1/c1", "c6/c6", "c7/c7"});
  // A bulk and a single edit of one cluster in the same round: the single edit counts.
  cache.Upsert(HubKind::kSelectorSyncSet, Sss("wide", 2));
  cache.Upsert(HubKind::kSyncSet, Ss("c2", "own", 2));
  cache.TakeDirty(0ms, &edits);
  CHECK(edits.bulk == std::set<std::string>{"c0/c0", "c1/c1", "c3/c3", "c4/c4", "c5/c5"});
  CHECK(edits.single == std::set<std::string>{"c2/c2"});
  // A status write is no edit.
  cache.Upsert(HubKind::kClusterSync, Cs("c0", "wide", 2));
  CHECK(cache.TakeDirty(0ms, &edits) == std::vector<std::string>{"c0/c0"});
  CHECK(edits.bulk.empty());
  CHECK(edits.single.empty());
}

TEST_CASE("an edit of one cluster does not wait behind a bulk edit's requests") {
  Fixture f({}, 5);
  SyncedFleet(f, 20);
  // A fleet-wide edit: every cluster needs a sync, on the resync lane.
  f.cache.Upsert(HubKind::kSelectorSyncSet, Sss("s", 2));
  auto wave = f.Round();
  CHECK(wave.published == 20);
  CHECK(wave.bulk == 20);
  CHECK(f.Queue(amqp::Lane::kChange).empty());
  auto resync = f.Queue(amqp::Lane::kResync);
  REQUIRE(resync.size() == 20);
  CHECK(resync[0].reason == "generation-changed");
  CHECK_FALSE(resync[0].full_reapply);
  // An edit of one cluster whose request still waits there goes out at once on the change lane.
  f.cache.Upsert(HubKind::kSyncSet, Ss("c7", "own", 2));
  auto single = f.Round();
  CHECK(single.published == 1);
  CHECK(single.bulk == 0);
  auto change = f.Queue(amqp::Lane::kChange);
  REQUIRE(change.size() == 1);
  CHECK(change[0].cluster_name == "c7");
  CHECK(change[0].reason == "generation-changed");
  // A second fleet-wide edit while the first waits coalesces into it: nothing overtakes the
  // queued requests, and the change lane stays free for single edits.
  f.cache.Upsert(HubKind::kSelectorSyncSet, Sss("s", 3));
  auto second = f.Round();
  CHECK(second.published == 0);
  CHECK(second.coalesced == 20);
  CHECK(f.Queue(amqp::Lane::kChange).size() == 1);
  CHECK(f.Queue(amqp::Lane::kResync).size() == 20);
  // The consumers work through the wave: a cluster's status at the newest generations clears it.
  Json done = Cs("c3", "s", 3);
  done["status"]["syncSets"] = Json::array({{{"name", "own"},
                                             {"observedGeneration", 1},
                                             {"result", "Success"},
                                             {"lastTransitionTime", "2026-01-01T00:00:00Z"}}});
  f.cache.Upsert(HubKind::kClusterSync, done);
  f.Round();
  CHECK(f.pub().outstanding() == 19);
}

TEST_CASE(
    "a bulk edit's requests deferred by the rate limit stay on the resync lane unless a single "
    "edit of the cluster comes") {
  Fixture f({}, 5);
  f.options.max_publish_rate = 4;
  SyncedFleet(f, 10);
  f.cache.Upsert(HubKind::kSelectorSyncSet, Sss("s", 2));
  auto first = f.Round();
  CHECK(first.published == 4);
  CHECK(first.deferred == 6);
  // One of the deferred clusters is edited on its own meanwhile: it takes the change lane and the
  // first token; the other deferred ones stay bulk work.
  std::string edited;
  for (int i = 0; i < 10 && edited.empty(); ++i) {
    std::string name = "c" + std::to_string(i);
    bool sent = false;
    for (const auto& r : f.Queue(amqp::Lane::kResync)) sent |= r.cluster_name == name;
    if (!sent) edited = name;
  }
  REQUIRE(!edited.empty());
  f.cache.Upsert(HubKind::kSyncSet, Ss(edited, "own", 2));
  f.clock.Advance(1s);
  auto second = f.Round();
  CHECK(second.published == 4);
  CHECK(second.bulk == 3);
  auto change = f.Queue(amqp::Lane::kChange);
  REQUIRE(change.size() == 1);
  CHECK(change[0].cluster_name == edited);
  f.clock.Advance(1s);
  CHECK(f.Round().published == 2);
  CHECK(f.pub().pending() == 0);
  CHECK(f.Queue(amqp::Lane::kResync).size() == 9);
  CHECK(f.Queue(amqp::Lane::kChange).size() == 1);
}

TEST_CASE("a broker reconnect re-sends only what was not confirmed, and a single edit goes first") {
  Fixture f({}, 5);
  SyncedFleet(f, 10);
  // The connection drops before a fleet-wide edit's requests are confirmed.
  f.cache.Upsert(HubKind::kSelectorSyncSet, Sss("s", 2));
  f.broker.SetAvailable(false);
  DirtyEdits edits;
  auto keys = f.cache.TakeDirty(0ms, &edits);
  CHECK_FALSE(f.pub().Reconcile(keys, false, edits).ok());
  CHECK(f.pub().pending() == 10);
  f.broker.SetAvailable(true);
  REQUIRE(f.session.Connect().ok());
  // Meanwhile one cluster was edited on its own.
  f.cache.Upsert(HubKind::kSyncSet, Ss("c4", "own", 2));
  auto after = f.Round();
  CHECK(after.published == 10);  // the unconfirmed ten, no more
  CHECK(after.bulk == 9);
  auto change = f.Queue(amqp::Lane::kChange);
  REQUIRE(change.size() == 1);
  CHECK(change[0].cluster_name == "c4");
  CHECK(f.Queue(amqp::Lane::kResync).size() == 9);
  CHECK(f.Round().published == 0);  // nothing else: no fleet-wide round after a reconnect
}
