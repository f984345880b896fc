#include "consumer/consumer_app.h"

#include <thread>

#include "common/amqp/reconnect.h"
#include "common/bus/daemon.h"
#include "common/bus/topology.h"
#include "common/bus/trace_flusher.h"
#include "common/kube/reflector.h"
#include "common/log.h"
#include "common/random.h"
#include "consumer/cluster_lease.h"
#include "consumer/cluster_preview.h"
#include "consumer/cluster_syncer.h"
#include "consumer/consumer_liveness.h"
#include "consumer/consumers_liveness.h"
#include "consumer/delivery_loop.h"
#include "consumer/event_recorder.h"
#include "consumer/hive_client_metrics.h"
#include "consumer/hub_mirror.h"
#include "consumer/hub_reader.h"
#include "consumer/preview_loop.h"
#include "consumer/sync_plan.h"
#include "consumer/target_clients.h"

namespace syncbus::consumer {
namespace {

SyncerOptions SyncerOptionsOf(const ConsumerConfig& c) {
  SyncerOptions options;
  options.parallel_sync_sets = c.parallel_sync_sets;
  options.take_over_managers = {c.take_over_managers.begin(), c.take_over_managers.end()};
  options.max_in_flight = c.max_in_flight;
  options.per_cluster_in_flight = c.per_cluster_in_flight;
  options.per_cluster_qps = c.per_cluster_qps;
  options.request_timeout = c.request_timeout;
  options.cluster_deadline = c.cluster_deadline;
  return options;
}

LeaseOptions LeaseOptionsOf(const ConsumerConfig& c, const std::string& identity) {
  LeaseOptions options;
  options.identity = identity;
  options.duration = std::chrono::duration_cast<std::chrono::seconds>(c.cluster_lease.duration);
  options.renew_interval = c.cluster_lease.renew_interval;
  options.safety_margin = c.cluster_lease.safety_margin;
  options.release_by_status = c.cluster_lease.release_by_status;
  return options;
}

// The delivery loop's options but its trace and events: prefetch, workers, retry tiers and the
// delivery limit, and how it tells that another consumer already did what a returning request
// asks (`reader`, which outlives the loop).
DeliveryOptions DeliveryOptionsOf(const Config& config, HubReader& reader) {
  DeliveryOptions options;
  options.prefetch = static_cast<uint16_t>(config.consumer.prefetch);
  options.workers = config.consumer.prefetch;
  options.retry = {config.topology.retry_tiers, config.consumer.max_attempts};
  options.delivery_limit = config.topology.delivery_limit;
  options.settled_already = [&reader](const SyncRequest& request) {
    std::optional<ClusterState> state = reader.ReadIfFresh(request);
    return state ? NoWriteReason(*state, request.full_reapply) : std::string();
  };
  return options;
}

// Sticky claims' liveness (consumer/liveness_view.h): this process's own liveness Lease, kept from
// before its first claim until after its drain, and a watch-fed view of the others'. Not
// thread-safe; the view is thread-safe.
class PoolLiveness {
 public:
  PoolLiveness(const ConsumerConfig& c, const std::string& identity, kube::Client& hub,
               Clock& clock, prometheus::Registry& registry)
      : hub_(hub),
        clock_(clock),
        ns_(c.cluster_lease.liveness_namespace),
        duration_(std::chrono::duration_cast<std::chrono::seconds>(c.cluster_lease.duration)),
        own_({identity, ns_, duration_, c.cluster_lease.renew_interval,
              c.cluster_lease.safety_margin},
             hub, clock, registry),
        view_(own_, hub, ns_, clock) {
    kube::Reflector::Options options;
    options.clock = &clock;
    options.list.label_selector = kLivenessSelector;
    reflector_ = std::make_unique<kube::Reflector>(
        hub, kube::Collection(kube::resources::kLeases, ns_), view_, options);
  }
  ~PoolLiveness() { reflector_->Stop(); }

  // Takes this process's liveness Lease (retried until it is taken or `stop`), sweeps the Leases
  // of consumers long gone, starts renewing and watching. False when stopped first.
  bool Start(const std::atomic<bool>& stop) {
    while (!stop.load()) {
      Status started = own_.Start();
      if (started.ok()) break;
      // The usual cause at a first install: deploy/liveness not applied.
      const bool no_namespace = started.code() == Code::kNotFound;
      log::Warn(no_namespace ? "taking this consumer's liveness Lease failed, its namespace does "
                               "not exist (apply deploy/liveness, or set "
                               "consumer.clusterLease.sticky: false); retrying"
                             : "taking this consumer's liveness Lease failed; retrying",
                {{"namespace", ns_}, {"error", started.message()}});
      SleepUnlessStopped(std::chrono::seconds(2), stop);
    }
    if (stop.load()) return false;
    own_.StartRenewing();
    reflector_->Start();
    auto swept = SweepExpiredLiveness(hub_, ns_, clock_.WallNow(), 4 * duration_);
    if (!swept.ok()) {
      log::Warn("sweeping the liveness Leases of gone consumers failed",
                {{"error", swept.status().message()}});
    }
    return true;
  }
  // After the drain: its claims are free for the others at once.
  void Stop() {
    reflector_->Stop();
    if (Status s = own_.Stop(); !s.ok())
      log::Warn("deleting this consumer's liveness Lease failed; it lapses by itself",
                {{"error", s.message()}});
  }
  LivenessView& view() { return view_; }

 private:
  kube::Client& hub_;
  Clock& clock_;
  const std::string ns_;
  const std::chrono::seconds duration_;
  ConsumerLiveness own_;
  ConsumersLiveness view_;
  std::unique_ptr<kube::Reflector> reflector_;
};

// The hub state the syncs read: from a mirror fed by one reflector per collection, or, with the
// mirror disabled, from the hub directly. Not thread-safe; Stop() (or each reflector's
// destructor, members last to first) stops the reflectors before the mirror goes.
class HubView {
 public:
  HubView(const Config& config, kube::Client& hub, Clock& clock, prometheus::Registry& registry)
      : direct_(hub) {
    const ConsumerConfig& c = config.consumer;
    if (!c.hub_mirror.enabled) return;
    namespace res = kube::resources;
    const std::string& ns = config.publisher.ns;
    struct Watched {
      HubCollection collection;
      kube::ObjectRef ref;
      std::string selector;
    };
    const Watched watched[] = {
        {HubCollection::kClusterDeployments, kube::Collection(res::kClusterDeployments, ns), ""},
        {HubCollection::kSyncSets, kube::Collection(res::kSyncSets, ns), ""},
        {HubCollection::kSelectorSyncSets, kube::Collection(res::kSelectorSyncSets), ""},
        {HubCollection::kClusterSyncs, kube::Collection(res::kClusterSyncs, ns), ""},
        {HubCollection::kClusterSyncLeases, kube::Collection(res::kClusterSyncLeases, ns), ""},
    };
    for (const Watched& w : watched) {
      kube::Reflector::Options options;
      options.clock = &clock;
      options.list.label_selector = w.selector;
      reflectors_.push_back(
          std::make_unique<kube::Reflector>(hub, w.ref, mirror_.handler(w.collection), options));
      reflectors_.back()->Start();
    }
    mirrored_ =
        std::make_unique<MirrorHubReader>(mirror_, direct_, c.hub_mirror.max_wait, registry);
  }

  // Waits for the mirror's first lists (at once without a mirror); false when stopped first.
  bool WaitSynced(const std::atomic<bool>& stop) {
    if (!mirrored_) return !stop.load();
    while (!stop.load() && !mirror_.synced()) {
      SleepUnlessStopped(std::chrono::milliseconds(100), stop);
    }
    return !stop.load();
  }
  void Stop() {
    for (auto& r : reflectors_) r->Stop();
  }
  HubReader& reader() { return mirrored_ ? static_cast<HubReader&>(*mirrored_) : direct_; }
  HubMirror* mirror() { return mirrored_ ? &mirror_ : nullptr; }

 private:
  DirectHubReader direct_;
  HubMirror mirror_;
  std::vector<std::unique_ptr<kube::Reflector>> reflectors_;
  std::unique_ptr<MirrorHubReader> mirrored_;
};

}  // namespace

ConsumerApp::ConsumerApp(Config config, ConsumerDeps deps)
    : config_(std::move(config)), deps_(std::move(deps)) {}

Status ConsumerApp::ready() const {
  return consuming_.load() ? Status::Ok() : Unavailable("not consuming from the broker");
}

Status ConsumerApp::healthy() const {
  int64_t seen = loop_seen_ns_.load();
  if (seen < 0) return Status::Ok();  // starting
  auto since = deps_.clock->Now().time_since_epoch() - std::chrono::nanoseconds(seen);
  if (since > kLoopStallLimit)
    return Unavailable(
        "the delivery loop has not run for " +
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(since).count()) + " s");
  return Status::Ok();
}

Status ConsumerApp::Run(const std::atomic<bool>& stop) {
  Clock& clock = *deps_.clock;
  const ConsumerConfig& c = config_.consumer;
  // Pacing per target happens in the syncer's request limiter, not in the clients. Target
  // requests are counted as Hive's clustersync counts its remote clients' (hive_kube_client_*).
  TargetClients targets(std::make_shared<HiveClientMetrics>(deps_.transport, *deps_.registry), 0,
                        static_cast<size_t>(c.target_clients),
                        "syncbus-consumer/" + deps_.identity);
  HubView hub_view(config_, *deps_.hub, clock, *deps_.registry);
  if (!hub_view.WaitSynced(stop)) return Status::Ok();
  if (hub_view.mirror() != nullptr) {
    const std::string& ns = config_.publisher.ns;
    log::Info("hub mirror synced", {{"namespace", ns.empty() ? "(all)" : ns}});
  }
  std::unique_ptr<HubReader> decorated =
      deps_.decorate_reader ? deps_.decorate_reader(hub_view.reader()) : nullptr;
  HubReader& reader = decorated ? *decorated : hub_view.reader();
  auto& kubeconfig_reads =
      prometheus::BuildCounter()
          .Name("syncbus_consumer_kubeconfig_reads_total")
          .Help(
              "Admin kubeconfig Secrets read from the hub (by name), by what for: sync, preview "
              "(a consumer reads one when it meets a cluster first, or its Secret changed)")
          .Register(*deps_.registry);
  SyncerOptions syncer_options = SyncerOptionsOf(c);
  syncer_options.kubeconfig_reads = &kubeconfig_reads.Add({{"for", "sync"}});
  ClusterSyncer syncer(syncer_options, *deps_.hub, reader, targets, clock, *deps_.registry);
  DeliveryOptions options = DeliveryOptionsOf(config_, reader);
  TraceRecorder trace("syncbus-consumer/" + deps_.identity, *deps_.registry);
  options.trace = &trace;
  TraceFlusher flusher(trace,
                       (deps_.new_trace_session ? deps_.new_trace_session : deps_.new_session)(),
                       clock, RealRandom());
  flusher.Start();
  std::unique_ptr<EventRecorder> events;
  if (c.events) {
    EventRecorder::Options event_options;
    event_options.host = deps_.identity;
    events = std::make_unique<EventRecorder>(event_options, *deps_.hub, hub_view.mirror(), clock,
                                             RealRandom(), *deps_.registry);
    options.events = events.get();
  }
  LeaseOptions lease_options = LeaseOptionsOf(c, deps_.identity);
  std::unique_ptr<PoolLiveness> liveness;
  if (c.cluster_lease.sticky && hub_view.mirror() != nullptr) {
    liveness =
        std::make_unique<PoolLiveness>(c, deps_.identity, *deps_.hub, clock, *deps_.registry);
    if (!liveness->Start(stop)) return Status::Ok();
    lease_options.liveness = &liveness->view();
    lease_options.fleet_size = [mirror = hub_view.mirror()] { return mirror->clusters(); };
    options.own_queues = {amqp::ConsumerQueueName(deps_.identity, amqp::Lane::kChange),
                          amqp::ConsumerQueueName(deps_.identity, amqp::Lane::kResync)};
  }
  ClusterLeases leases(std::move(lease_options), *deps_.hub, clock, *deps_.registry,
                       hub_view.mirror());
  leases.StartRenewing();
  std::thread previews;
  std::unique_ptr<ClusterPreviewer> previewer;
  if (deps_.new_preview_session && c.preview_workers > 0) {
    ClusterPreviewerOptions preview_options;
    preview_options.request_timeout = c.request_timeout;
    preview_options.kubeconfig_reads = &kubeconfig_reads.Add({{"for", "preview"}});
    preview_options.preview.take_over_managers = {c.take_over_managers.begin(),
                                                  c.take_over_managers.end()};
    previewer = std::make_unique<ClusterPreviewer>(preview_options, *deps_.hub, reader, targets);
    previews = std::thread([this, &previewer, &stop] {
      ServePreviews(
          [&previewer](const std::string& id, const Json& set, const PreviewCluster& cluster) {
            return previewer->Preview(id, set, cluster);
          },
          stop);
    });
  }
  std::unique_ptr<amqp::Session> session = deps_.new_session();
  DeliveryLoop loop(
      options, *session,
      [&syncer](const SyncRequest& request, const SyncFence& fence) {
        return syncer.Sync(request, fence);
      },
      &leases, clock, *deps_.registry);
  Consume(loop, *session, stop);
  if (liveness) liveness->Stop();
  flusher.Stop();  // the drain's last events too
  if (previews.joinable()) previews.join();
  hub_view.Stop();
  return Status::Ok();
}

void ConsumerApp::ServePreviews(const PreviewLoop::PreviewFn& preview,
                                const std::atomic<bool>& stop) {
  std::unique_ptr<amqp::Session> session = deps_.new_preview_session();
  PreviewLoop loop({config_.consumer.preview_workers}, *session, preview, *deps_.registry);
  amqp::Reconnector reconnector(
      *session, {}, *deps_.clock, RealRandom(), WaitUnlessStopped(stop, [] {}),
      [&](amqp::Session& s) {
        SYNCBUS_RETURN_IF_ERROR(amqp::DeclareTopology(s, amqp::SyncbusTopology(config_.topology)));
        return loop.Subscribe();
      });
  bool connected = false;
  while (!stop.load()) {
    if (!connected) {
      if (!reconnector.EnsureConnected().ok()) continue;  // stopping
      connected = true;
    }
    if (Status s = loop.Step(std::chrono::milliseconds(100)); !s.ok()) {
      log::Warn("preview connection lost; reconnecting", {{"error", s.message()}});
      connected = false;
      session->Close();
    }
  }
  session->Close();
}

void ConsumerApp::Consume(DeliveryLoop& loop, amqp::Session& session,
                          const std::atomic<bool>& stop) {
  Clock& clock = *deps_.clock;
  auto beat = [&] {
    loop_seen_ns_.store(std::chrono::nanoseconds(clock.Now().time_since_epoch()).count());
  };
  amqp::Reconnector reconnector(
      session, {}, clock, RealRandom(), WaitUnlessStopped(stop, beat), [&](amqp::Session& s) {
        SYNCBUS_RETURN_IF_ERROR(amqp::DeclareTopology(s, amqp::SyncbusTopology(config_.topology)));
        if (config_.consumer.cluster_lease.sticky) {
          SYNCBUS_RETURN_IF_ERROR(
              amqp::DeclareTopology(s, amqp::ConsumerTopology(deps_.identity, config_.topology)));
        }
        return loop.Subscribe();
      });
  while (!stop.load()) {
    beat();
    if (!consuming_.load()) {
      if (!reconnector.EnsureConnected().ok()) continue;  // stopping
      consuming_.store(true);
      // `identity`: the holder of its cluster Leases and its user agent on the hub and targets
      // ("syncbus-consumer/<identity>"), unique per process.
      log::Info("consuming", {{"brokers", config_.amqp.DescribeEndpoints()},
                              {"vhost", config_.amqp.vhost},
                              {"prefetch", config_.consumer.prefetch},
                              {"identity", deps_.identity}});
    }
    Status s = loop.Step(std::chrono::milliseconds(50));
    if (!s.ok()) {
      // In-flight results of this connection are dropped; the broker redelivers them, so their
      // syncs stop and give their cluster leases back to whoever gets them now.
      log::Warn("broker connection lost; reconnecting", {{"error", s.message()}});
      loop.ConnectionLost();
      consuming_.store(false);
      session.Close();
    }
  }
  if (consuming_.load()) {
    size_t left = loop.Drain(config_.consumer.shutdown_grace);
    log::Info("stopped consuming", {{"unsettled", left}});
    // What is left is redelivered once the session closes; its requests must not hold the exit.
    if (left > 0 && deps_.abort_io) deps_.abort_io();
  }
  consuming_.store(false);
  session.Close();
}

}  // namespace syncbus::consumer
