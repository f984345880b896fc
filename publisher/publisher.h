// Publisher: turns the hub cache's dirty clusters into sync requests. For each cluster it
// computes the desired state, decides whether a sync is needed (sync_decision.h), coalesces
// (at most one outstanding request per cluster: latest wins, the consumer reads the newest
// state anyway), rate-limits, and publishes with publisher confirms — a request counts as sent
// only once confirmed; anything unconfirmed or refused (a full work queue nacks) stays pending
// and is retried; refusals on a live channel that last (a stale channel after a RabbitMQ node
// died, see channel_renewal.h) end the round with an error, so the caller reconnects. Single edits
// go on the change lane, ahead of start-up rounds, reapplies and bulk edits (the resync lane); an
// edit of a cluster whose request waits there overtakes it. Not thread-safe: one Publisher runs on
// one thread with its own amqp::Session.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "common/amqp/channel_renewal.h"
#include "common/amqp/session.h"
#include "common/bus/sync_message.h"
#include "common/bus/trace_recorder.h"
#include "common/clock.h"
#include "publisher/hub_cache.h"
#include "publisher/sync_decision.h"

namespace syncbus::publisher {

struct PublisherOptions {
  ReapplyPolicy reapply;
  double max_publish_rate = 500;  // messages per second (token bucket, burst = 1 s worth)
  size_t max_outstanding = 10000;
  std::chrono::milliseconds outstanding_timeout{std::chrono::minutes(30)};
  std::chrono::milliseconds confirm_timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds tick{std::chrono::milliseconds(500)};
  size_t batch_size = 500;  // publishes pipelined per confirm wait
  std::string app_id = "syncbus-publisher";
  // Checked right before every publish: a leader whose lease lapsed must not publish, even in
  // the middle of a round. Null = always allowed.
  std::function<bool()> may_publish;
  // Where confirmed requests are recorded for `syncbusctl trace` (flushed after each batch).
  // Null = no trace. Must outlive the Publisher.
  TraceRecorder* trace = nullptr;
};

struct ReconcileStats {
  size_t evaluated = 0;
  size_t published = 0;
  size_t coalesced = 0;  // needed, but a request is already outstanding
  size_t deferred = 0;   // needed, but held back by the rate limit or the outstanding cap
  size_t in_sync = 0;
  size_t skipped = 0;
  size_t rejected = 0;  // refused by the broker (nack: a work queue at its length limit)
  size_t bulk = 0;      // changes of a bulk edit, sent on the resync lane
};

class Publisher {
 public:
  Publisher(PublisherOptions options, HubCache& cache, amqp::Session& session, Clock& clock,
            prometheus::Registry& registry);

  // One round over `keys` plus everything pending, due for reapply, or outstanding too long.
  // `startup` sends what is needed on the resync lane with reason "startup" (the first round
  // after start or after becoming leader). `edits` says which keys a bulk edit made dirty: their
  // changes go on the resync lane too, so that they never hold a single edit back (a bulk
  // change deferred stays bulk until a single edit of its cluster comes). Broker failures return
  // an error; nothing is lost: unconfirmed clusters stay pending.
  Result<ReconcileStats> Reconcile(const std::vector<std::string>& keys, bool startup,
                                   const DirtyEdits& edits = {});

  // Forgets outstanding/pending state (on losing leadership: the next leader recomputes) and
  // zeroes the gauges that describe it.
  void Reset();

  // A new full reapply interval (HiveConfig changed it): due times are recomputed as clusters are
  // looked at; the caller marks them all dirty.
  void SetReapplyInterval(std::chrono::milliseconds interval) {
    options_.reapply.interval = interval;
  }
  std::chrono::milliseconds reapply_interval() const { return options_.reapply.interval; }

  size_t outstanding() const { return outstanding_.size(); }
  size_t pending() const { return pending_.size(); }

 private:
  struct Outstanding {
    DesiredState snapshot;
    hive::SecretVersions secrets;  // the source Secrets' versions when it was published
    SteadyTime published_at;
    WallTime published_wall;
    bool full_reapply = false;
    SteadyTime first_published;  // kept when the request is re-sent
    // A request of this cluster waits on the resync lane. A change then goes out on the change
    // lane at once ("promoted") instead of waiting behind the resync backlog; the entry keeps
    // the resync's obligations (its full reapply, its publish time) until that is processed too.
    bool resync_queued = false;
    bool promoted = false;  // a change-lane request went out after the queued resync
  };
  struct ToSend {
    std::string key;
    SyncRequest request;
    DesiredState snapshot;
    hive::SecretVersions secrets;
    std::optional<Outstanding> promoted_from;  // the outstanding resync this change overtakes
    bool bulk = false;                         // a bulk edit's change (on the resync lane)
  };

  bool TakeToken();
  std::vector<std::string> DueKeys();
  void Schedule(const std::string& key, const ClusterView& view);
  bool Processed(const Outstanding& o, const ClusterView& view) const;
  // The source-Secret versions a cluster is known to run; a cluster seen for the first time is
  // assumed current unless a Secret was written after its last full reapply.
  const hive::SecretVersions& AppliedSecrets(const std::string& key, const ClusterView& view);
  bool RejectHoldOff(SteadyTime now) const { return now < rejected_until_; }
  Status Send(std::vector<ToSend>& batch, ReconcileStats& stats);
  // Keeps a cluster that could not be sent pending; start-up work stays start-up work and a
  // bulk change stays bulk (resync lane) until it goes out, so neither floods the change lane
  // once deferred.
  void KeepPending(const std::string& key, bool startup, bool bulk);
  void KeepPending(const ToSend& item) {
    KeepPending(item.key, item.request.reason == "startup", item.bulk);
  }

  PublisherOptions options_;
  HubCache& cache_;
  amqp::Session& session_;
  Clock& clock_;

  std::map<std::string, Outstanding> outstanding_;
  std::map<std::string, SteadyTime> last_published_;
  std::set<std::string> pending_;
  std::set<std::string> startup_pending_;  // pending keys left over from a start-up round
  std::set<std::string> bulk_pending_;     // pending keys of a bulk edit
  std::map<std::string, std::string> cluster_state_;  // in_sync, pending, failing, paused, skipped
  std::map<std::string, WallTime> reapply_due_;       // key -> due
  std::set<std::pair<WallTime, std::string>> reapply_queue_;
  // Source-Secret versions applied by the last processed full reapply, per cluster.
  std::map<std::string, hive::SecretVersions> secrets_applied_;
  // After the broker refused publishes, nothing is sent before this (doubling hold-off).
  SteadyTime rejected_until_{};
  std::chrono::milliseconds reject_holdoff_{0};
  // Since when publishes have been refused without a round that had none; and when that asks
  // for a new connection.
  std::optional<SteadyTime> refused_since_;
  amqp::ChannelRenewal renewal_;
  double tokens_;
  SteadyTime tokens_at_;
  uint64_t sequence_ = 0;

  prometheus::Family<prometheus::Counter>& enqueued_;
  prometheus::Gauge& outstanding_gauge_;
  prometheus::Gauge& oldest_outstanding_gauge_;
  prometheus::Gauge& pending_gauge_;
  prometheus::Counter& resent_;
  prometheus::Counter& promoted_;
  prometheus::Counter& rejected_;
  prometheus::Histogram& confirm_latency_;
  prometheus::Family<prometheus::Gauge>& clusters_;
  prometheus::Histogram& reconcile_seconds_;
  prometheus::Histogram& cache_lock_seconds_;
};

}  // namespace syncbus::publisher
