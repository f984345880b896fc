#include "publisher/publisher_app.h"

#include <thread>
#include <vector>

#include "common/amqp/reconnect.h"
#include "common/bus/daemon.h"
#include "common/bus/topology.h"
#include "common/kube/reflector.h"
#include "common/log.h"
#include "common/random.h"
#include "common/time_format.h"
#include "publisher/hive_config.h"
#include "publisher/leader_elector.h"
#include "publisher/publisher.h"

namespace syncbus::publisher {
namespace {

namespace res = kube::resources;

// How often HiveConfig is read again for a changed reapply interval.
constexpr std::chrono::minutes kHiveConfigPeriod{5};

// Feeds one reflector's events into the cache as one kind.
class CacheFeeder final : public kube::ReflectorHandler {
 public:
  CacheFeeder(HubCache& cache, HubKind kind) : cache_(cache), kind_(kind) {}
  void OnReplace(std::vector<Json> items) override { cache_.Replace(kind_, items); }
  void OnUpsert(Json object) override { cache_.Upsert(kind_, object); }
  void OnDelete(Json object) override { cache_.Delete(kind_, object); }
  void OnSynced() override {}
  void OnCheckpoint(const std::string& resource_version, bool bookmark) override {
    if (!bookmark) cache_.Listed(kind_, resource_version);
  }

 private:
  HubCache& cache_;
  HubKind kind_;
};

// Mirrors a reflector's cumulative counters into Prometheus counters, labelled by resource.
class ReflectorMetrics {
 public:
  ReflectorMetrics(prometheus::Registry& registry, const kube::Reflector& reflector,
                   const std::string& resource)
      : reflector_(reflector),
        relists_(prometheus::BuildCounter()
                     .Name("syncbus_publisher_relists_total")
                     .Help("Hub lists after the first one (a 410 or an ERROR event), by resource")
                     .Register(registry)
                     .Add({{"resource", resource}})),
        restarts_(
            prometheus::BuildCounter()
                .Name("syncbus_publisher_watch_restarts_total")
                .Help("Hub watches re-opened without a relist (timeout, dropped), by resource")
                .Register(registry)
                .Add({{"resource", resource}})) {}
  void Update() {
    uint64_t relists = reflector_.relists(), restarts = reflector_.watch_restarts();
    relists_.Increment(static_cast<double>(relists - seen_relists_));
    restarts_.Increment(static_cast<double>(restarts - seen_restarts_));
    seen_relists_ = relists;
    seen_restarts_ = restarts;
  }

 private:
  const kube::Reflector& reflector_;
  prometheus::Counter& relists_;
  prometheus::Counter& restarts_;
  uint64_t seen_relists_ = 0, seen_restarts_ = 0;
};

}  // namespace

PublisherApp::PublisherApp(Config config, PublisherDeps deps)
    : config_(std::move(config)),
      deps_(std::move(deps)),
      cache_(static_cast<size_t>(config_.publisher.bulk_edit_clusters)),
      leader_gauge_(&prometheus::BuildGauge()
                         .Name("syncbus_publisher_leader")
                         .Help("1 while this replica holds the leader lease and may publish")
                         .Register(*deps_.registry)
                         .Add({})),
      heartbeat_gauge_(&prometheus::BuildGauge()
                            .Name("syncbus_publisher_loop_heartbeat_seconds")
                            .Help("Unix time of the decision loop's last iteration (/healthz fails "
                                  "when it stalls)")
                            .Register(*deps_.registry)
                            .Add({})) {}

void PublisherApp::Beat() {
  Clock& clock = *deps_.clock;
  heartbeat_ns_.store(std::chrono::nanoseconds(clock.Now().time_since_epoch()).count());
  heartbeat_gauge_->Set(std::chrono::duration<double>(clock.WallNow().time_since_epoch()).count());
}

Status PublisherApp::healthy() const {
  int64_t beat = heartbeat_ns_.load();
  if (beat < 0) return Status::Ok();  // still starting
  auto since = deps_.clock->Now().time_since_epoch() - std::chrono::nanoseconds(beat);
  if (since > kStallLimit) {
    return Unavailable(
        "decision loop stalled for " +
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(since).count()) + "s");
  }
  return Status::Ok();
}

Status PublisherApp::ready() const {
  if (!cache_.synced()) return Unavailable("hub cache not synced yet");
  if (!connected_.load()) {
    std::lock_guard<std::mutex> lock(election_mu_);
    if (!election_problem_.empty()) return Unavailable("not the leader: " + election_problem_);
    return Unavailable("not connected to the broker (a standby connects once it leads)");
  }
  return Status::Ok();
}

Status PublisherApp::Run(const std::atomic<bool>& stop) {
  Clock& clock = *deps_.clock;
  const std::string& ns = config_.publisher.ns;
  struct Watched {
    kube::Resource resource;
    HubKind kind;
    bool namespaced;
    bool metadata_only;
  };
  std::vector<Watched> watched = {
      {res::kClusterDeployments, HubKind::kClusterDeployment, true, false},
      {res::kSyncSets, HubKind::kSyncSet, true, false},
      {res::kSelectorSyncSets, HubKind::kSelectorSyncSet, false, false},
      {res::kClusterSyncs, HubKind::kClusterSync, true, false},
      {res::kClusterSyncLeases, HubKind::kClusterSyncLease, true, false},
  };
  if (config_.publisher.watch_source_secrets) {
    // secretMappings' sources and kubeconfig Secrets: their versions, as metadata; the hub never
    // sends their data.
    watched.push_back({res::kSecrets, HubKind::kSecret, true, true});
  } else {
    cache_.Replace(HubKind::kSecret, {});  // no versions: a source change waits for the reapply
  }
  std::vector<std::unique_ptr<CacheFeeder>> feeders;
  std::vector<std::unique_ptr<kube::Reflector>> reflectors;
  for (const auto& w : watched) {
    feeders.push_back(std::make_unique<CacheFeeder>(cache_, w.kind));
    kube::Reflector::Options options;
    options.clock = &clock;
    options.list.metadata_only = w.metadata_only;
    reflectors.push_back(std::make_unique<kube::Reflector>(
        *deps_.hub, kube::Collection(w.resource, w.namespaced ? ns : ""), *feeders.back(),
        options));
    reflectors.back()->Start();
  }
  std::vector<ReflectorMetrics> reflector_metrics;
  for (size_t i = 0; i < watched.size(); ++i) {
    reflector_metrics.emplace_back(*deps_.registry, *reflectors[i], watched[i].resource.resource);
  }
  auto beat = [&] {
    Beat();
    for (auto& m : reflector_metrics) m.Update();
  };
  log::Info("watching the hub", {{"namespace", ns.empty() ? "(all)" : ns}});
  while (!stop.load() && !cache_.synced()) {
    beat();
    SleepUnlessStopped(std::chrono::milliseconds(100), stop);
  }
  if (stop.load()) return Status::Ok();
  log::Info("hub cache synced", {{"clusters", cache_.cluster_count()}});

  PublisherOptions options;
  options.reapply = {config_.publisher.resync_interval, config_.publisher.resync_jitter};
  // Without an interval of its own the publisher follows HiveConfig's syncSetReapplyInterval, as
  // Hive's clustersync does: read now and every few minutes.
  const bool follow_hive_config = !config_.publisher.resync_interval_set;
  kube::Client& quick_hub = deps_.quick_hub ? *deps_.quick_hub : *deps_.hub;
  SteadyTime hive_config_read{};
  auto hive_interval = [&]() -> std::optional<std::chrono::milliseconds> {
    hive_config_read = clock.Now();
    auto read = ReadHiveReapplyInterval(quick_hub);
    if (!read.ok()) {
      log::Warn("cannot read HiveConfig's syncSetReapplyInterval; keeping the reapply interval",
                {{"error", read.status().message()}});
      return std::nullopt;
    }
    return read->value_or(config_.publisher.resync_interval);
  };
  if (follow_hive_config) {
    if (auto interval = hive_interval()) options.reapply.interval = *interval;
    log::Info("full reapply interval", {{"interval", FormatDuration(options.reapply.interval)},
                                        {"from", "HiveConfig (or the default)"}});
  }
  options.max_publish_rate = config_.publisher.max_publish_rate;
  options.max_outstanding = static_cast<size_t>(config_.publisher.max_outstanding);
  options.outstanding_timeout = config_.publisher.outstanding_timeout;
  TraceRecorder trace("syncbus-publisher/" + deps_.identity, *deps_.registry);
  options.trace = &trace;
  std::unique_ptr<LeaderElector> elector;
  std::thread election;
  const auto& le = config_.publisher.leader_election;
  if (le.enabled) {
    elector = std::make_unique<LeaderElector>(quick_hub, le, deps_.identity, clock);
    options.may_publish = [&elector] { return elector->is_leader(); };
    election = std::thread([&] {
      while (!stop.load()) {
        leader_gauge_->Set(elector->Tick() ? 1 : 0);
        {
          std::lock_guard<std::mutex> lock(election_mu_);
          election_problem_ = elector->problem();
        }
        SleepUnlessStopped(elector->NextAttemptIn(), stop);
      }
    });
  } else {
    leader_gauge_->Set(1);
  }

  // One session object for the process: Connect() re-opens it after a failure, and the
  // publisher keeps its outstanding/pending state across reconnects.
  std::unique_ptr<amqp::Session> session = deps_.new_session();
  // Between attempts it beats, and a replica that stopped leading stops trying (a standby
  // connects once it leads).
  amqp::Reconnector reconnector(
      *session, {}, clock, RealRandom(),
      WaitUnlessStopped(stop, beat, [&elector] { return !elector || elector->is_leader(); }),
      [&](amqp::Session& s) {
        return amqp::DeclareTopology(s, amqp::SyncbusTopology(config_.topology));
      });
  Publisher publisher(options, cache_, *session, clock, *deps_.registry);
  bool startup = true;
  bool leading = false;
  while (!stop.load()) {
    beat();
    if (elector && !elector->is_leader()) {
      if (leading) {
        log::Warn("not the leader any more: stopped publishing");
        publisher.Reset();  // the next leader recomputes everything from its own cache
        leading = false;
      }
      cache_.TakeDirty(options.tick);  // stay warm; decisions wait for leadership
      continue;
    }
    if (!leading) {
      leading = true;
      startup =
          true;  // a new leader compares the whole fleet (without a storm: only what is needed)
    }
    if (!session->connected()) {
      connected_.store(false);
      if (!reconnector.EnsureConnected().ok()) continue;  // stopping, or no longer leading
      connected_.store(true);
      log::Info("connected to the broker",
                {{"brokers", config_.amqp.DescribeEndpoints()}, {"vhost", config_.amqp.vhost}});
    }
    if (follow_hive_config && clock.Now() - hive_config_read >= kHiveConfigPeriod) {
      auto interval = hive_interval();
      if (interval && *interval != publisher.reapply_interval()) {
        log::Info("HiveConfig changed the full reapply interval",
                  {{"from", FormatDuration(publisher.reapply_interval())},
                   {"to", FormatDuration(*interval)}});
        publisher.SetReapplyInterval(*interval);
        cache_.MarkAllDirty();
      }
    }
    // The first round looks at every cluster; later rounds at what changed (plus what is
    // pending, due or outstanding too long, which the publisher adds itself).
    DirtyEdits edits;
    std::vector<std::string> keys =
        startup ? cache_.AllClusterKeys() : cache_.TakeDirty(options.tick, &edits);
    auto stats = publisher.Reconcile(keys, startup, edits);
    if (!stats.ok()) {
      if (stats.status().code() == Code::kCancelled) continue;  // lost the lease mid-round
      // Nothing is lost: unconfirmed clusters stay pending in the publisher.
      log::Warn("publishing failed; reconnecting", {{"error", stats.status().message()}});
      session->Close();
      continue;
    }
    startup = false;
    // rabbitmq-c answers the broker's heartbeats only inside calls: a round that sent nothing
    // must still touch the connection, or an idle leader is dropped after two intervals.
    if (Status alive = session->Poll(); !alive.ok()) {
      log::Warn("broker connection lost; reconnecting", {{"error", alive.message()}});
      session->Close();
    }
  }
  connected_.store(false);
  session->Close();  // every confirm was awaited inside Reconcile: nothing left to flush
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
