#include "publisher/publisher_app.h"

#include <thread>
#include <utility>
#include <vector>

#include "common/amqp/reconnect.h"
#include "common/bus/daemon.h"
#include "common/bus/topology.h"
#include "common/bus/trace_flusher.h"
#include "common/kube/reflector.h"
#include "common/log.h"
#include "common/random.h"
#include "common/time_format.h"
#include "publisher/hive_config.h"
#include "publisher/leader_elector.h"
#include "publisher/publisher.h"
#include "publisher/rollout_keeper.h"

namespace syncbus::publisher {
namespace {

namespace res = kube::resources;

// How often HiveConfig is read again for a changed reapply interval.
constexpr std::chrono::minutes kHiveConfigPeriod{5};
// How often the leader looks at the rollouts in waves.
constexpr std::chrono::seconds kRolloutPeriod{1};

// Feeds one reflector's events into the cache as one kind; a list's pages are parsed as they
// arrive.
class CacheFeeder final : public kube::ReflectorHandler {
 public:
  CacheFeeder(HubCache& cache, HubKind kind) : cache_(cache), kind_(kind), listing_(kind) {}
  void OnListStart() override { listing_ = HubCache::Listing(kind_); }
  void OnListPage(std::vector<Json>& items) override { listing_.AddPage(items); }
  void OnReplace(std::vector<Json> items) override {
    listing_.AddPage(items);
    cache_.Replace(std::exchange(listing_, HubCache::Listing(kind_)));
  }
  void OnUpsert(Json object) override { cache_.Upsert(kind_, object); }
  void OnDelete(Json object) override { cache_.Delete(kind_, object); }
  void OnSynced() override {}
  void OnCheckpoint(const std::string& resource_version, bool bookmark) override {
    if (!bookmark) cache_.Listed(kind_, resource_version);
  }

 private:
  HubCache& cache_;
  HubKind kind_;
  HubCache::Listing listing_;  // the list in progress
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
                .Add({{"resource", resource}})),
        page_retries_(prometheus::BuildCounter()
                          .Name("syncbus_publisher_list_page_retries_total")
                          .Help("Hub list pages asked for again after they failed (the list "
                                "resumes at that page), by resource")
                          .Register(registry)
                          .Add({{"resource", resource}})) {}
  void Update() {
    uint64_t relists = reflector_.relists(), restarts = reflector_.watch_restarts(),
             page_retries = reflector_.page_retries();
    relists_.Increment(static_cast<double>(relists - seen_relists_));
    restarts_.Increment(static_cast<double>(restarts - seen_restarts_));
    page_retries_.Increment(static_cast<double>(page_retries - seen_page_retries_));
    seen_relists_ = relists;
    seen_restarts_ = restarts;
    seen_page_retries_ = page_retries;
  }

 private:
  const kube::Reflector& reflector_;
  prometheus::Counter& relists_;
  prometheus::Counter& restarts_;
  prometheus::Counter& page_retries_;
  uint64_t seen_relists_ = 0, seen_restarts_ = 0, seen_page_retries_ = 0;
};

// The hub's collections the publisher mirrors into its cache, a reflector each, with their
// metrics. Not thread-safe; Stop() (or each reflector's destructor) stops the reflectors.
class HubWatch {
 public:
  HubWatch(const PublisherConfig& config, HubCache& cache, kube::Client& hub, Clock& clock,
           prometheus::Registry& registry) {
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
    if (config.watch_source_secrets) {
      // secretMappings' sources and kubeconfig Secrets: their versions, as metadata; the hub
      // never sends their data.
      watched.push_back({res::kSecrets, HubKind::kSecret, true, true});
    } else {
      cache.Replace(HubKind::kSecret, {});  // no versions: a source change waits for the reapply
    }
    for (const auto& w : watched) {
      feeders_.push_back(std::make_unique<CacheFeeder>(cache, w.kind));
      kube::Reflector::Options options;
      options.clock = &clock;
      options.list.metadata_only = w.metadata_only;
      reflectors_.push_back(std::make_unique<kube::Reflector>(
          hub, kube::Collection(w.resource, w.namespaced ? config.ns : ""), *feeders_.back(),
          options));
      reflectors_.back()->Start();
      metrics_.emplace_back(registry, *reflectors_.back(), w.resource.resource);
    }
  }

  void UpdateMetrics() {
    for (auto& m : metrics_) m.Update();
  }
  void Stop() {
    for (auto& r : reflectors_) r->Stop();
  }

 private:
  std::vector<std::unique_ptr<CacheFeeder>> feeders_;
  std::vector<std::unique_ptr<kube::Reflector>> reflectors_;
  std::vector<ReflectorMetrics> metrics_;
};

// The full reapply interval as HiveConfig's syncSetReapplyInterval gives it (the configured
// default when it gives none), as Hive's clustersync reads it: read at start and again every
// kHiveConfigPeriod. Not thread-safe.
}  // namespace

class PublisherApp::HiveConfigFollower {
 public:
  HiveConfigFollower(kube::Client& hub, Clock& clock, std::chrono::milliseconds fallback)
      : hub_(hub), clock_(clock), fallback_(fallback) {}

  // Reads it now; nullopt (logged) when it cannot be read.
  std::optional<std::chrono::milliseconds> Read() {
    read_at_ = clock_.Now();
    auto read = ReadHiveReapplyInterval(hub_);
    if (!read.ok()) {
      log::Warn("cannot read HiveConfig's syncSetReapplyInterval; keeping the reapply interval",
                {{"error", read.status().message()}});
      return std::nullopt;
    }
    return read->value_or(fallback_);
  }
  // Reads it when kHiveConfigPeriod has passed since the last read; nullopt otherwise.
  std::optional<std::chrono::milliseconds> ReadWhenDue() {
    if (clock_.Now() - read_at_ < kHiveConfigPeriod) return std::nullopt;
    return Read();
  }

 private:
  kube::Client& hub_;
  Clock& clock_;
  std::chrono::milliseconds fallback_;
  SteadyTime read_at_{};
};

namespace {

PublisherOptions PublisherOptionsOf(const PublisherConfig& config) {
  PublisherOptions options;
  options.reapply = {config.resync_interval, config.resync_jitter};
  options.max_publish_rate = config.max_publish_rate;
  options.max_outstanding = static_cast<size_t>(config.max_outstanding);
  options.outstanding_timeout = config.outstanding_timeout;
  options.round_clusters = static_cast<size_t>(config.round_clusters);
  return options;
}

}  // namespace

// The leader election, ticking on a thread of its own until `stop`; each tick's result and
// problem go to `observe`. is_leader() is thread-safe. The destructor joins the thread (set
// `stop` first) and gives the lease back.
class PublisherApp::Election {
 public:
  Election(kube::Client& hub, const LeaderElectionConfig& config, const std::string& identity,
           Clock& clock, const std::atomic<bool>& stop,
           std::function<void(bool leading, std::string problem)> observe)
      : elector_(hub, config, identity, clock),
        thread_([this, &stop, observe = std::move(observe)] {
          while (!stop.load()) {
            bool leading = elector_.Tick();
            observe(leading, elector_.problem());
            SleepUnlessStopped(elector_.NextAttemptIn(), stop);
          }
        }) {}
  Election(const Election&) = delete;
  Election& operator=(const Election&) = delete;
  ~Election() {
    if (thread_.joinable()) thread_.join();
    Status released = elector_.Release();
    if (!released.ok()) log::Warn("could not release the lease", {{"error", released.message()}});
  }
  bool is_leader() const { return elector_.is_leader(); }

 private:
  LeaderElector elector_;
  std::thread thread_;
};

// The rollout keeper on a thread of its own, one look every kRolloutPeriod while the replica
// leads and is connected to the broker (no wave is released while nothing can be published), its
// gauges forgotten when it stops leading. Its hub writes (a set's state, an Event) wait on the
// hub, never on the decision loop: an edit is published while the hub is slow to answer a wave's
// release. The destructor joins the thread (set `stop` first).
class PublisherApp::RolloutLoop {
 public:
  RolloutLoop(HubCache& cache, kube::Client& hub, Clock& clock, prometheus::Registry& registry,
              const std::string& identity, const std::atomic<bool>& stop,
              std::function<bool()> leading, const std::atomic<bool>& connected)
      : keeper_(cache, hub, clock, registry, identity),
        thread_([this, &stop, leading = std::move(leading), &connected] {
          bool was_leading = false;
          while (!stop.load()) {
            if (leading()) {
              was_leading = true;
              if (connected.load()) (void)keeper_.Tick();  // logged there; the next look retries
            } else if (was_leading) {
              keeper_.Reset();  // the next leader reports
              was_leading = false;
            }
            SleepUnlessStopped(kRolloutPeriod, stop);
          }
        }) {}
  RolloutLoop(const RolloutLoop&) = delete;
  RolloutLoop& operator=(const RolloutLoop&) = delete;
  ~RolloutLoop() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  RolloutKeeper keeper_;
  std::thread thread_;
};

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
  const PublisherConfig& config = config_.publisher;
  HubWatch watch(config, cache_, *deps_.hub, clock, *deps_.registry);
  auto beat = [&] {
    Beat();
    watch.UpdateMetrics();
  };
  log::Info("watching the hub", {{"namespace", config.ns.empty() ? "(all)" : config.ns}});
  while (!stop.load() && !cache_.synced()) {
    beat();
    SleepUnlessStopped(std::chrono::milliseconds(100), stop);
  }
  if (stop.load()) return Status::Ok();
  log::Info("hub cache synced", {{"clusters", cache_.cluster_count()}});

  PublisherOptions options = PublisherOptionsOf(config);
  kube::Client& quick_hub = deps_.quick_hub ? *deps_.quick_hub : *deps_.hub;
  // Without an interval of its own the publisher follows HiveConfig's syncSetReapplyInterval, as
  // Hive's clustersync does.
  std::optional<HiveConfigFollower> hive_config;
  if (!config.resync_interval_set) {
    hive_config.emplace(quick_hub, clock, config.resync_interval);
    if (auto interval = hive_config->Read()) options.reapply.interval = *interval;
    log::Info("full reapply interval", {{"interval", FormatDuration(options.reapply.interval)},
                                        {"from", "HiveConfig (or the default)"}});
  }
  TraceRecorder trace("syncbus-publisher/" + deps_.identity, *deps_.registry);
  options.trace = &trace;
  TraceFlusher flusher(trace,
                       (deps_.new_trace_session ? deps_.new_trace_session : deps_.new_session)(),
                       clock, RealRandom());
  flusher.Start();
  std::unique_ptr<Election> election;
  if (config.leader_election.enabled) {
    election = std::make_unique<Election>(quick_hub, config.leader_election, deps_.identity, clock,
                                          stop, [this](bool leading, std::string problem) {
                                            leader_gauge_->Set(leading ? 1 : 0);
                                            std::lock_guard<std::mutex> lock(election_mu_);
                                            election_problem_ = std::move(problem);
                                          });
    options.may_publish = [&election] { return election->is_leader(); };
  } else {
    leader_gauge_->Set(1);
  }
  PublishUntilStopped(options, election.get(), hive_config ? &*hive_config : nullptr, beat, stop);
  election.reset();  // joined, the lease given back
  flusher.Stop();
  leader_gauge_->Set(0);
  cache_.Wake();
  watch.Stop();
  return Status::Ok();
}

void PublisherApp::PublishUntilStopped(const PublisherOptions& options, const Election* election,
                                       HiveConfigFollower* hive_config,
                                       const std::function<void()>& beat,
                                       const std::atomic<bool>& stop) {
  Clock& clock = *deps_.clock;
  auto leading = [election] { return election == nullptr || election->is_leader(); };
  // One session object for the process: Connect() re-opens it after a failure, and the
  // publisher keeps its outstanding/pending state across reconnects.
  std::unique_ptr<amqp::Session> session = deps_.new_session();
  // Between attempts it beats, and a replica that stopped leading stops trying (a standby
  // connects once it leads).
  amqp::Reconnector reconnector(*session, {}, clock, RealRandom(),
                                WaitUnlessStopped(stop, beat, leading), [&](amqp::Session& s) {
                                  return amqp::DeclareTopology(
                                      s, amqp::SyncbusTopology(config_.topology));
                                });
  Publisher publisher(options, cache_, *session, clock, *deps_.registry);
  kube::Client& quick_hub = deps_.quick_hub ? *deps_.quick_hub : *deps_.hub;
  RolloutLoop rollouts(cache_, quick_hub, clock, *deps_.registry, deps_.identity, stop, leading,
                       connected_);
  bool startup = true;
  bool was_leading = false;
  bool more = false;  // the last round left work it could have done
  while (!stop.load()) {
    beat();
    if (!leading()) {
      if (was_leading) {
        log::Warn("not the leader any more: stopped publishing");
        publisher.Reset();  // the next leader recomputes everything from its own cache
        was_leading = false;
      }
      cache_.TakeDirty(options.tick);  // stay warm; decisions wait for leadership
      continue;
    }
    if (!was_leading) {
      was_leading = true;
      startup = true;  // a new leader compares the whole fleet (without a storm: what is needed)
    }
    if (!session->connected()) {
      connected_.store(false);
      if (!reconnector.EnsureConnected().ok()) continue;  // stopping, or no longer leading
      connected_.store(true);
      log::Info("connected to the broker",
                {{"brokers", config_.amqp.DescribeEndpoints()}, {"vhost", config_.amqp.vhost}});
    }
    if (auto interval = hive_config ? hive_config->ReadWhenDue() : std::nullopt;
        interval && *interval != publisher.reapply_interval()) {
      log::Info("HiveConfig changed the full reapply interval",
                {{"from", FormatDuration(publisher.reapply_interval())},
                 {"to", FormatDuration(*interval)}});
      publisher.SetReapplyInterval(*interval);
      cache_.MarkAllDirty();
    }
    // The first round looks at every cluster; later rounds at what changed (plus what is
    // pending, due or outstanding too long, which the publisher adds itself). While work waits
    // that only a round's size held back, the next round comes at once.
    DirtyEdits edits;
    std::vector<std::string> keys =
        startup ? cache_.AllClusterKeys()
                : cache_.TakeDirty(more ? std::chrono::milliseconds(0) : options.tick, &edits);
    auto stats = publisher.Reconcile(keys, startup, edits);
    more = stats.ok() && stats->more;
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
  session->Close();  // every confirm was awaited inside Reconcile
}

}  // namespace syncbus::publisher
