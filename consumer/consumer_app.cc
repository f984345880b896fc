#include "consumer/consumer_app.h"

#include "common/amqp/reconnect.h"
#include "common/bus/daemon.h"
#include "common/bus/topology.h"
#include "common/kube/reflector.h"
#include "common/log.h"
#include "common/random.h"
#include "consumer/cluster_lease.h"
#include "consumer/cluster_syncer.h"
#include "consumer/delivery_loop.h"
#include "consumer/event_recorder.h"
#include "consumer/hive_client_metrics.h"
#include "consumer/hub_mirror.h"
#include "consumer/hub_reader.h"
#include "consumer/sync_plan.h"
#include "consumer/target_clients.h"

namespace syncbus::consumer {

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
  // Pacing per target happens in the syncer's request limiter, not in the clients. Target
  // requests are counted as Hive's clustersync counts its remote clients' (hive_kube_client_*).
  TargetClients targets(std::make_shared<HiveClientMetrics>(deps_.transport, *deps_.registry), 0,
                        static_cast<size_t>(config_.consumer.target_clients),
                        "syncbus-consumer/" + deps_.identity);
  const ConsumerConfig& c = config_.consumer;
  SyncerOptions syncer_options;
  syncer_options.parallel_sync_sets = c.parallel_sync_sets;
  syncer_options.take_over_managers = {c.take_over_managers.begin(), c.take_over_managers.end()};
  syncer_options.max_in_flight = c.max_in_flight;
  syncer_options.per_cluster_in_flight = c.per_cluster_in_flight;
  syncer_options.per_cluster_qps = c.per_cluster_qps;
  syncer_options.request_timeout = c.request_timeout;
  syncer_options.cluster_deadline = c.cluster_deadline;
  // The state each sync reads: from the mirror, fed by one reflector per collection, or (mirror
  // disabled) from the hub directly.
  DirectHubReader direct(*deps_.hub);
  HubMirror mirror;
  std::vector<std::unique_ptr<kube::Reflector>> reflectors;
  std::unique_ptr<MirrorHubReader> mirrored;
  if (c.hub_mirror.enabled) {
    namespace res = kube::resources;
    const std::string& ns = config_.publisher.ns;
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
        {HubCollection::kLeases, kube::Collection(res::kLeases, c.cluster_lease.ns),
         kClusterLeaseSelector},
    };
    for (const Watched& w : watched) {
      kube::Reflector::Options options;
      options.clock = &clock;
      options.list.label_selector = w.selector;
      reflectors.push_back(std::make_unique<kube::Reflector>(
          *deps_.hub, w.ref, mirror.handler(w.collection), options));
      reflectors.back()->Start();
    }
    mirrored =
        std::make_unique<MirrorHubReader>(mirror, direct, c.hub_mirror.max_wait, *deps_.registry);
    while (!stop.load() && !mirror.synced())
      SleepUnlessStopped(std::chrono::milliseconds(100), stop);
    if (stop.load()) return Status::Ok();
    log::Info("hub mirror synced", {{"namespace", ns.empty() ? "(all)" : ns}});
  }
  HubReader& undecorated = mirrored ? static_cast<HubReader&>(*mirrored) : direct;
  std::unique_ptr<HubReader> decorated =
      deps_.decorate_reader ? deps_.decorate_reader(undecorated) : nullptr;
  HubReader& reader = decorated ? *decorated : undecorated;
  ClusterSyncer syncer(syncer_options, *deps_.hub, reader, targets, clock, *deps_.registry);
  DeliveryOptions options;
  options.prefetch = static_cast<uint16_t>(config_.consumer.prefetch);
  options.workers = config_.consumer.prefetch;
  options.retry = {config_.topology.retry_tiers, config_.consumer.max_attempts};
  options.delivery_limit = config_.topology.delivery_limit;
  options.settled_already = [&reader](const SyncRequest& request) {
    std::optional<ClusterState> state = reader.ReadIfFresh(request);
    return state ? NoWriteReason(*state, request.full_reapply) : std::string();
  };
  TraceRecorder trace("syncbus-consumer/" + deps_.identity, *deps_.registry);
  options.trace = &trace;
  std::unique_ptr<EventRecorder> events;
  if (c.events) {
    EventRecorder::Options event_options;
    event_options.host = deps_.identity;
    events =
        std::make_unique<EventRecorder>(event_options, *deps_.hub, mirrored ? &mirror : nullptr,
                                        clock, RealRandom(), *deps_.registry);
    options.events = events.get();
  }
  LeaseOptions lease_options;
  lease_options.ns = c.cluster_lease.ns;
  lease_options.identity = deps_.identity;
  lease_options.duration =
      std::chrono::duration_cast<std::chrono::seconds>(c.cluster_lease.duration);
  lease_options.renew_interval = c.cluster_lease.renew_interval;
  lease_options.safety_margin = c.cluster_lease.safety_margin;
  lease_options.release_by_status = c.cluster_lease.release_by_status;
  ClusterLeases leases(lease_options, *deps_.hub, clock, *deps_.registry,
                       mirrored ? &mirror : nullptr);
  leases.StartRenewing();
  std::unique_ptr<amqp::Session> session = deps_.new_session();
  DeliveryLoop loop(
      options, *session,
      [&syncer](const SyncRequest& request, const SyncFence& fence) {
        return syncer.Sync(request, fence);
      },
      &leases, clock, *deps_.registry);
  auto beat = [&] {
    loop_seen_ns_.store(std::chrono::nanoseconds(clock.Now().time_since_epoch()).count());
  };
  amqp::Reconnector reconnector(
      *session, {}, clock, RealRandom(), WaitUnlessStopped(stop, beat), [&](amqp::Session& s) {
        SYNCBUS_RETURN_IF_ERROR(amqp::DeclareTopology(s, amqp::SyncbusTopology(config_.topology)));
        return loop.Subscribe();
      });
  while (!stop.load()) {
    beat();
    if (!consuming_.load()) {
      if (!reconnector.EnsureConnected().ok()) continue;  // stopping
      consuming_.store(true);
      log::Info("consuming", {{"brokers", config_.amqp.DescribeEndpoints()},
                              {"vhost", config_.amqp.vhost},
                              {"prefetch", config_.consumer.prefetch}});
    }
    Status s = loop.Step(std::chrono::milliseconds(50));
    if (!s.ok()) {
      // In-flight results of this connection are dropped; the broker redelivers them, so their
      // syncs stop and give their cluster leases back to whoever gets them now.
      log::Warn("broker connection lost; reconnecting", {{"error", s.message()}});
      loop.ConnectionLost();
      consuming_.store(false);
      session->Close();
    }
  }
  if (consuming_.load()) {
    size_t left = loop.Drain(config_.consumer.shutdown_grace);
    log::Info("stopped consuming", {{"unsettled", left}});
    // What is left is redelivered once the session closes; its requests must not hold the exit.
    if (left > 0 && deps_.abort_io) deps_.abort_io();
  }
  consuming_.store(false);
  session->Close();
  for (auto& r : reflectors) r->Stop();
  return Status::Ok();
}

}  // namespace syncbus::consumer
