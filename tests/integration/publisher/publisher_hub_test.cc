// The publisher (PublisherApp: reflectors, cache, decisions, confirmed publishing) against the
// in-process Kubernetes simulator and the real broker: relists after a forced 410 and after the
// hub drops its watches, SelectorSyncSet fan-out, label moves, burst coalescing, restarts.
// Nothing consumes the work queues except the test itself, which plays the consumer's part by
// writing ClusterSync status and leases when it needs to.
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <doctest/doctest.h>
#include <prometheus/registry.h>

#include "common/amqp/session_impl.h"
#include "common/bus/config.h"
#include "common/bus/sync_message.h"
#include "common/bus/topology.h"
#include "common/clock.h"
#include "common/hive/desired_state.h"
#include "common/http/transport.h"
#include "common/kube/client_impl.h"
#include "common/time_format.h"
#include "publisher/publisher_app.h"
#include "tests/fakes/common/http/in_process_transport.h"
#include "tests/kubesim/fleet.h"
#include "tests/kubesim/sim_simulation.h"
#include "tests/support/child_process.h"
#include "tests/support/files.h"
#include "tests/support/hive_objects.h"
#include "tests/support/rollout_objects.h"
#include "tests/support/test_broker.h"
#include "tests/support/wait.h"

using namespace syncbus;
using namespace std::chrono_literals;
using syncbus::testing::WaitFor;
namespace res = syncbus::kube::resources;

namespace {

double MetricSum(prometheus::Registry& registry, const std::string& name) {
  double sum = 0;
  for (const auto& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const auto& m : family.metric) sum += m.counter.value + m.gauge.value;
  }
  return sum;
}

// One PublisherApp running on its own thread.
class RunningPublisher {
 public:
  RunningPublisher(Config config, std::shared_ptr<kube::Client> hub,
                   std::shared_ptr<kube::Client> quick_hub = nullptr) {
    registry_ = std::make_shared<prometheus::Registry>();
    amqp::ConnectionOptions amqp = config.amqp;
    app_ = std::make_unique<publisher::PublisherApp>(
        config,
        publisher::PublisherDeps{hub, quick_hub,
                                 [amqp] { return std::make_unique<amqp::RabbitmqSession>(amqp); },
                                 &RealClock(), registry_, "test-publisher", nullptr});
    thread_ = std::thread([this] { result_ = app_->Run(stop_); });
  }
  ~RunningPublisher() { Stop(); }
  Status Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    return result_;
  }
  bool Ready() const { return app_->ready().ok(); }
  const publisher::HubCache& cache() const { return app_->cache(); }
  double Metric(const std::string& name) { return MetricSum(*registry_, name); }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<publisher::PublisherApp> app_;
  std::atomic<bool> stop_{false};
  Status result_;
  std::thread thread_;
};

// The in-process hub's transport with every PATCH of a SelectorSyncSet held, unanswered, until
// Release(): a hub slow to answer the writes of a rollout's leader. Thread-safe.
class HeldSetPatches final : public http::Transport {
 public:
  explicit HeldSetPatches(std::shared_ptr<http::Transport> inner) : inner_(std::move(inner)) {}
  ~HeldSetPatches() override { Release(); }
  void Send(http::Request request, DoneCallback done) override {
    if (request.method == "PATCH" && request.url.find("/selectorsyncsets/") != std::string::npos) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!released_) {
        held_.emplace_back(std::move(request), std::move(done));
        return;
      }
    }
    inner_->Send(std::move(request), std::move(done));
  }
  std::unique_ptr<http::StreamHandle> Stream(http::Request request,
                                             StreamCallbacks callbacks) override {
    return inner_->Stream(std::move(request), std::move(callbacks));
  }
  size_t held() const {
    std::lock_guard<std::mutex> lock(mu_);
    return held_.size();
  }
  // Sends what was held, and from now on every request at once.
  void Release() {
    std::vector<std::pair<http::Request, DoneCallback>> held;
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
      held.swap(held_);
    }
    for (auto& [request, done] : held) inner_->Send(std::move(request), std::move(done));
  }

 private:
  std::shared_ptr<http::Transport> inner_;
  mutable std::mutex mu_;
  bool released_ = false;
  std::vector<std::pair<http::Request, DoneCallback>> held_;
};

struct Rig {
  std::unique_ptr<kubesim::Simulation> sim;
  std::shared_ptr<fakes::InProcessTransport> transport;
  std::shared_ptr<kube::ClientImpl> hub;
  std::optional<testing::TestVhost> vhost;
  std::unique_ptr<amqp::RabbitmqSession> reader;
  Config config;

  // `shared_broker`: a fresh vhost on the run's broker fixture; otherwise the caller sets
  // config.amqp (and reader) for a broker of its own.
  explicit Rig(int clusters, bool shared_broker = true) {
    auto created = kubesim::Simulation::Create({});
    REQUIRE_MESSAGE(created.ok(), created.status().ToString());
    sim = std::move(*created);
    kubesim::FleetSpec fleet;
    fleet.clusters = clusters;
    auto populated =
        kubesim::PopulateHub(sim->hub(), fleet, "http://sim.invalid", kubesim::ClientAuth{});
    REQUIRE_MESSAGE(populated.ok(), populated.status().ToString());
    transport = std::make_shared<fakes::InProcessTransport>(*sim);
    kube::ClusterConfig cc;
    cc.server = "http://sim.invalid";
    hub = std::make_shared<kube::ClientImpl>(cc, transport);
    config.publisher.leader_election.enabled = false;
    // A running fleet: Hive (or the consumer) keeps a ClusterSync and a lease for every cluster,
    // with or without sets; none applies yet.
    for (const auto& name : kubesim::FleetClusterNames(clusters)) ReportSynced(name, {});
    if (!shared_broker) return;
    vhost.emplace(testing::NewTestVhost());
    config.amqp = vhost->Options("publisher");
    reader = std::make_unique<amqp::RabbitmqSession>(vhost->Options("reader"));
  }

  std::string Cluster(int i) const {
    return kubesim::FleetClusterName(i, static_cast<int>(sim->cluster_names().size()));
  }

  // Messages waiting in one lane's queue, taken off it.
  std::vector<SyncRequest> Take(amqp::Lane lane) {
    std::vector<SyncRequest> out;
    if (!reader->connected()) {
      REQUIRE(reader->Connect().ok());
    }
    while (true) {
      auto d = reader->Get(amqp::WorkQueueName(lane));
      if (!d.ok() && d.status().code() == Code::kNotFound) break;  // not declared yet
      REQUIRE_MESSAGE(d.ok(), d.status().ToString());
      if (!d->has_value()) break;
      auto r = DecodeSyncRequest((*d)->message.body);
      REQUIRE_MESSAGE(r.ok(), r.status().ToString());
      out.push_back(*r);
      REQUIRE(reader->Ack((*d)->delivery_tag).ok());
    }
    return out;
  }
  // Collects messages from both lanes for `quiet` after the last one arrived (or `limit`).
  std::vector<SyncRequest> Collect(std::chrono::milliseconds quiet = 1500ms,
                                   std::chrono::milliseconds limit = 20s) {
    std::vector<SyncRequest> all;
    auto deadline = std::chrono::steady_clock::now() + limit;
    auto last = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() < deadline &&
           std::chrono::steady_clock::now() - last < quiet) {
      size_t before = all.size();
      for (auto lane : {amqp::Lane::kChange, amqp::Lane::kResync}) {
        for (auto& r : Take(lane)) all.push_back(std::move(r));
      }
      if (all.size() != before) last = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(100ms);
    }
    return all;
  }

  Json SelectorSyncSet(const std::string& name, const Json& match_labels, const std::string& data) {
    return {{"apiVersion", "hive.openshift.io/v1"},
            {"kind", "SelectorSyncSet"},
            {"metadata", {{"name", name}}},
            {"spec",
             {{"clusterDeploymentSelector", {{"matchLabels", match_labels}}},
              {"resources", Json::array({{{"apiVersion", "v1"},
                                          {"kind", "ConfigMap"},
                                          {"metadata", {{"name", name}, {"namespace", "default"}}},
                                          {"data", {{"v", data}}}}})}}}};
  }
  void CreateSelectorSyncSet(const std::string& name, const Json& match_labels) {
    auto r = hub->Create(kube::Collection(res::kSelectorSyncSets),
                         SelectorSyncSet(name, match_labels, "0"));
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  }
  void EditSelectorSyncSet(const std::string& name, int n) {
    Json patch = {
        {"spec",
         {{"resources", Json::array({{{"apiVersion", "v1"},
                                      {"kind", "ConfigMap"},
                                      {"metadata", {{"name", name}, {"namespace", "default"}}},
                                      {"data", {{"v", std::to_string(n)}}}}})}}}};
    auto r = hub->Patch(kube::Object(res::kSelectorSyncSets, "", name), kube::PatchType::kMerge,
                        patch.dump());
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  }
  void SetLabel(const std::string& cluster, const std::string& key, const std::string& value) {
    Json patch = {{"metadata", {{"labels", {{key, value}}}}}};
    auto r = hub->Patch(kube::Object(res::kClusterDeployments, cluster, cluster),
                        kube::PatchType::kMerge, patch.dump());
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  }
  int64_t Generation(const kube::ObjectRef& ref) {
    auto r = hub->Get(ref);
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    return (*r)["metadata"].value("generation", int64_t{0});
  }

  // Plays the consumer after a full reapply: the cluster's lease is renewed now and its
  // ClusterSync reports `sets` (SelectorSyncSet name -> generation) as applied.
  void ReportSynced(const std::string& cluster, const std::map<std::string, int64_t>& sets,
                    const std::map<std::string, int64_t>& syncsets = {}) {
    std::string now = FormatRfc3339(std::chrono::system_clock::now());
    auto entries = [&](const std::map<std::string, int64_t>& m) {
      Json list = Json::array();
      for (const auto& [name, gen] : m) {
        list.push_back({{"name", name},
                        {"observedGeneration", gen},
                        {"result", "Success"},
                        {"lastTransitionTime", now},
                        {"firstSuccessTime", now}});
      }
      return list;
    };
    Json lease = {{"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
                  {"kind", "ClusterSyncLease"},
                  {"metadata", {{"name", cluster}, {"namespace", cluster}}},
                  {"spec", {{"renewTime", FormatRfc3339Micro(std::chrono::system_clock::now())}}}};
    auto applied = hub->Apply(kube::Object(res::kClusterSyncLeases, cluster, cluster), lease, {});
    REQUIRE_MESSAGE(applied.ok(), applied.status().ToString());
    kube::ObjectRef ref = kube::Object(res::kClusterSyncs, cluster, cluster);
    auto current = hub->Get(ref);
    if (!current.ok()) {
      REQUIRE(current.status().code() == Code::kNotFound);
      current = hub->Create(kube::Collection(res::kClusterSyncs, cluster),
                            {{"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
                             {"kind", "ClusterSync"},
                             {"metadata", {{"name", cluster}, {"namespace", cluster}}}});
      REQUIRE_MESSAGE(current.ok(), current.status().ToString());
    }
    Json cs = *current;
    // With the Failed condition and firstSuccessTime Hive derives from the entries (a status
    // without them is brought up to date by a sync of its own).
    cs["status"] = {{"syncSets", entries(syncsets)},
                    {"selectorSyncSets", entries(sets)},
                    {"firstSuccessTime", now},
                    {"conditions", Json::array({syncbus::testing::SucceededCondition(now)})}};
    auto updated = hub->Update(kube::StatusOf(res::kClusterSyncs, cluster, cluster), cs);
    REQUIRE_MESSAGE(updated.ok(), updated.status().ToString());
  }

  // Each cluster's desired revision computed from a fresh list of the hub.
  std::map<std::string, std::string> HubRevisions() {
    auto cds = hub->List(kube::Collection(res::kClusterDeployments), {});
    auto sss = hub->List(kube::Collection(res::kSelectorSyncSets), {});
    auto ss = hub->List(kube::Collection(res::kSyncSets), {});
    REQUIRE((cds.ok() && sss.ok() && ss.ok()));
    std::vector<hive::SelectorSyncSet> selector_sets;
    for (const auto& j : sss->items) selector_sets.push_back(*hive::SelectorSyncSet::FromJson(j));
    std::vector<hive::SyncSet> syncsets;
    for (const auto& j : ss->items) syncsets.push_back(*hive::SyncSet::FromJson(j));
    std::vector<const hive::SelectorSyncSet*> sss_ptrs;
    for (const auto& s : selector_sets) sss_ptrs.push_back(&s);
    std::vector<const hive::SyncSet*> ss_ptrs;
    for (const auto& s : syncsets) ss_ptrs.push_back(&s);
    std::map<std::string, std::string> out;
    for (const auto& j : cds->items) {
      auto cd = hive::ClusterDeployment::FromJson(j);
      REQUIRE(cd.ok());
      out[cd->meta.Key()] = hive::ComputeDesired(*cd, ss_ptrs, sss_ptrs).revision;
    }
    return out;
  }
  static std::map<std::string, std::string> CacheRevisions(const publisher::HubCache& cache) {
    std::map<std::string, std::string> out;
    publisher::HubSnapshot snapshot = cache.Snapshot(cache.AllClusterKeys());
    for (const auto& cluster : snapshot.clusters) {
      out[cluster.key] = snapshot.View(cluster).desired.revision;
    }
    return out;
  }
};

// A RabbitMQ node of the test's own (scripts/rabbitmq-node in a temporary directory, free ports),
// so stopping it does not disturb the other tests sharing the fixture broker. Stopped and wiped
// on destruction.
class PrivateBroker {
 public:
  PrivateBroker() : dir_(testing::MakeTempDir("syncbus-private-broker")) {}
  ~PrivateBroker() { Run("stop", "--wipe"); }
  bool Start() { return Run("start", "--start-timeout 300"); }  // a loaded CI machine
  bool Stop() { return Run("stop", ""); }
  Result<testing::BrokerEnv> Env() const {
    return testing::ParseBrokerEnv(testing::ReadFile(dir_ + "/broker.env"));
  }

 private:
  bool Run(const std::string& command, const std::string& extra) {
    std::string cmd = testing::SourceDir() + "/scripts/rabbitmq-node " + command + " --dir " +
                      dir_ + " " + extra + " >>" + dir_ + ".log 2>&1";
    return std::system(cmd.c_str()) == 0;
  }
  std::string dir_;
};

std::string Describe(const std::vector<SyncRequest>& requests) {
  std::string out;
  for (const auto& r : requests) {
    out += r.ClusterKey() + " " + amqp::LaneName(r.lane) + " " + r.reason +
           (r.full_reapply ? " full" : "") + "; ";
  }
  return out;
}

std::map<std::string, int> PerCluster(const std::vector<SyncRequest>& requests) {
  std::map<std::string, int> n;
  for (const auto& r : requests) ++n[r.cluster_name];
  return n;
}

// What the rig's lanes carry, slice by slice, until `clusters` clusters have a request or
// `limit` has passed.
std::vector<SyncRequest> CollectForClusters(Rig& rig, size_t clusters,
                                            std::chrono::milliseconds limit,
                                            std::chrono::milliseconds quiet = 300ms,
                                            std::chrono::milliseconds slice = 2s) {
  std::vector<SyncRequest> got;
  WaitFor(
      [&] {
        for (auto& r : rig.Collect(quiet, slice)) got.push_back(std::move(r));
        return PerCluster(got).size() >= clusters;
      },
      limit);
  return got;
}

}  // namespace

TEST_CASE("publisher: relist after a forced 410 leaves the cache equal to the hub") {
  Rig rig(12);
  RunningPublisher pub(rig.config, rig.hub);
  REQUIRE(WaitFor([&] { return pub.Ready(); }, 30s));
  // Every resourceVersion becomes too old and every watch ends: rewatching gets 410 -> relist.
  // Edits made meanwhile (a cluster deleted, a set added, a label changed) must all show up.
  rig.sim->hub().ExpireHistory();
  rig.sim->hub().CloseAllWatches();
  REQUIRE(
      rig.hub->Delete(kube::Object(res::kClusterDeployments, rig.Cluster(0), rig.Cluster(0)), {})
          .ok());
  rig.CreateSelectorSyncSet("after-expiry", {{"region", "us-east-1"}});
  rig.SetLabel(rig.Cluster(5), "region", "moved");
  CHECK(WaitFor([&] { return pub.Metric("syncbus_publisher_relists_total") >= 1; }, 30s));
  auto hub_revisions = rig.HubRevisions();
  CHECK(hub_revisions.size() == 11);
  CHECK(WaitFor([&] { return Rig::CacheRevisions(pub.cache()) == rig.HubRevisions(); }, 30s));
  CHECK(pub.Stop().ok());
}

TEST_CASE("publisher: the hub dropping every watch loses nothing") {
  Rig rig(8);
  RunningPublisher pub(rig.config, rig.hub);
  REQUIRE(WaitFor([&] { return pub.Ready(); }, 30s));
  double restarts = pub.Metric("syncbus_publisher_watch_restarts_total");
  for (int round = 0; round < 3; ++round) {
    rig.sim->hub().CloseAllWatches();
    rig.CreateSelectorSyncSet("dropped-" + std::to_string(round), {{"tier", "platinum"}});
    rig.SetLabel(rig.Cluster(round), "tier", "platinum");
  }
  // Six collections are watched: each close ends six watches, each re-opened without a relist.
  CHECK(WaitFor(
      [&] { return pub.Metric("syncbus_publisher_watch_restarts_total") >= restarts + 6; }, 30s));
  CHECK(WaitFor([&] { return Rig::CacheRevisions(pub.cache()) == rig.HubRevisions(); }, 30s));
  CHECK(pub.Metric("syncbus_publisher_relists_total") == 0);  // a plain rewatch sufficed
}

TEST_CASE(
    "publisher: a SelectorSyncSet fans out to every matching cluster, label changes move "
    "clusters") {
  Rig rig(12);
  RunningPublisher pub(rig.config, rig.hub);
  REQUIRE(WaitFor([&] { return pub.Ready(); }, 30s));
  {
    auto extra = rig.Collect(1000ms);
    CHECK_MESSAGE(extra.empty(), Describe(extra));
  }  // no sets yet: nothing is out of sync
  // The fleet's region label cycles over three values: a third of the clusters match.
  rig.CreateSelectorSyncSet("eu", {{"region", "eu-west-1"}});
  auto fan_out = rig.Collect();
  std::set<std::string> matched;
  for (const auto& r : fan_out) {
    CHECK(r.lane == amqp::Lane::kChange);
    CHECK(r.reason == "missing-status");
    matched.insert(r.cluster_name);
  }
  CHECK(matched.size() == 4);
  CHECK(fan_out.size() == 4);
  // Processed by a consumer (played by the test).
  for (const auto& c : matched) rig.ReportSynced(c, {{"eu", 1}});
  // A cluster moves in: it (only it) is enqueued.
  std::string mover;
  for (int i = 0; i < 12 && mover.empty(); ++i) {
    if (!matched.count(rig.Cluster(i))) mover = rig.Cluster(i);
  }
  rig.SetLabel(mover, "region", "eu-west-1");
  auto in = rig.Collect();
  REQUIRE(in.size() == 1);
  CHECK(in[0].cluster_name == mover);
  // A synced cluster moves out: the set must be removed from it.
  std::string leaver = *matched.begin();
  rig.SetLabel(leaver, "region", "elsewhere");
  auto out = rig.Collect();
  REQUIRE(out.size() == 1);
  CHECK(out[0].cluster_name == leaver);
  CHECK(out[0].reason == "set-removed");
  CHECK(pub.Stop().ok());
}

TEST_CASE("publisher: a burst of 50 edits to one set produces at most a few messages per cluster") {
  Rig rig(6);
  RunningPublisher pub(rig.config, rig.hub);
  REQUIRE(WaitFor([&] { return pub.Ready(); }, 30s));
  rig.CreateSelectorSyncSet("burst", {{"syncbus.io/fleet", "sim"}});
  for (int i = 1; i <= 50; ++i) rig.EditSelectorSyncSet("burst", i);
  auto messages = rig.Collect(2000ms);
  auto per_cluster = PerCluster(messages);
  CHECK(per_cluster.size() == 6);
  for (const auto& [cluster, n] : per_cluster) {
    CHECK_MESSAGE(n <= 2, cluster << " got " << n << " messages");
  }
  // Once the consumer reports the newest generation, one more edit sends exactly one more each.
  int64_t gen = rig.Generation(kube::Object(res::kSelectorSyncSets, "", "burst"));
  CHECK(gen == 51);
  for (const auto& [cluster, n] : per_cluster) rig.ReportSynced(cluster, {{"burst", gen}});
  {
    auto extra = rig.Collect(1000ms);
    CHECK_MESSAGE(extra.empty(), Describe(extra));
  }
  rig.EditSelectorSyncSet("burst", 99);
  CHECK(rig.Collect().size() == 6);
}

TEST_CASE(
    "publisher: a restart enqueues only what is out of sync, including what changed while down") {
  Rig rig(10);
  rig.CreateSelectorSyncSet("base", {{"syncbus.io/fleet", "sim"}});
  for (int i = 0; i < 7; ++i) rig.ReportSynced(rig.Cluster(i), {{"base", 1}});
  {
    RunningPublisher pub(rig.config, rig.hub);
    REQUIRE(WaitFor([&] { return pub.Ready(); }, 30s));
    auto first = rig.Collect();
    std::set<std::string> got;
    for (const auto& r : first) {
      CHECK(r.lane == amqp::Lane::kResync);
      CHECK(r.reason == "startup");
      got.insert(r.cluster_name);
    }
    CHECK(got == std::set<std::string>{rig.Cluster(7), rig.Cluster(8), rig.Cluster(9)});
    CHECK(first.size() == 3);
    for (int i = 7; i < 10; ++i) rig.ReportSynced(rig.Cluster(i), {{"base", 1}});
    {
      auto extra = rig.Collect(1000ms);
      CHECK_MESSAGE(extra.empty(), Describe(extra));
    }
    CHECK(pub.Stop().ok());
  }
  // While no publisher runs, a SyncSet appears for cluster 4.
  std::string c4 = rig.Cluster(4);
  auto created = rig.hub->Create(
      kube::Collection(res::kSyncSets, c4),
      {{"apiVersion", "hive.openshift.io/v1"},
       {"kind", "SyncSet"},
       {"metadata", {{"name", "while-down"}, {"namespace", c4}}},
       {"spec",
        {{"clusterDeploymentRefs", Json::array({{{"name", c4}}})}, {"resources", Json::array()}}}});
  REQUIRE_MESSAGE(created.ok(), created.status().ToString());
  RunningPublisher again(rig.config, rig.hub);
  REQUIRE(WaitFor([&] { return again.Ready(); }, 30s));
  auto second = rig.Collect();
  REQUIRE(second.size() == 1);
  CHECK(second[0].cluster_name == c4);
  CHECK(second[0].reason == "startup");
}

TEST_CASE(
    "publisher: start-up work a round's size at a time goes out round after round, not a round "
    "per tick") {
  // 200 clusters one per round: waiting 500 ms between rounds (the loop's tick when nothing
  // changes) would take 100 s; nothing but the rounds' own work may pace them.
  constexpr int kClusters = 200;
  Rig rig(kClusters);
  rig.config.publisher.round_clusters = 1;
  rig.CreateSelectorSyncSet("base", {{"syncbus.io/fleet", "sim"}});
  RunningPublisher pub(rig.config, rig.hub);
  REQUIRE(WaitFor([&] { return pub.Ready(); }, 30s));
  std::vector<SyncRequest> got;
  WaitFor(
      [&] {
        for (auto& r : rig.Take(amqp::Lane::kResync)) got.push_back(std::move(r));
        return got.size() >= kClusters;
      },
      30s);
  CHECK(got.size() == kClusters);
  auto per_cluster = PerCluster(got);
  CHECK(per_cluster.size() == kClusters);
  for (const auto& r : got) CHECK(r.reason == "startup");
  CHECK(pub.Stop().ok());
}

TEST_CASE("publisher: broker stopped and restarted, every pending cluster still gets its message") {
  PrivateBroker broker;
  REQUIRE(broker.Start());
  auto env = broker.Env();
  REQUIRE_MESSAGE(env.ok(), env.status().ToString());
  Rig rig(20, /*shared_broker=*/false);
  auto options = [&](const std::string& name) {
    amqp::ConnectionOptions o;
    o.host = "127.0.0.1";
    o.port = env->amqp_port;
    o.user = env->user;
    o.password = env->password;
    o.connection_name = name;
    o.heartbeat_seconds = 5;
    o.connect_timeout = 2s;
    o.rpc_timeout = 5s;
    return o;
  };
  rig.config.amqp = options("publisher");
  rig.reader = std::make_unique<amqp::RabbitmqSession>(options("reader"));
  rig.CreateSelectorSyncSet("all", {{"syncbus.io/fleet", "sim"}});
  RunningPublisher pub(rig.config, rig.hub);
  REQUIRE(WaitFor([&] { return pub.Ready(); }, 30s));
  auto start = rig.Collect();
  CHECK(PerCluster(start).size() == 20);
  for (const auto& r : start) rig.ReportSynced(r.cluster_name, {{"all", 1}});
  {
    auto extra = rig.Collect(1000ms);
    CHECK_MESSAGE(extra.empty(), Describe(extra));
  }

  // The broker goes away; an edit makes all 20 clusters need a request while it is down.
  rig.reader->Close();
  REQUIRE(broker.Stop());
  rig.EditSelectorSyncSet("all", 2);
  CHECK(WaitFor([&] { return !pub.Ready(); }, 20s));
  std::this_thread::sleep_for(2s);  // a few failed rounds and reconnect attempts
  REQUIRE(broker.Start());
  // The publisher reconnects on its backoff (up to 30 s between attempts).
  auto after = CollectForClusters(rig, 20, 90s, 500ms, 5s);
  for (auto& r : rig.Collect(1000ms)) after.push_back(std::move(r));
  auto per_cluster = PerCluster(after);
  CHECK(per_cluster.size() == 20);
  for (const auto& r : after) {
    CHECK(r.lane == amqp::Lane::kChange);
    CHECK(r.reason == "generation-changed");
  }
  for (const auto& [cluster, n] : per_cluster) CHECK_MESSAGE(n == 1, cluster << " got " << n);
  CHECK(pub.Stop().ok());
}

TEST_CASE("publisher: an idle leader keeps its broker connection through heartbeats") {
  Rig rig(2);
  rig.config.amqp.heartbeat_seconds = 1;  // the broker drops a client silent for two intervals
  RunningPublisher pub(rig.config, rig.hub);
  REQUIRE(WaitFor([&] { return pub.Ready(); }, 30s));
  const std::string path =
      "/api/vhosts/" + testing::ManagementApi::Escape(rig.vhost->name()) + "/connections";
  // The management API lists a connection once its first statistics arrive.
  auto publisher_connections = [&] {
    std::set<std::string> names;
    auto list = rig.vhost->api().Get(path);
    REQUIRE(list.ok());
    for (const auto& c : *list) {
      if (c["client_properties"].value("connection_name", "") == "publisher")
        names.insert(c.value("name", ""));
    }
    return names;
  };
  std::set<std::string> first;
  REQUIRE(WaitFor([&] { return !(first = publisher_connections()).empty(); }, 20s));
  // Nothing to publish for five heartbeat intervals.
  std::this_thread::sleep_for(5s);
  CHECK(pub.Ready());
  CHECK(publisher_connections() == first);
  CHECK(pub.Stop().ok());
}

TEST_CASE(
    "publisher: a Lease read the hub never answers holds publishing up for about renewDeadline, "
    "not a whole request timeout") {
  Rig rig(3);
  auto& election = rig.config.publisher.leader_election;
  election.enabled = true;
  election.ns = "syncbus";
  election.lease_duration = 3s;
  election.renew_deadline = 2s;
  election.retry_period = 500ms;
  auto ns = rig.hub->Create(
      kube::Collection(res::kNamespaces),
      {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "syncbus"}}}});
  REQUIRE_MESSAGE((ns.ok() || ns.status().code() == Code::kAlreadyExists), ns.status().ToString());
  rig.CreateSelectorSyncSet("all", {{"syncbus.io/fleet", "sim"}});
  // As syncbus-publisher's main wires it: the hub's client (30 s per request) for the watches,
  // and the same hub giving up within renewDeadline for the Lease.
  RunningPublisher pub(rig.config, rig.hub, rig.hub->WithRequestTimeout(election.renew_deadline));
  REQUIRE(WaitFor([&] { return pub.Ready(); }, 30s));
  auto start = rig.Collect();
  REQUIRE(PerCluster(start).size() == 3);
  for (const auto& r : start) rig.ReportSynced(r.cluster_name, {{"all", 1}});
  {
    auto extra = rig.Collect(1000ms);
    CHECK_MESSAGE(extra.empty(), Describe(extra));
  }
  // For 3 s the hub answers nothing: the leader's Lease reads meanwhile are never answered, so
  // its renewals stop and it stops leading once renewDeadline (2 s) has passed.
  kubesim::FaultSpec silent;
  silent.timeout_rate = 1.0;
  REQUIRE(rig.sim->faults().Set("hub", silent).ok());
  std::this_thread::sleep_for(3s);
  REQUIRE(rig.sim->faults().Set("hub", kubesim::FaultSpec{}).ok());
  const auto answered_again = std::chrono::steady_clock::now();
  rig.EditSelectorSyncSet("all", 2);
  // The read in flight gives up within renewDeadline (2 s), the next renews: publishing resumes
  // seconds later. With the hub's own client it would wait out the 30 s request timeout.
  auto after = CollectForClusters(rig, 3, 20s);
  const auto took = std::chrono::steady_clock::now() - answered_again;
  CHECK_MESSAGE(PerCluster(after).size() == 3, Describe(after));
  CHECK_MESSAGE(took < 15s,
                "published again after "
                    << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                    << " ms");
  CHECK(pub.Stop().ok());
}

TEST_CASE(
    "publisher: a rollout's write the hub does not answer holds no edit back (the keeper has a "
    "thread of its own)") {
  Rig rig(3);
  rig.CreateSelectorSyncSet("all", {{"syncbus.io/fleet", "sim"}});
  // A second set rolled out in waves: the leader's first look at it writes its state (the first
  // wave released), a PATCH the hub holds unanswered.
  auto gated = rig.hub->Create(
      kube::Collection(res::kSelectorSyncSets),
      testing::RolledOutSelectorSyncSet("gated", R"({"waves": [{"clusters": 1}]})"));
  REQUIRE_MESSAGE(gated.ok(), gated.status().ToString());
  auto held = std::make_shared<HeldSetPatches>(rig.transport);
  kube::ClusterConfig cc;
  cc.server = "http://sim.invalid";
  RunningPublisher pub(rig.config, rig.hub, std::make_shared<kube::ClientImpl>(cc, held));
  REQUIRE(WaitFor([&] { return pub.Ready(); }, 30s));
  auto start = rig.Collect();
  REQUIRE(PerCluster(start).size() == 3);
  for (const auto& r : start) rig.ReportSynced(r.cluster_name, {{"all", 1}});
  REQUIRE(WaitFor([&] { return held->held() > 0; }, 10s));
  (void)rig.Collect(1000ms);

  // An edit while the rollout's write waits on the hub reaches every cluster.
  rig.EditSelectorSyncSet("all", 2);
  auto after = CollectForClusters(rig, 3, 10s);
  CHECK_MESSAGE(PerCluster(after).size() == 3, Describe(after));
  CHECK(held->held() > 0);  // still unanswered meanwhile
  held->Release();
  CHECK(pub.Stop().ok());
}
