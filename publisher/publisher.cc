#include "publisher/publisher.h"

#include <algorithm>

#include "common/log.h"

namespace syncbus::publisher {
namespace {

const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

// How long a round holds the hub cache's lock: the copy of a few pointers per cluster, from
// microseconds to about a tenth of a second for a round over 10,000 clusters.
const prometheus::Histogram::BucketBoundaries kCacheLockBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};

SenderOptions SenderOptionsOf(const PublisherOptions& options) {
  SenderOptions s;
  s.app_id = options.app_id;
  s.confirm_timeout = options.confirm_timeout;
  s.may_publish = options.may_publish;
  s.trace = options.trace;
  return s;
}

}  // namespace

Publisher::Publisher(PublisherOptions options, HubCache& cache, amqp::Session& session,
                     Clock& clock, prometheus::Registry& registry)
    : options_(std::move(options)),
      cache_(cache),
      clock_(clock),
      rate_(options_.max_publish_rate, clock),
      sender_(session, clock, SenderOptionsOf(options_), registry),
      outstanding_gauge_(prometheus::BuildGauge()
                             .Name("syncbus_publisher_outstanding")
                             .Help("Clusters with a published request not yet processed")
                             .Register(registry)
                             .Add({})),
      oldest_outstanding_gauge_(prometheus::BuildGauge()
                                    .Name("syncbus_publisher_oldest_outstanding_seconds")
                                    .Help("Age of the oldest published request not yet processed, "
                                          "since its first publish (a re-send keeps the age)")
                                    .Register(registry)
                                    .Add({})),
      pending_gauge_(
          prometheus::BuildGauge()
              .Name("syncbus_publisher_pending")
              .Help("Clusters that need a request not yet sent (rate limit, cap, broker down)")
              .Register(registry)
              .Add({})),
      resent_(prometheus::BuildCounter()
                  .Name("syncbus_publisher_resent_total")
                  .Help("Requests re-sent because they stayed outstanding longer than the timeout")
                  .Register(registry)
                  .Add({})),
      promoted_(
          prometheus::BuildCounter()
              .Name("syncbus_publisher_promoted_total")
              .Help(
                  "Changes sent on the change lane while the cluster's request still waited on the "
                  "resync lane")
              .Register(registry)
              .Add({})),
      clusters_(prometheus::BuildGauge()
                    .Name("syncbus_publisher_clusters")
                    .Help("Clusters by state at their last evaluation")
                    .Register(registry)),
      reconcile_seconds_(prometheus::BuildHistogram()
                             .Name("syncbus_publisher_reconcile_seconds")
                             .Help("Duration of one decision round")
                             .Register(registry)
                             .Add({}, kLatencyBuckets)),
      cache_lock_seconds_(
          prometheus::BuildHistogram()
              .Name("syncbus_publisher_cache_lock_seconds")
              .Help("Time one decision round reads the hub cache under its lock (the watch "
                    "threads wait meanwhile), waiting for the lock included")
              .Register(registry)
              .Add({}, kCacheLockBuckets)) {}

Result<ReconcileStats> Publisher::Reconcile(const std::vector<std::string>& keys, bool startup,
                                            const DirtyEdits& edits) {
  SteadyTime started = clock_.Now();
  ReconcileStats stats;
  bool more = false;
  HubVersions seen;
  const std::vector<std::string> work = CollectWork(keys, startup, edits, more);
  // A start-up round's keys are all start-up work, edited or not.
  const DirtyEdits no_edits;
  std::vector<ToSend> to_send = DecideClusters(work, {startup ? no_edits : edits}, seen, stats);
  Status sent = SendWithinRate(to_send, seen, stats);
  // Deferred work waits for tokens or room under the cap: the next round waits too.
  stats.more = more && stats.deferred == 0;
  UpdateGauges();
  reconcile_seconds_.Observe(std::chrono::duration<double>(clock_.Now() - started).count());
  if (!sent.ok()) return sent;
  LogRound(stats);
  return stats;
}

std::vector<std::string> Publisher::CollectWork(const std::vector<std::string>& keys, bool startup,
                                                const DirtyEdits& edits, bool& more) {
  // So many clusters at once that are no single edit (a relist, a wave of status writes) wait
  // their turn like start-up work.
  const bool many = keys.size() > options_.round_clusters;
  std::set<std::string> work;
  for (const auto& key : keys) {
    if (startup) {
      ledger_.KeepPending(key, {.startup = true, .bulk = false});
    } else if (edits.bulk.count(key) > 0) {
      // A bulk edit's change, no longer start-up work (the decision would not see this edit
      // in a later round).
      ledger_.TakePending(key);
      ledger_.KeepPending(key, {.startup = false, .bulk = true});
    } else if (many && edits.single.count(key) == 0) {
      ledger_.KeepPending(key, {});
    } else {
      work.insert(key);
    }
  }
  for (const auto& key :
       ledger_.TakeDue(clock_.WallNow(), clock_.Now(), options_.outstanding_timeout))
    ledger_.KeepPending(key, {});
  // Those that wait, in turn after the last one a round took.
  const std::set<std::string>& waiting = ledger_.pending();
  size_t taken = 0;
  size_t looked = 0;
  for (auto it = waiting.upper_bound(pending_cursor_);
       looked < waiting.size() && taken < options_.round_clusters; ++it, ++looked) {
    if (it == waiting.end()) it = waiting.begin();
    if (work.insert(*it).second) ++taken;
    pending_cursor_ = *it;
  }
  more = looked < waiting.size();
  return {work.begin(), work.end()};
}

std::vector<Publisher::ToSend> Publisher::DecideClusters(const std::vector<std::string>& work,
                                                         const RoundAsk& ask, HubVersions& seen,
                                                         ReconcileStats& stats) {
  RoundFacts round;
  round.now_wall = clock_.WallNow();
  round.now = clock_.Now();
  const DecisionPolicy policy{options_.reapply, options_.outstanding_timeout};
  const SteadyTime reading = clock_.Now();
  const HubSnapshot hub = cache_.Snapshot(work);
  cache_lock_seconds_.Observe(std::chrono::duration<double>(clock_.Now() - reading).count());
  seen = hub.seen;

  std::vector<ToSend> to_send;
  size_t new_outstanding = 0;  // clusters of to_send not outstanding yet: the cap counts them too
  for (const ClusterInputs& inputs : hub.clusters) {
    const std::string& key = inputs.key;
    ++stats.evaluated;
    const SyncLedger::PendingMarks waited = ledger_.TakePending(key);
    // Start-up work that waited (its turn, the rate limit, the cap) stays start-up work, unless
    // the cluster was edited since: then it is a change and takes the change lane. A status
    // write or a relist is no edit.
    round.startup = waited.startup && ask.edits.single.count(key) == 0;
    // A bulk edit's clusters (a fleet-wide rollout) take the resync lane, also once deferred,
    // until a single edit of the cluster comes.
    round.bulk = !round.startup && ask.edits.single.count(key) == 0 &&
                 (ask.edits.bulk.count(key) > 0 || waited.bulk);
    if (!inputs.cd) {  // cluster deleted: forget it
      ledger_.Forget(key);
      continue;
    }
    ClusterView view = hub.View(inputs);
    ledger_.ScheduleReapply(key, NextReapply(key, view, options_.reapply));
    if (const OutstandingRequest* out = ledger_.outstanding(key);
        out != nullptr && RequestProcessed(*out, view)) {
      ledger_.MarkProcessed(key);
    }
    ClusterFacts facts;
    facts.outstanding = ledger_.outstanding(key);
    facts.last_published = ledger_.last_published(key);
    if (view.desired.skip_reason.empty()) {
      facts.applied_secrets = ledger_.applied_secrets(key);
      if (facts.applied_secrets == nullptr)
        facts.applied_secrets = &ledger_.AssumeAppliedSecrets(key, AssumedAppliedSecrets(view));
    }
    round.cap_reached = ledger_.outstanding_count() + new_outstanding >= options_.max_outstanding;
    const ClusterDecision decision = DecideCluster(key, view, facts, round, policy);
    ledger_.SetState(key, decision.state);
    switch (decision.action) {
      case ClusterAction::kNone:
        ++(decision.state == ClusterState::kInSync ? stats.in_sync : stats.skipped);
        ledger_.DropOutstanding(key);
        break;
      case ClusterAction::kCoalesce: ++stats.coalesced; break;
      case ClusterAction::kLeaveToRetries: break;
      case ClusterAction::kDefer:
        ++stats.deferred;
        ledger_.KeepPending(key, {round.startup, decision.bulk_change});
        break;
      case ClusterAction::kSend: {
        if (facts.outstanding == nullptr) ++new_outstanding;
        std::unique_ptr<OutstandingRequest> overtaken;
        if (decision.promote) overtaken = std::make_unique<OutstandingRequest>(*facts.outstanding);
        to_send.push_back({key, decision, std::move(view.desired), std::move(view.secrets),
                           std::move(view.kubeconfig_version), std::move(overtaken)});
        break;
      }
    }
  }
  return to_send;
}

Status Publisher::SendWithinRate(std::vector<ToSend>& to_send, const HubVersions& seen,
                                 ReconcileStats& stats) {
  // Changes take the tokens first: a fleet-wide resync must not hold an edit back.
  std::stable_partition(to_send.begin(), to_send.end(), [](const ToSend& item) {
    return item.decision.lane == amqp::Lane::kChange;
  });
  std::vector<ToSend> batch;
  Status s;
  // After the broker refused publishes (a full queue), nothing goes out until the hold-off has
  // passed; after a broker failure everything left stays pending.
  const bool holding_off = rate_.HoldingOff(clock_.Now());
  for (auto& item : to_send) {
    if (!s.ok() || holding_off || !rate_.TakeToken()) {
      ++stats.deferred;
      KeepPending(item);
      continue;
    }
    batch.push_back(std::move(item));
    if (batch.size() >= options_.batch_size) s = SendBatch(batch, seen, stats);
  }
  if (s.ok()) s = SendBatch(batch, seen, stats);
  return s;
}

Status Publisher::SendBatch(std::vector<ToSend>& batch, const HubVersions& seen,
                            ReconcileStats& stats) {
  if (batch.empty()) return Status::Ok();
  const WallTime now = clock_.WallNow();
  std::vector<SyncRequest> requests;
  requests.reserve(batch.size());
  for (const auto& item : batch) {
    requests.push_back(RequestFor(item.key, item.snapshot.revision, seen, item.kubeconfig_version,
                                  item.decision, now));
  }
  std::vector<const SyncRequest*> pointers;
  pointers.reserve(requests.size());
  for (const auto& request : requests) pointers.push_back(&request);
  const BatchOutcome outcome = sender_.Send(pointers);
  for (size_t i = 0; i < batch.size(); ++i) {
    switch (outcome.results[i]) {
      case SendResult::kConfirmed: RecordConfirmed(batch[i], outcome, stats); break;
      case SendResult::kNotSent:
        ++stats.deferred;
        KeepPending(batch[i]);
        break;
      case SendResult::kRefused:
      case SendResult::kFailed: KeepPending(batch[i]); break;
    }
  }
  batch.clear();
  if (outcome.refused > 0) {
    stats.rejected += outcome.refused;
    const std::chrono::milliseconds hold_off = rate_.Refused(outcome.confirmed_at);
    log::Warn(
        "the broker refused publishes (a work queue full, or without a leader while a node is "
        "down); "
        "holding off",
        {{"rejected", outcome.refused}, {"hold_off_ms", hold_off.count()}});
    // The refused clusters are pending already; a new connection gets a new channel.
    if (outcome.renew_connection) rate_.Cleared();
  } else if (outcome.error.ok()) {
    rate_.Accepted();
  }
  return outcome.error;
}

void Publisher::RecordConfirmed(ToSend& item, const BatchOutcome& outcome, ReconcileStats& stats) {
  ConfirmedRequest confirmed;
  confirmed.snapshot = std::move(item.snapshot);
  confirmed.secrets = std::move(item.secrets);
  confirmed.full_reapply = item.decision.full_reapply;
  confirmed.lane = item.decision.lane;
  if (item.overtaken) confirmed.overtaken = std::move(*item.overtaken);
  confirmed.confirmed_at = outcome.confirmed_at;
  confirmed.sent_wall = outcome.sent_wall;
  switch (ledger_.RecordConfirmed(item.key, std::move(confirmed))) {
    case SyncLedger::Recorded::kPromoted: promoted_.Increment(); break;
    case SyncLedger::Recorded::kResent: resent_.Increment(); break;
    case SyncLedger::Recorded::kFirst: break;
  }
  ++stats.published;
  if (item.decision.bulk_change) ++stats.bulk;
}

void Publisher::UpdateGauges() {
  outstanding_gauge_.Set(static_cast<double>(ledger_.outstanding_count()));
  const SteadyTime now = clock_.Now();
  oldest_outstanding_gauge_.Set(
      std::chrono::duration<double>(now - ledger_.OldestFirstPublished(now)).count());
  pending_gauge_.Set(static_cast<double>(ledger_.pending().size()));
  for (ClusterState state : kClusterStates) {
    clusters_.Add({{"state", std::string(ClusterStateName(state))}})
        .Set(static_cast<double>(ledger_.state_count(state)));
  }
}

void Publisher::LogRound(const ReconcileStats& stats) const {
  if (stats.published == 0 && stats.deferred == 0 && stats.rejected == 0) return;
  log::Info("decision round", {{"evaluated", stats.evaluated},
                               {"published", stats.published},
                               {"coalesced", stats.coalesced},
                               {"deferred", stats.deferred},
                               {"rejected", stats.rejected},
                               {"bulk", stats.bulk},
                               {"in_sync", stats.in_sync},
                               {"skipped", stats.skipped},
                               {"outstanding", ledger_.outstanding_count()}});
}

void Publisher::Reset() {
  for (ClusterState state : kClusterStates)
    clusters_.Add({{"state", std::string(ClusterStateName(state))}}).Set(0);
  ledger_.Clear();
  pending_cursor_.clear();
  outstanding_gauge_.Set(0);
  oldest_outstanding_gauge_.Set(0);
  pending_gauge_.Set(0);
}

}  // namespace syncbus::publisher
