#include "publisher/publisher.h"

#include <algorithm>

#include "common/log.h"
#include "common/time_format.h"

namespace syncbus::publisher {
namespace {

const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

// A nack means a full work queue, or one without a leader while a RabbitMQ node is down (a
// quorum queue elects another within seconds): retry soon, and never wait long once the queue
// is back. A full queue costs the broker one refused batch per hold-off.
constexpr std::chrono::milliseconds kFirstRejectHoldOff{250};
constexpr std::chrono::milliseconds kMaxRejectHoldOff{2000};

// How long a round holds the hub cache's lock: the copy of a few pointers per cluster, from a
// few microseconds to some milliseconds for a fleet-wide round.
const prometheus::Histogram::BucketBoundaries kCacheLockBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};

}  // namespace

Publisher::Publisher(PublisherOptions options, HubCache& cache, amqp::Session& session,
                     Clock& clock, prometheus::Registry& registry)
    : options_(std::move(options)),
      cache_(cache),
      session_(session),
      clock_(clock),
      tokens_(options_.max_publish_rate),
      tokens_at_(clock.Now()),
      enqueued_(prometheus::BuildCounter()
                    .Name("syncbus_publisher_enqueued_total")
                    .Help("Sync requests published and confirmed, by lane and reason")
                    .Register(registry)),
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
      rejected_(
          prometheus::BuildCounter()
              .Name("syncbus_publisher_rejected_total")
              .Help("Publishes the broker refused (nack: a work queue at its length limit, or "
                    "without a leader); the cluster stays pending")
              .Register(registry)
              .Add({})),
      confirm_latency_(prometheus::BuildHistogram()
                           .Name("syncbus_publisher_confirm_seconds")
                           .Help("Time from publish to broker confirm, per batch")
                           .Register(registry)
                           .Add({}, kLatencyBuckets)),
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

bool Publisher::TakeToken() {
  SteadyTime now = clock_.Now();
  double elapsed = std::chrono::duration<double>(now - tokens_at_).count();
  tokens_at_ = now;
  tokens_ = std::min(options_.max_publish_rate, tokens_ + elapsed * options_.max_publish_rate);
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

std::vector<std::string> Publisher::DueKeys() {
  std::vector<std::string> due;
  WallTime now = clock_.WallNow();
  while (!reapply_queue_.empty() && reapply_queue_.begin()->first <= now) {
    auto [when, key] = *reapply_queue_.begin();
    reapply_queue_.erase(reapply_queue_.begin());
    reapply_due_.erase(key);
    due.push_back(key);
  }
  SteadyTime steady = clock_.Now();
  for (const auto& [key, o] : outstanding_) {
    if (steady - o.published_at >= options_.outstanding_timeout) due.push_back(key);
  }
  return due;
}

void Publisher::Schedule(const std::string& key, const ClusterView& view) {
  if (auto it = reapply_due_.find(key); it != reapply_due_.end()) {
    reapply_queue_.erase({it->second, key});
    reapply_due_.erase(it);
  }
  if (!view.cd || !view.desired.skip_reason.empty()) return;
  auto due = ReapplyDueAt(key, view.lease, options_.reapply);
  if (!due) return;  // never applied: the decision already asked for a sync
  reapply_due_[key] = *due;
  reapply_queue_.insert({*due, key});
}

bool Publisher::Processed(const Outstanding& o, const ClusterView& view) const {
  if (!SnapshotProcessed(o.snapshot, view.status)) return false;
  if (!o.full_reapply) return true;
  if (!view.lease) return false;
  auto renewed = ParseRfc3339(view.lease->renew_time);
  // renewTime has one-second precision: compare against the publish second.
  return renewed.ok() && *renewed >= std::chrono::floor<std::chrono::seconds>(o.published_wall);
}

const hive::SecretVersions& Publisher::AppliedSecrets(const std::string& key,
                                                      const ClusterView& view) {
  auto it = secrets_applied_.find(key);
  if (it != secrets_applied_.end()) return it->second;
  hive::SecretVersions known = view.secrets;
  if (view.lease && view.secrets_written_at) {
    auto renewed = ParseRfc3339(view.lease->renew_time);
    // Written after the last full reapply (while no publisher watched): not applied yet.
    if (renewed.ok() && *view.secrets_written_at > *renewed) known.clear();
  }
  return secrets_applied_.emplace(key, std::move(known)).first->second;
}

Result<ReconcileStats> Publisher::Reconcile(const std::vector<std::string>& keys, bool startup,
                                            const DirtyEdits& edits) {
  SteadyTime started = clock_.Now();
  ReconcileStats stats;
  const std::set<std::string> dirty(keys.begin(), keys.end());
  std::set<std::string> work = dirty;
  work.insert(pending_.begin(), pending_.end());
  for (auto& key : DueKeys()) work.insert(std::move(key));
  std::vector<std::string> work_keys(work.begin(), work.end());

  std::vector<ToSend> to_send;
  size_t new_outstanding = 0;  // clusters of to_send not outstanding yet: the cap counts them too
  WallTime now_wall = clock_.WallNow();
  SteadyTime now = clock_.Now();
  const SteadyTime reading = clock_.Now();
  const HubSnapshot hub = cache_.Snapshot(work_keys);
  cache_lock_seconds_.Observe(std::chrono::duration<double>(clock_.Now() - reading).count());
  for (const ClusterInputs& inputs : hub.clusters) {
    const std::string& key = inputs.key;
    const ClusterView view = hub.View(inputs);
    ++stats.evaluated;
    pending_.erase(key);
    // Start-up work deferred (rate limit, cap) stays start-up work, unless the cluster changed
    // since: then it is a change and takes the change lane.
    bool as_startup = (startup_pending_.erase(key) > 0 && dirty.count(key) == 0) || startup;
    // A bulk edit's clusters (a fleet-wide rollout) take the resync lane, also once deferred,
    // until a single edit of the cluster comes.
    const bool was_bulk = bulk_pending_.erase(key) > 0;
    const bool bulk =
        !as_startup && edits.single.count(key) == 0 && (edits.bulk.count(key) > 0 || was_bulk);
    if (!view.cd) {  // cluster deleted: forget it
      cluster_state_.erase(key);
      outstanding_.erase(key);
      last_published_.erase(key);
      secrets_applied_.erase(key);
      Schedule(key, view);
      continue;
    }
    Schedule(key, view);
    auto out = outstanding_.find(key);
    if (out != outstanding_.end() && Processed(out->second, view)) {
      if (out->second.full_reapply) secrets_applied_[key] = out->second.secrets;
      outstanding_.erase(out);
      out = outstanding_.end();
    }
    SyncNeed need = DecideSync(view.desired, view.status, view.lease, now_wall, options_.reapply);
    // A changed source Secret is invisible to generations: the consumer re-reads it only on a
    // full reapply, which goes on the change lane like any other edit.
    bool secrets_changed =
        view.desired.skip_reason.empty() && AppliedSecrets(key, view) != view.secrets;
    if (secrets_changed && (need.kind == NeedKind::kNone || need.kind == NeedKind::kFailed)) {
      need = {NeedKind::kChange, "secret-changed"};
    }
    cluster_state_[key] = need.kind == NeedKind::kNone
                              ? (view.desired.skip_reason.empty()       ? "in_sync"
                                 : view.desired.skip_reason == "paused" ? "paused"
                                                                        : "skipped")
                          : need.kind == NeedKind::kFailed ? "failing"
                                                           : "pending";
    if (need.kind == NeedKind::kNone) {
      if (need.reason.rfind("skipped:", 0) == 0)
        ++stats.skipped;
      else
        ++stats.in_sync;
      outstanding_.erase(key);
      continue;
    }
    const bool bulk_change = bulk && need.kind == NeedKind::kChange;
    bool timed_out =
        out != outstanding_.end() && now - out->second.published_at >= options_.outstanding_timeout;
    // A change must not wait behind the resync lane: while this cluster's request sits there, the
    // change goes out on the change lane (once per change: a later one waits for it). A bulk
    // change waits: it is resync work itself.
    bool promote = out != outstanding_.end() && !timed_out && out->second.resync_queued &&
                   need.kind == NeedKind::kChange && !bulk_change &&
                   (out->second.snapshot.revision != view.desired.revision || secrets_changed) &&
                   (!out->second.promoted || SnapshotProcessed(out->second.snapshot, view.status));
    if (out != outstanding_.end() && !timed_out && !promote) {
      ++stats.coalesced;
      continue;
    }
    if (need.kind == NeedKind::kFailed) {
      // The consumer's retry chain owns failures; re-send only when it has had its full chance.
      auto last = last_published_.find(key);
      if (last != last_published_.end() && now - last->second < options_.outstanding_timeout)
        continue;
    }
    // The cap bounds the resync backlog (start-up, periodic reapplies, bulk edits); a single
    // edit's change, at most one outstanding per cluster, is never held back by it.
    bool resync_work = as_startup || need.kind == NeedKind::kReapply || bulk_change;
    if (resync_work && outstanding_.size() + new_outstanding >= options_.max_outstanding &&
        !timed_out) {
      ++stats.deferred;
      KeepPending(key, as_startup, bulk_change);
      continue;
    }
    SyncRequest r;
    auto slash = key.find('/');
    r.cluster_namespace = key.substr(0, slash);
    r.cluster_name = key.substr(slash + 1);
    r.revision = view.desired.revision;
    r.seen = view.seen;
    r.kubeconfig_version = view.kubeconfig_version;
    // A change for a cluster whose reapply is due anyway (or that never had one: no lease) is a
    // full reapply, so the consumer renews the lease in the same pass instead of a second one.
    r.full_reapply = need.kind == NeedKind::kReapply || secrets_changed ||
                     FullReapplyDue(key, view.lease, now_wall, options_.reapply);
    r.lane = resync_work ? amqp::Lane::kResync : amqp::Lane::kChange;
    r.reason = as_startup ? "startup" : (timed_out ? "resend" : need.reason);
    std::optional<Outstanding> overtaken;
    if (promote) {
      // The queued resync still does the full reapply; the change applies what changed.
      r.full_reapply = secrets_changed;
      r.lane = amqp::Lane::kChange;
      r.reason = need.reason;
      overtaken = out->second;
    }
    r.enqueued_at = FormatRfc3339Millis(now_wall);
    if (out == outstanding_.end()) ++new_outstanding;
    to_send.push_back(
        {key, std::move(r), view.desired, view.secrets, std::move(overtaken), bulk_change});
  }

  // Rate limit: whatever gets no token waits for the next round; after the broker refused
  // publishes (a full queue), nothing goes out until the hold-off has passed. Changes take the
  // tokens first: a fleet-wide resync must not hold an edit back.
  std::stable_partition(to_send.begin(), to_send.end(), [](const ToSend& item) {
    return item.request.lane == amqp::Lane::kChange;
  });
  std::vector<ToSend> batch;
  Status s;
  bool holding_off = RejectHoldOff(now);
  for (auto& item : to_send) {
    if (!s.ok() || holding_off ||
        !TakeToken()) {  // after a broker failure everything left stays pending
      ++stats.deferred;
      KeepPending(item);
      continue;
    }
    batch.push_back(std::move(item));
    if (batch.size() >= options_.batch_size) s = Send(batch, stats);
  }
  if (s.ok()) s = Send(batch, stats);
  outstanding_gauge_.Set(static_cast<double>(outstanding_.size()));
  SteadyTime oldest = clock_.Now();
  for (const auto& [key, o] : outstanding_) oldest = std::min(oldest, o.first_published);
  oldest_outstanding_gauge_.Set(std::chrono::duration<double>(clock_.Now() - oldest).count());
  pending_gauge_.Set(static_cast<double>(pending_.size()));
  std::map<std::string, int> counts = {
      {"in_sync", 0}, {"pending", 0}, {"failing", 0}, {"paused", 0}, {"skipped", 0}};
  for (const auto& [key, state] : cluster_state_) ++counts[state];
  for (const auto& [state, n] : counts) clusters_.Add({{"state", state}}).Set(n);
  reconcile_seconds_.Observe(std::chrono::duration<double>(clock_.Now() - started).count());
  if (!s.ok()) return s;
  if (stats.published > 0 || stats.deferred > 0 || stats.rejected > 0) {
    log::Info("decision round", {{"evaluated", stats.evaluated},
                                 {"published", stats.published},
                                 {"coalesced", stats.coalesced},
                                 {"deferred", stats.deferred},
                                 {"rejected", stats.rejected},
                                 {"bulk", stats.bulk},
                                 {"in_sync", stats.in_sync},
                                 {"skipped", stats.skipped},
                                 {"outstanding", outstanding_.size()}});
  }
  return stats;
}

Status Publisher::Send(std::vector<ToSend>& batch, ReconcileStats& stats) {
  if (batch.empty()) return Status::Ok();
  if (options_.may_publish && !options_.may_publish()) {
    for (const auto& item : batch) KeepPending(item);
    stats.deferred += batch.size();
    batch.clear();
    return Status(Code::kCancelled, "not the leader any more");
  }
  std::vector<amqp::Publication> pubs;
  pubs.reserve(batch.size());
  WallTime wall = clock_.WallNow();
  for (const auto& item : batch) {
    amqp::Publication p;
    p.exchange = amqp::kWorkExchange;
    p.routing_key = amqp::LaneName(item.request.lane);
    p.message =
        ToAmqpMessage(item.request, options_.app_id,
                      item.request.ClusterKey() + "/" + item.request.revision.substr(0, 12) + "/" +
                          std::to_string(++sequence_),
                      wall);
    pubs.push_back(std::move(p));
  }
  SteadyTime start = clock_.Now();
  std::vector<Status> results = session_.PublishAll(pubs, options_.confirm_timeout);
  confirm_latency_.Observe(std::chrono::duration<double>(clock_.Now() - start).count());
  Status first_error;
  SteadyTime now = clock_.Now();
  size_t rejected = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    auto& item = batch[i];
    const Status& r = i < results.size() ? results[i] : first_error;
    if (!r.ok() || i >= results.size()) {
      KeepPending(item);
      if (!r.ok() && r.code() == Code::kUnavailable && session_.connected()) {
        // basic.nack on a live channel: the queue is full (reject-publish). The connection is
        // fine; the cluster stays pending and goes out once the hold-off has passed.
        ++rejected;
        continue;
      }
      if (first_error.ok()) first_error = r.ok() ? Unavailable("publish not confirmed") : r;
      continue;
    }
    auto previous = outstanding_.find(item.key);
    if (item.promoted_from) {
      const Outstanding& resync = *item.promoted_from;
      outstanding_[item.key] = {item.snapshot,
                                item.secrets,
                                now,
                                resync.full_reapply ? resync.published_wall : wall,
                                resync.full_reapply || item.request.full_reapply,
                                resync.first_published,
                                /*resync_queued=*/true,
                                /*promoted=*/true};
      promoted_.Increment();
    } else {
      bool resend = previous != outstanding_.end();
      if (resend) resent_.Increment();
      SteadyTime first_published = resend ? previous->second.first_published : now;
      outstanding_[item.key] = {item.snapshot,
                                item.secrets,
                                now,
                                wall,
                                item.request.full_reapply,
                                first_published,
                                item.request.lane == amqp::Lane::kResync,
                                false};
    }
    last_published_[item.key] = now;
    ++stats.published;
    if (item.bulk) ++stats.bulk;
    enqueued_.Add({{"lane", amqp::LaneName(item.request.lane)}, {"reason", item.request.reason}})
        .Increment();
    log::Debug("enqueued", {{"cluster", item.key},
                            {"reason", item.request.reason},
                            {"lane", amqp::LaneName(item.request.lane)},
                            {"revision", item.request.revision}});
    if (options_.trace != nullptr) {
      TraceEvent e;
      e.step = TraceStep::kPublished;
      e.cluster = item.key;
      e.request = pubs[i].message.message_id;
      e.at = wall;  // sent; the broker has it before any consumer can record a delivery
      e.duration = std::chrono::duration_cast<std::chrono::milliseconds>(now - start);
      e.reason = item.request.reason;
      e.lane = amqp::LaneName(item.request.lane);
      e.revision = item.request.revision.substr(0, 12);
      auto decided = ParseRfc3339(item.request.enqueued_at);
      e.decided_at = decided.ok() ? *decided : wall;
      options_.trace->Record(std::move(e));
    }
  }
  batch.clear();
  if (options_.trace != nullptr) {
    // Best effort, on the same session: a broken connection surfaces with the next publish.
    if (auto flushed = options_.trace->Flush(session_); !flushed.ok()) {
      log::Warn("trace events dropped", {{"error", flushed.status().message()}});
    }
  }
  if (rejected > 0) {
    rejected_.Increment(static_cast<double>(rejected));
    stats.rejected += rejected;
    reject_holdoff_ =
        std::min(kMaxRejectHoldOff,
                 reject_holdoff_.count() == 0 ? kFirstRejectHoldOff : reject_holdoff_ * 2);
    rejected_until_ = now + reject_holdoff_;
    log::Warn(
        "the broker refused publishes (a work queue full, or without a leader while a node is "
        "down); "
        "holding off",
        {{"rejected", rejected}, {"hold_off_ms", reject_holdoff_.count()}});
    if (!refused_since_) refused_since_ = now;
    if (first_error.ok() && renewal_.Due(*refused_since_, now)) {
      // The refused clusters are pending already; a new connection gets a new channel.
      first_error = Unavailable(
          "publishes refused for " +
          std::to_string(
              std::chrono::duration_cast<std::chrono::seconds>(now - *refused_since_).count()) +
          " s on a live channel (one opened while a queue elected its leader keeps refusing): "
          "opening a new connection");
      renewal_.Renewed();
      refused_since_.reset();
      reject_holdoff_ = std::chrono::milliseconds(0);
      rejected_until_ = SteadyTime{};
    }
  } else if (first_error.ok()) {
    reject_holdoff_ = std::chrono::milliseconds(0);
    refused_since_.reset();
    renewal_.Accepted();
  }
  return first_error;
}

void Publisher::KeepPending(const std::string& key, bool startup, bool bulk) {
  pending_.insert(key);
  if (startup) startup_pending_.insert(key);
  if (bulk) bulk_pending_.insert(key);
}

void Publisher::Reset() {
  for (const auto& [key, state] : cluster_state_) clusters_.Add({{"state", state}}).Set(0);
  startup_pending_.clear();
  bulk_pending_.clear();
  outstanding_.clear();
  last_published_.clear();
  pending_.clear();
  reapply_due_.clear();
  reapply_queue_.clear();
  cluster_state_.clear();
  secrets_applied_.clear();
  outstanding_gauge_.Set(0);
  oldest_outstanding_gauge_.Set(0);
  pending_gauge_.Set(0);
}

}  // namespace syncbus::publisher
