#include "consumer/consumer_app.h"

#include "common/amqp/syncbus_topology.h"
#include "common/backoff.h"
#include "common/daemon.h"
#include "common/log.h"
#include "common/random.h"
#include "consumer/cluster_lease.h"
#include "consumer/cluster_syncer.h"
#include "consumer/delivery_loop.h"
#include "consumer/target_clients.h"

namespace syncbus::consumer {

ConsumerApp::ConsumerApp(Config config, ConsumerDeps deps) : config_(std::move(config)), deps_(std::move(deps)) {}

Status ConsumerApp::ready() const {
  return consuming_.load() ? Status::Ok() : Unavailable("not consuming from the broker");
}

Status ConsumerApp::healthy() const {
  int64_t seen = loop_seen_ns_.load();
  if (seen < 0) return Status::Ok();   // starting
  auto since = deps_.clock->Now().time_since_epoch() - std::chrono::nanoseconds(seen);
  if (since > kLoopStallLimit) return Unavailable("the delivery loop has not run for " + std::to_string(
                                                      std::chrono::duration_cast<std::chrono::seconds>(since).count()) + " s");
  return Status::Ok();
}

Status ConsumerApp::Run(const std::atomic<bool>& stop) {
  Clock& clock = *deps_.clock;
  // Pacing per target happens in the syncer's request limiter, not in the clients.
  TargetClients targets(deps_.transport, 0, static_cast<size_t>(config_.consumer.target_clients));
  const ConsumerConfig& c = config_.consumer;
  SyncerOptions syncer_options;
  syncer_options.parallel_sync_sets = c.parallel_sync_sets;
  syncer_options.max_in_flight = c.max_in_flight;
  syncer_options.per_cluster_in_flight = c.per_cluster_in_flight;
  syncer_options.per_cluster_qps = c.per_cluster_qps;
  syncer_options.request_timeout = c.request_timeout;
  syncer_options.cluster_deadline = c.cluster_deadline;
  ClusterSyncer syncer(syncer_options, *deps_.hub, targets, clock, *deps_.registry);
  DeliveryOptions options;
  options.prefetch = static_cast<uint16_t>(config_.consumer.prefetch);
  options.workers = config_.consumer.prefetch;
  options.retry = {config_.topology.retry_tiers, config_.consumer.max_attempts};
  options.delivery_limit = config_.topology.delivery_limit;
  TraceRecorder trace("syncbus-consumer/" + deps_.identity, *deps_.registry);
  options.trace = &trace;
  LeaseOptions lease_options;
  lease_options.identity = deps_.identity;
  lease_options.duration = std::chrono::duration_cast<std::chrono::seconds>(c.cluster_lease.duration);
  lease_options.renew_interval = c.cluster_lease.renew_interval;
  lease_options.safety_margin = c.cluster_lease.safety_margin;
  ClusterLeases leases(lease_options, *deps_.hub, clock, *deps_.registry);
  leases.StartRenewing();
  std::unique_ptr<amqp::Session> session = deps_.new_session();
  DeliveryLoop loop(
      options, *session,
      [&syncer](const SyncRequest& request, const SyncFence& fence) { return syncer.Sync(request, fence); },
      &leases, clock, *deps_.registry);
  Backoff backoff({}, RealRandom());
  while (!stop.load()) {
    loop_seen_ns_.store(std::chrono::nanoseconds(clock.Now().time_since_epoch()).count());
    if (!consuming_.load()) {
      Status s = session->Connect();
      if (s.ok()) s = session->Declare(amqp::SyncbusTopology(config_.topology));
      if (s.ok()) s = loop.Subscribe();
      if (!s.ok()) {
        auto delay = backoff.Next();
        log::Warn("broker unavailable, retrying", {{"error", s.message()}, {"in_ms", delay.count()}});
        session->Close();
        SleepUnlessStopped(delay, stop);
        continue;
      }
      consuming_.store(true);
      backoff.Reset();
      log::Info("consuming", {{"host", config_.amqp.host}, {"vhost", config_.amqp.vhost},
                              {"prefetch", config_.consumer.prefetch}});
    }
    Status s = loop.Step(std::chrono::milliseconds(50));
    if (!s.ok()) {
      // In-flight results of this connection are dropped; the broker redelivers them.
      log::Warn("broker connection lost; reconnecting", {{"error", s.message()}});
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
  return Status::Ok();
}

}  // namespace syncbus::consumer
