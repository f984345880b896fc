#include "publisher/publisher_app.h"

#include <thread>
#include <vector>

#include "common/amqp/syncbus_topology.h"
#include "common/backoff.h"
#include "common/daemon.h"
#include "common/kube/reflector.h"
#include "common/log.h"
#include "common/random.h"
#include "publisher/leader_elector.h"
#include "publisher/publisher.h"

namespace syncbus::publisher {
namespace {

namespace res = kube::resources;

// Feeds one reflector's events into the cache as one kind.
class CacheFeeder final : public kube::ReflectorHandler {
 public:
  CacheFeeder(HubCache& cache, HubKind kind) : cache_(cache), kind_(kind) {}
  void OnReplace(std::vector<Json> items) override { cache_.Replace(kind_, items); }
  void OnUpsert(Json object) override { cache_.Upsert(kind_, object); }
  void OnDelete(Json object) override { cache_.Delete(kind_, object); }
  void OnSynced() override {}

 private:
  HubCache& cache_;
  HubKind kind_;
};

}  // namespace

PublisherApp::PublisherApp(Config config, PublisherDeps deps)
    : config_(std::move(config)),
      deps_(std::move(deps)),
      leader_gauge_(&prometheus::BuildGauge()
                         .Name("syncbus_publisher_leader")
                         .Help("1 while this replica holds the leader lease and may publish")
                         .Register(*deps_.registry)
                         .Add({})) {}

Status PublisherApp::ready() const {
  if (!cache_.synced()) return Unavailable("hub cache not synced yet");
  if (!connected_.load()) return Unavailable("not connected to the broker");
  return Status::Ok();
}

Status PublisherApp::Run(const std::atomic<bool>& stop) {
  Clock& clock = *deps_.clock;
  const std::string& ns = config_.publisher.ns;
  struct Watched {
    kube::Resource resource;
    HubKind kind;
    bool namespaced;
  };
  std::vector<Watched> watched = {
      {res::kClusterDeployments, HubKind::kClusterDeployment, true},
      {res::kSyncSets, HubKind::kSyncSet, true},
      {res::kSelectorSyncSets, HubKind::kSelectorSyncSet, false},
      {res::kClusterSyncs, HubKind::kClusterSync, true},
      {res::kClusterSyncLeases, HubKind::kClusterSyncLease, true},
  };
  std::vector<std::unique_ptr<CacheFeeder>> feeders;
  std::vector<std::unique_ptr<kube::Reflector>> reflectors;
  for (const auto& w : watched) {
    feeders.push_back(std::make_unique<CacheFeeder>(cache_, w.kind));
    kube::Reflector::Options options;
    options.clock = &clock;
    reflectors.push_back(std::make_unique<kube::Reflector>(
        *deps_.hub, kube::Collection(w.resource, w.namespaced ? ns : ""), *feeders.back(), options));
    reflectors.back()->Start();
  }
  log::Info("watching the hub", {{"namespace", ns.empty() ? "(all)" : ns}});
  while (!stop.load() && !cache_.synced()) SleepUnlessStopped(std::chrono::milliseconds(100), stop);
  if (stop.load()) return Status::Ok();
  log::Info("hub cache synced", {{"clusters", cache_.cluster_count()}});

  PublisherOptions options;
  options.reapply = {config_.publisher.resync_interval, config_.publisher.resync_jitter};
  options.max_publish_rate = config_.publisher.max_publish_rate;
  options.max_outstanding = static_cast<size_t>(config_.publisher.max_outstanding);
  options.outstanding_timeout = config_.publisher.outstanding_timeout;
  std::unique_ptr<LeaderElector> elector;
  std::thread election;
  const auto& le = config_.publisher.leader_election;
  if (le.enabled) {
    elector = std::make_unique<LeaderElector>(*deps_.hub, le, deps_.identity, clock);
    options.may_publish = [&elector] { return elector->is_leader(); };
    election = std::thread([&] {
      while (!stop.load()) {
        leader_gauge_->Set(elector->Tick() ? 1 : 0);
        SleepUnlessStopped(le.retry_period, stop);
      }
    });
  } else {
    leader_gauge_->Set(1);
  }

  Backoff backoff({}, RealRandom());
  // One session object for the process: Connect() re-opens it after a failure, and the
  // publisher keeps its outstanding/pending state across reconnects.
  std::unique_ptr<amqp::Session> session = deps_.new_session();
  Publisher publisher(options, cache_, *session, clock, *deps_.registry);
  bool startup = true;
  bool leading = false;
  while (!stop.load()) {
    if (elector && !elector->is_leader()) {
      if (leading) {
        log::Warn("not the leader any more: stopped publishing");
        publisher.Reset();   // the next leader recomputes everything from its own cache
        leading = false;
      }
      cache_.TakeDirty(options.tick);   // stay warm; decisions wait for leadership
      continue;
    }
    if (!leading) {
      leading = true;
      startup = true;   // a new leader compares the whole fleet (without a storm: only what is needed)
    }
    if (!session->connected()) {
      connected_.store(false);
      Status connected = session->Connect();
      if (connected.ok()) connected = session->Declare(amqp::SyncbusTopology(config_.topology));
      if (!connected.ok()) {
        auto delay = backoff.Next();
        log::Warn("broker unavailable, retrying", {{"error", connected.message()}, {"in_ms", delay.count()}});
        SleepUnlessStopped(delay, stop);
        continue;
      }
      connected_.store(true);
      log::Info("connected to the broker", {{"host", config_.amqp.host}, {"vhost", config_.amqp.vhost}});
    }
    // The first round looks at every cluster; later rounds at what changed (plus what is
    // pending, due or outstanding too long, which the publisher adds itself).
    std::vector<std::string> keys = startup ? cache_.AllClusterKeys() : cache_.TakeDirty(options.tick);
    auto stats = publisher.Reconcile(keys, startup);
    if (!stats.ok()) {
      if (stats.status().code() == Code::kCancelled) continue;   // lost the lease mid-round
      // Nothing is lost: unconfirmed clusters stay pending in the publisher.
      log::Warn("publishing failed; reconnecting", {{"error", stats.status().message()}});
      session->Close();
      continue;
    }
    backoff.Reset();
    startup = false;
  }
  connected_.store(false);
  session->Close();   // every confirm was awaited inside Reconcile: nothing left to flush
  if (election.joinable()) election.join();
  if (elector) {
    Status released = elector->Release();
    if (!released.ok()) log::Warn("could not release the lease", {{"error", released.message()}});
  }
  leader_gauge_->Set(0);
  cache_.Wake();
  for (auto& r : reflectors) r->Stop();
  return Status::Ok();
}

}  // namespace syncbus::publisher
