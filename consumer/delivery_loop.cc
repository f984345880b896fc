#include "consumer/delivery_loop.h"

#include "common/bus/route.h"
#include "common/bus/topology.h"
#include "common/log.h"
#include "common/time_format.h"

namespace syncbus::consumer {
namespace {

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::max(0.0, seconds) * 1000));
}

// What a sync did, for its settled event: durations of its phases and the sets it touched.
void FillSync(TraceEvent& e, const SyncOutcome& o) {
  e.prepare = Ms(o.prepare_seconds);
  e.target = Ms(o.target_seconds);
  e.store = Ms(o.store_seconds);
  if (e.error.empty() && o.kind == SyncOutcome::Kind::kSkipped) e.error = o.detail;
  for (const TraceSet& set : o.sets) {
    if (e.sets.size() == kMaxTraceSets) break;
    TraceSet copy = set;
    copy.failure = SanitizeError(copy.failure);
    e.sets.push_back(std::move(copy));
  }
}

}  // namespace

DeliveryLoop::DeliveryLoop(DeliveryOptions options, amqp::Session& session, SyncFunction sync,
                           ClusterLeases* leases, Clock& clock, prometheus::Registry& registry)
    : options_(std::move(options)),
      policy_{options_.retry, options_.delivery_limit},
      session_(session),
      sync_(std::move(sync)),
      leases_(leases),
      clock_(clock),
      deliveries_(prometheus::BuildCounter()
                      .Name("syncbus_consumer_deliveries_total")
                      .Help("Deliveries settled, by lane and outcome")
                      .Register(registry)),
      retries_(prometheus::BuildCounter()
                   .Name("syncbus_consumer_retries_total")
                   .Help("Requests sent to a delay queue, by tier")
                   .Register(registry)),
      dead_lettered_(prometheus::BuildCounter()
                         .Name("syncbus_consumer_dead_lettered_total")
                         .Help("Requests parked in the dead-letter queue, by reason")
                         .Register(registry)),
      redeliveries_(prometheus::BuildCounter()
                        .Name("syncbus_consumer_redeliveries_total")
                        .Help("Deliveries the broker marked as redelivered")
                        .Register(registry)
                        .Add({})),
      in_flight_gauge_(prometheus::BuildGauge()
                           .Name("syncbus_consumer_in_flight_clusters")
                           .Help("Requests received and not yet settled")
                           .Register(registry)
                           .Add({})),
      workers_busy_gauge_(prometheus::BuildGauge()
                              .Name("syncbus_consumer_workers_busy")
                              .Help("Workers syncing a cluster (of syncbus_consumer_workers)")
                              .Register(registry)
                              .Add({})),
      enqueue_to_ack_(prometheus::BuildHistogram()
                          .Name("syncbus_consumer_enqueue_to_ack_seconds")
                          .Help("Time from the publisher's enqueue to this consumer's ack")
                          .Register(registry)
                          .Add({}, prometheus::Histogram::BucketBoundaries{
                                       0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900})) {
  int workers = std::max(1, options_.workers);
  prometheus::BuildGauge()
      .Name("syncbus_consumer_workers")
      .Help("Workers: clusters this consumer syncs at once (consumer.prefetch)")
      .Register(registry)
      .Add({})
      .Set(workers);
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { WorkerMain(); });
}

DeliveryLoop::~DeliveryLoop() {
  abandon_.store(true);
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

size_t DeliveryLoop::in_flight() const {
  std::lock_guard lock(mu_);
  size_t waiting = 0;
  for (const auto& [k, q] : waiting_) waiting += q.size();
  return ready_change_.size() + ready_resync_.size() + ready_alone_.size() + running_ +
         finished_.size() + waiting + pending_park_count_.load();
}

Status DeliveryLoop::Subscribe() {
  {
    // Work of an older connection can no longer be acked: drop it (the broker redelivers).
    std::lock_guard lock(mu_);
    live_generation_.store(++generation_);
    for (auto* ready : {&ready_change_, &ready_resync_, &ready_alone_}) {
      for (const auto& job : *ready) active_.erase(job.request.ClusterKey());
      ready->clear();
    }
    waiting_.clear();
    finished_.clear();
  }
  pending_parks_.clear();
  pending_park_count_.store(0);
  park_hold_off_.Reset();
  channel_renewals_ = 0;
  consumer_tags_.clear();
  std::vector<std::string> queues = {amqp::WorkQueueName(amqp::Lane::kChange),
                                     amqp::WorkQueueName(amqp::Lane::kResync)};
  queues.insert(queues.end(), options_.own_queues.begin(), options_.own_queues.end());
  for (const std::string& queue : queues) {
    auto tag = session_.Consume(queue, options_.prefetch);
    if (!tag.ok()) return tag.status().Annotate("consuming " + queue);
    consumer_tags_.push_back(*tag);
  }
  return Status::Ok();
}

void DeliveryLoop::ConnectionLost() {
  // No subscription is live until Subscribe() makes the next one.
  live_generation_.store(0);
}

DeliveryLoop::Done DeliveryLoop::Run(Job job) {
  // The cluster's claim (its ClusterSyncLease; renewTime now too for a full reapply) is taken at
  // the sync's first call of the fence, which the syncer makes before its first write and after
  // making the cluster's ClusterSync: a request that needs no write costs no lease write. Later
  // calls (before every write) check that it is still held.
  std::shared_ptr<ClusterClaim> claim;
  if (leases_ != nullptr) {
    claim =
        std::make_shared<ClusterClaim>(*leases_, job.request.cluster_namespace,
                                       job.request.cluster_name, job.request.full_reapply, clock_);
  }
  SyncFence fence = [claim, this, generation = job.generation] {
    if (abandon_.load())
      return Status(Code::kCancelled, "shutting down: the delivery is left to the broker");
    if (live_generation_.load() != generation) {
      return Status(Code::kCancelled,
                    "the broker connection that delivered this request is gone (the broker hands "
                    "it to another consumer): stopping, and giving the cluster's claim back");
    }
    return claim ? claim->Check() : Status::Ok();
  };
  Result<SyncOutcome> outcome = sync_(job.request, fence);
  if (!claim) return {std::move(job), std::move(outcome), false, ""};
  if (Status refused = claim->refused(); !refused.ok()) {
    const bool busy = refused.code() == Code::kConflict;
    // Held by another live consumer (sticky claims): its queue is where the request goes.
    std::string holder = busy ? leases_->StickyHolderElsewhere(job.request.cluster_namespace,
                                                               job.request.cluster_name)
                              : "";
    return {std::move(job), refused, busy, std::move(holder)};
  }
  bool lost = claim->lost();
  claim->Finish(outcome.ok() ? outcome->status_version : "");
  // A failure after the claim was lost is the new owner's business: defer without an attempt.
  bool failed = !outcome.ok() || !outcome->failed_sets.empty();
  return {std::move(job), std::move(outcome), lost && failed, ""};
}

std::deque<DeliveryLoop::Job>& DeliveryLoop::ReadyQueueLocked(const Job& job) {
  if (job.alone) return ready_alone_;
  return job.request.lane == amqp::Lane::kChange ? ready_change_ : ready_resync_;
}

void DeliveryLoop::MakeReadyLocked(Job job) {
  job.ready = clock_.Now();
  ReadyQueueLocked(job).push_back(std::move(job));
}

void DeliveryLoop::ReleaseClusterLocked(const std::string& key) {
  auto w = waiting_.find(key);
  if (w == waiting_.end()) {
    active_.erase(key);
    return;
  }
  Job next = std::move(w->second.front());
  w->second.pop_front();
  if (w->second.empty()) waiting_.erase(w);
  MakeReadyLocked(std::move(next));
}

bool DeliveryLoop::RunnableLocked() const {
  if (alone_running_) return false;
  // A suspect waits for the jobs in flight to finish, and nothing new starts meanwhile. Syncs
  // left from a lost connection are not waited for: the broker took their deliveries back, so a
  // crash takes none of them down, and one stuck in a target's request timeout would hold up
  // this consumer's work for as long.
  if (!ready_alone_.empty()) {
    auto running = running_by_generation_.find(ready_alone_.front().generation);
    return running == running_by_generation_.end();
  }
  return !ready_change_.empty() || !ready_resync_.empty();
}

void DeliveryLoop::WorkerMain() {
  std::unique_lock lock(mu_);
  while (true) {
    work_cv_.wait(lock, [&] { return stopping_ || RunnableLocked(); });
    if (stopping_) return;
    std::deque<Job>& ready = !ready_alone_.empty()   ? ready_alone_
                             : ready_change_.empty() ? ready_resync_
                                                     : ready_change_;
    Job job = std::move(ready.front());
    ready.pop_front();
    const bool alone = job.alone;
    const uint64_t generation = job.generation;
    alone_running_ = alone;
    ++running_by_generation_[generation];
    workers_busy_gauge_.Set(static_cast<double>(++running_));
    lock.unlock();
    Done done = Run(std::move(job));
    lock.lock();
    if (alone) alone_running_ = false;
    auto same = running_by_generation_.find(generation);
    if (--same->second == 0) running_by_generation_.erase(same);
    workers_busy_gauge_.Set(static_cast<double>(--running_));
    std::string key = done.job.request.ClusterKey();
    finished_.push_back(std::move(done));
    ReleaseClusterLocked(key);  // the next delivery for the same cluster may run now
    // The end of a job may let a suspect start (nothing left in flight), or the others resume.
    work_cv_.notify_all();
  }
}

void DeliveryLoop::Enqueue(Job job) {
  std::lock_guard lock(mu_);
  std::string key = job.request.ClusterKey();
  if (!active_.insert(key).second) {  // the cluster is ready or running: queue behind it
    waiting_[key].push_back(std::move(job));
    return;
  }
  MakeReadyLocked(std::move(job));
  work_cv_.notify_one();
}

void DeliveryLoop::Dispatch(amqp::Delivery delivery) {
  if (delivery.redelivered) redeliveries_.Increment();
  const Result<SyncRequest> request = DecodeSyncRequest(delivery.message.body);
  LoopFacts facts(*this);
  const Route route =
      RouteDelivery(Situation::Arrived(delivery, request), policy_, facts, clock_.WallNow());
  switch (route.step) {
    case Step::kRun:
    case Step::kRunAlone: {
      Trace(TraceStep::kDelivered, delivery, *request, clock_.Now(), [&](TraceEvent& e) {
        if (auto decided = ParseRfc3339(request->enqueued_at); decided.ok()) {
          e.queued =
              std::max(std::chrono::milliseconds(0),
                       std::chrono::duration_cast<std::chrono::milliseconds>(e.at - *decided));
        }
      });
      Job job{generation_, std::move(delivery), *request, clock_.Now()};
      job.alone = route.step == Step::kRunAlone;
      Enqueue(std::move(job));
      return;
    }
    case Step::kAckSuperseded: SettleSuperseded(delivery, *request, route); return;
    default: {
      const SyncRequest* decoded = request.ok() ? &*request : nullptr;
      std::optional<SyncEvent> event;
      if (decoded != nullptr && route.dead_reason == "delivery_limit")
        event = PoisonEvent(*decoded, route.why);
      Status s = Forward(route, delivery, decoded, clock_.Now(), std::nullopt, std::move(event));
      if (!s.ok()) {
        log::Warn("settling failed; the message will be redelivered",
                  {{"step", StepName(route.step)}, {"error", s.message()}});
      }
    }
  }
}

std::string DeliveryLoop::LoopFacts::SettledAlready(const SyncRequest& request) {
  return loop_.options_.settled_already ? loop_.options_.settled_already(request) : "";
}

std::string DeliveryLoop::LoopFacts::StickyHolder(const SyncRequest& request) {
  if (loop_.leases_ == nullptr) return "";
  return loop_.leases_->StickyHolderElsewhere(request.cluster_namespace, request.cluster_name);
}

std::string DeliveryLoop::LoopFacts::HolderElsewhere(const SyncRequest& request) {
  if (loop_.leases_ == nullptr) return "";
  return loop_.leases_->HolderElsewhere(request.cluster_namespace, request.cluster_name);
}

void DeliveryLoop::LogRoute(const Route& route, const amqp::Delivery& delivery,
                            const SyncRequest* request, const std::optional<SyncOutcome>& ran) {
  const std::string cluster = request != nullptr ? request->ClusterKey() : "";
  const std::string tier = route.tier();
  switch (route.step) {
    case Step::kDeadLetter:
      if (route.dead_reason == "undecodable") {
        log::Warn("undecodable message parked", {{"queue", delivery.queue},
                                                 {"message_id", delivery.message.message_id},
                                                 {"error", route.why}});
      } else if (route.dead_reason == "delivery_limit") {
        log::Warn("poison request parked",
                  {{"cluster", cluster}, {"unsettled_deliveries", route.unsettled}});
      } else {
        log::Info("request parked after its last attempt",
                  {{"cluster", cluster},
                   {"attempt", AttemptOf(route.publication->message)},
                   {"error", route.why}});
      }
      return;
    case Step::kRetry:
      log::Info("request scheduled for retry", {{"cluster", cluster},
                                                {"attempt", AttemptOf(route.publication->message)},
                                                {"tier", tier},
                                                {"error", route.why}});
      return;
    case Step::kHoldBack:
      log::Warn(RunsAlone(route.unsettled, options_.delivery_limit)
                    ? "request held back: it ended unsettled before (did a consumer crash on it?); "
                      "it runs alone next"
                    : "request held back: it ended unsettled before (a lost connection or a crash)",
                {{"cluster", cluster}, {"unsettled_deliveries", route.unsettled}, {"tier", tier}});
      return;
    case Step::kDefer:
      log::Debug("request deferred", {{"cluster", cluster},
                                      {"why", route.why},
                                      {"tier", tier},
                                      {"detail", ran ? ran->detail : ""}});
      return;
    default: return;
  }
}

Status DeliveryLoop::Forward(const Route& route, const amqp::Delivery& delivery,
                             const SyncRequest* request, SteadyTime since,
                             std::optional<SyncOutcome> ran, std::optional<SyncEvent> event) {
  LogRoute(route, delivery, request, ran);
  TraceFill fill = [step = route.step, tier = route.tier(), reason = route.dead_reason,
                    why = route.why, ran = std::move(ran)](TraceEvent& e) {
    e.outcome = step == Step::kDeadLetter ? TraceOutcome::kParked
                : step == Step::kRetry    ? TraceOutcome::kRetry
                                          : TraceOutcome::kDeferred;
    e.tier = tier;
    e.dead_reason = reason;
    e.error = why;
    if (ran) FillSync(e, *ran);
  };
  return Park(delivery, *route.publication, route.outcome.c_str(), request, std::move(fill), since,
              std::move(event));
}

void DeliveryLoop::SettleSuperseded(const amqp::Delivery& delivery, const SyncRequest& request,
                                    const Route& route) {
  if (Status acked = session_.Ack(delivery.delivery_tag); !acked.ok()) {
    log::Warn("acking a superseded request failed; it will be redelivered",
              {{"error", acked.message()}});
    return;
  }
  deliveries_.Add({{"lane", amqp::LaneName(request.lane)}, {"outcome", route.outcome}}).Increment();
  log::Info("request settled without running: it ended unsettled before, and its work is done",
            {{"cluster", request.ClusterKey()},
             {"unsettled_deliveries", route.unsettled},
             {"state", route.why}});
  Trace(TraceStep::kSettled, delivery, request, clock_.Now(), [&](TraceEvent& e) {
    e.outcome = TraceOutcome::kUpToDate;
    e.error = route.why;
  });
}

void DeliveryLoop::Trace(TraceStep step, const amqp::Delivery& delivery, const SyncRequest& request,
                         SteadyTime since, const std::function<void(TraceEvent&)>& fill) {
  if (options_.trace == nullptr) return;
  TraceEvent e;
  e.step = step;
  e.cluster = request.ClusterKey();
  e.request = delivery.message.message_id;
  e.at = clock_.WallNow();
  e.duration =
      std::max(std::chrono::milliseconds(0),
               std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now() - since));
  e.lane = amqp::LaneName(request.lane);
  e.revision = request.revision.substr(0, 12);
  e.attempt = AttemptOf(delivery.message);
  e.redelivered = delivery.redelivered;
  fill(e);
  options_.trace->Record(std::move(e));
}

Status DeliveryLoop::Park(const amqp::Delivery& delivery, const amqp::Publication& publication,
                          const char* outcome, const SyncRequest* request, TraceFill fill,
                          std::optional<SteadyTime> since, std::optional<SyncEvent> event) {
  PendingPark park{generation_,
                   delivery,
                   publication,
                   outcome,
                   request != nullptr ? std::optional<SyncRequest>(*request) : std::nullopt,
                   since.value_or(clock_.Now()),
                   std::move(fill),
                   std::move(event),
                   clock_.Now()};
  Status s = TryPark(park);
  if (s.code() == Code::kNotFound && publication.exchange == amqp::kForwardExchange) {
    // The holder has no queue (it is gone, or its queue expired): wait in the shortest tier,
    // by when its claims are free or it has its queue again.
    park.publication = Defer(delivery, options_.retry);
    park.outcome = "busy";
    s = TryPark(park);
  }
  if (s.ok() || !session_.connected()) return s;
  // Refused on a live connection (a delay queue without a leader while a node is down, or
  // full): the delivery stays unacked with us, so it must not be left there — try again.
  const std::chrono::milliseconds hold_off = park_hold_off_.Next();
  parks_due_ = clock_.Now() + hold_off;
  log::Warn("the broker refused a settlement; trying again",
            {{"exchange", publication.exchange},
             {"message_id", delivery.message.message_id},
             {"error", s.message()},
             {"in_ms", hold_off.count()}});
  pending_parks_.push_back(std::move(park));
  pending_park_count_.store(pending_parks_.size());
  return Status::Ok();
}

Status DeliveryLoop::RetryParks() {
  if (pending_parks_.empty() || clock_.Now() < parks_due_) return Status::Ok();
  while (!pending_parks_.empty()) {
    PendingPark& park = pending_parks_.front();
    if (park.generation != generation_) {  // from a dead connection: redelivered
      pending_parks_.pop_front();
      continue;
    }
    Status s = TryPark(park);
    if (!s.ok()) {
      if (!session_.connected()) return s;
      if (renewal_.Due(park.refused_at, clock_.Now())) {
        renewal_.Renewed();
        const auto refused_s =
            std::chrono::duration_cast<std::chrono::seconds>(clock_.Now() - park.refused_at)
                .count();
        if (channel_renewals_ < kChannelRenewalsBeforeReconnect) {
          // This channel may never take it (a stale view of the queue's leader): a new publishing
          // channel. The deliveries stay with us: a new connection would give every one of them
          // back, to come back to the consumers as suspects.
          ++channel_renewals_;
          log::Warn("settlements refused on a live channel; publishing on a new one",
                    {{"refused_s", refused_s}, {"error", s.message()}});
          if (Status renewed = session_.RenewPublishChannel(); !renewed.ok()) return renewed;
          parks_due_ = clock_.Now();
          break;
        }
        channel_renewals_ = 0;
        return Unavailable("a settlement refused for " + std::to_string(refused_s) +
                           " s on a live connection, " + "on new channels too (" + s.message() +
                           "): opening a new connection");
      }
      parks_due_ = clock_.Now() + park_hold_off_.Next();
      break;
    }
    pending_parks_.pop_front();
  }
  if (pending_parks_.empty()) park_hold_off_.Reset();
  pending_park_count_.store(pending_parks_.size());
  return Status::Ok();
}

Status DeliveryLoop::TryPark(const PendingPark& park) {
  const amqp::Publication& publication = park.publication;
  // A parked copy left twice in the dead-letter queue would show twice: that one waits long.
  Status published = session_.Publish(publication, publication.exchange == amqp::kDeadExchange
                                                       ? options_.confirm_timeout
                                                       : options_.settle_confirm_timeout);
  if (!published.ok()) return published.Annotate("publishing to " + publication.exchange);
  renewal_.Accepted();
  channel_renewals_ = 0;
  // Confirmed: only now may the original go.
  Status acked = session_.Ack(park.delivery.delivery_tag);
  if (!acked.ok()) return acked;
  std::string lane = park.delivery.routing_key.empty() ? "unknown" : park.delivery.routing_key;
  deliveries_.Add({{"lane", lane}, {"outcome", park.outcome}}).Increment();
  if (publication.exchange == amqp::kDeadExchange) {
    dead_lettered_
        .Add({{"reason", publication.message.headers.value(kDeadReasonHeader, "unknown")}})
        .Increment();
  } else if (park.outcome == "retried") {
    retries_.Add({{"tier", publication.message.headers.value(kRetryTierHeader, "")}}).Increment();
  }
  if (park.request && park.fill)
    Trace(TraceStep::kSettled, park.delivery, *park.request, park.since, park.fill);
  if (park.event && options_.events != nullptr) options_.events->Record(*park.event);
  return Status::Ok();
}

Status DeliveryLoop::Settle(Done& done) {
  const amqp::Delivery& d = done.job.delivery;
  const SyncRequest& r = done.job.request;
  RunEnd ran;
  ran.busy = done.busy;
  ran.holder = done.holder;
  std::optional<SyncOutcome> outcome;
  if (!done.outcome.ok()) {
    const Status& failure = done.outcome.status();
    ran.error = failure.ToString();
    // Hub conflicts, throttling, timeouts and outages heal by themselves; so does a shutdown.
    ran.permanent = !IsTransient(failure.code()) && failure.code() != Code::kCancelled;
    ran.retry_after = failure.retry_after();
  } else {
    outcome = *done.outcome;
    ran.succeeded = outcome->failed_sets.empty();
    ran.error = outcome->detail;
    ran.permanent = !outcome->transient;
    ran.retry_after = outcome->retry_after;
  }
  LoopFacts facts(*this);
  const Route route = RouteDelivery(Situation::Ran(d, ran), policy_, facts, clock_.WallNow());
  if (route.step == Step::kAckDone) return AckDone(d, r, *outcome, done.job.received);
  std::optional<SyncEvent> event;
  if (!done.busy) {
    event =
        FailureEvent(r, done.outcome, route.step == Step::kDeadLetter, AttemptOf(d.message) + 1);
  }
  return Forward(route, d, &r, done.job.received, done.busy ? std::nullopt : outcome,
                 std::move(event));
}

Status DeliveryLoop::AckDone(const amqp::Delivery& d, const SyncRequest& r,
                             const SyncOutcome& outcome, SteadyTime received) {
  Status acked = session_.Ack(d.delivery_tag);
  if (!acked.ok()) return acked;
  const char* label = outcome.kind == SyncOutcome::Kind::kSynced     ? "applied"
                      : outcome.kind == SyncOutcome::Kind::kUpToDate ? "skipped-stale"
                                                                     : "skipped";
  deliveries_.Add({{"lane", amqp::LaneName(r.lane)}, {"outcome", label}}).Increment();
  if (auto enq = ParseRfc3339(r.enqueued_at); enq.ok()) {
    enqueue_to_ack_.Observe(
        std::max(0.0, std::chrono::duration<double>(clock_.WallNow() - *enq).count()));
  }
  log::Debug("settled", {{"cluster", r.ClusterKey()},
                         {"outcome", label},
                         {"applies", outcome.applies},
                         {"detail", outcome.detail}});
  Trace(TraceStep::kSettled, d, r, received, [&](TraceEvent& e) {
    e.outcome = outcome.kind == SyncOutcome::Kind::kSynced     ? TraceOutcome::kApplied
                : outcome.kind == SyncOutcome::Kind::kUpToDate ? TraceOutcome::kUpToDate
                                                               : TraceOutcome::kSkipped;
    FillSync(e, outcome);
  });
  if (options_.events == nullptr) return Status::Ok();
  if (auto recovered = RecoveryEvent(r, outcome, AttemptOf(d.message) + 1)) {
    options_.events->Record(*recovered);
  }
  return Status::Ok();
}

Status DeliveryLoop::SettleFinished() {
  std::vector<Done> finished;
  {
    std::lock_guard lock(mu_);
    finished.swap(finished_);
  }
  Status first;
  for (auto& done : finished) {
    if (done.job.generation != generation_) continue;  // from a dead connection: redelivered
    Status s = Settle(done);
    if (!s.ok() && first.ok()) first = s;
  }
  in_flight_gauge_.Set(static_cast<double>(in_flight()));
  return first;
}

Status DeliveryLoop::DeferStalledSuspects() {
  std::vector<Job> stalled;
  {
    std::lock_guard lock(mu_);
    const SteadyTime now = clock_.Now();
    while (!ready_alone_.empty() && now - ready_alone_.front().ready >= options_.alone_wait) {
      stalled.push_back(std::move(ready_alone_.front()));
      ready_alone_.pop_front();
      ReleaseClusterLocked(stalled.back().request.ClusterKey());
    }
    if (stalled.empty()) return Status::Ok();
    work_cv_.notify_all();  // the others' work resumes
  }
  LoopFacts facts(*this);
  Status first;
  for (Job& job : stalled) {
    const Route route = RouteDelivery(Situation::AloneWaitedTooLong(job.delivery), policy_, facts,
                                      clock_.WallNow());
    Status s = Forward(route, job.delivery, &job.request, job.received);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

Status DeliveryLoop::Step(std::chrono::milliseconds timeout) {
  Status settled = SettleFinished();
  if (!settled.ok()) return settled;
  if (Status retried = RetryParks(); !retried.ok()) return retried;
  if (Status deferred = DeferStalledSuspects(); !deferred.ok()) return deferred;
  auto next = session_.Next(timeout);
  if (!next.ok()) return next.status();
  if (next->has_value()) Dispatch(std::move(**next));
  return Status::Ok();
}

size_t DeliveryLoop::Drain(std::chrono::milliseconds grace) {
  for (const auto& tag : consumer_tags_) session_.Cancel(tag);
  consumer_tags_.clear();
  SteadyTime deadline = clock_.Now() + grace;
  while (in_flight() > 0 && clock_.Now() < deadline) {
    if (!SettleFinished().ok() || !RetryParks().ok()) break;
    // Keep the connection serviced (heartbeats) while workers finish; deliveries that still
    // arrive after the cancel are left unacked and return to the queue on close.
    auto polled = session_.Next(std::chrono::milliseconds(20));
    if (!polled.ok()) break;
  }
  size_t left = in_flight();
  // What is still running stops at its next write; the broker redelivers it once we close.
  if (left > 0) abandon_.store(true);
  return left;
}

}  // namespace syncbus::consumer
