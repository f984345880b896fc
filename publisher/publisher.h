// Publisher: turns the hub cache's dirty clusters into sync requests, one round at a time. A
// round takes a snapshot of the clusters to look at (hub_snapshot.h: the cache's lock is held
// only to copy pointers), decides for each what it needs (cluster_decision.h), remembers what is
// outstanding, pending and due (sync_ledger.h), sends within the publish rate
// (publish_rate.h), changes first, and records what the broker confirmed
// (request_sender.h). At most one request per cluster is outstanding (latest wins: the consumer
// reads the newest state anyway); a request counts as sent only once confirmed, and anything
// unconfirmed or refused stays pending and is retried. Single edits go on the change lane, ahead
// of start-up rounds, reapplies and bulk edits (the resync lane); an edit of a cluster whose
// request waits there overtakes it. Not thread-safe: one Publisher runs on one thread with its
// own amqp::Session.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "common/amqp/session.h"
#include "common/bus/sync_message.h"
#include "common/bus/trace_recorder.h"
#include "common/clock.h"
#include "publisher/cluster_decision.h"
#include "publisher/hub_cache.h"
#include "publisher/publish_rate.h"
#include "publisher/request_sender.h"
#include "publisher/sync_decision.h"
#include "publisher/sync_ledger.h"

namespace syncbus::publisher {

struct PublisherOptions {
  ReapplyPolicy reapply;
  double max_publish_rate = 500;  // messages per second (token bucket, burst = 1 s worth)
  size_t max_outstanding = 10000;
  std::chrono::milliseconds outstanding_timeout{std::chrono::minutes(30)};
  std::chrono::milliseconds confirm_timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds tick{std::chrono::milliseconds(500)};
  size_t batch_size = 1000;  // publishes pipelined per confirm wait (a full round: one)
  // Clusters a round looks at beyond the changes that made it (single edits; other changes
  // when they are at most this many): start-up work, a bulk edit's clusters, due reapplies and
  // whatever else waits are taken this many at a time, in turn, so that no round holds an edit
  // behind the whole fleet (publisher.roundClusters).
  size_t round_clusters = 1000;
  std::string app_id = "syncbus-publisher";
  // Checked right before every publish: a leader whose lease lapsed must not publish, even in
  // the middle of a round. Null = always allowed.
  std::function<bool()> may_publish;
  // Where confirmed requests are recorded for `syncbusctl trace` (its owner flushes it).
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
  // Waiting work is left that only the round's size held back (not the rate, the cap or the
  // broker): the next round may come at once.
  bool more = false;
};

class Publisher {
 public:
  Publisher(PublisherOptions options, HubCache& cache, amqp::Session& session, Clock& clock,
            prometheus::Registry& registry);

  // One round over `keys` plus what waits: pending, due for reapply, or outstanding too long
  // (options.round_clusters of those at most). `startup` makes `keys` start-up work, sent on the
  // resync lane with reason "startup" (the first round after start or after becoming leader).
  // `edits` says which keys a bulk edit made dirty: their changes go on the resync lane too, so
  // that they never hold a single edit back (a bulk change deferred stays bulk until a single
  // edit of its cluster comes). Broker failures return an error; nothing is lost: unconfirmed
  // clusters stay pending.
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

  size_t outstanding() const { return ledger_.outstanding_count(); }
  size_t pending() const { return ledger_.pending().size(); }

 private:
  // A request decided in this round, waiting for a token and its batch. Its message is made when
  // its batch goes out: a start-up round holds one of these for every cluster of the fleet.
  struct ToSend {
    std::string key;
    ClusterDecision decision;
    hive::DesiredState snapshot;
    hive::SecretVersions secrets;
    std::string kubeconfig_version;
    std::unique_ptr<OutstandingRequest> overtaken;  // the outstanding resync this change overtakes
  };
  // How the round was asked for.
  struct RoundAsk {
    const DirtyEdits& edits;
  };

  // The clusters to look at: the single edits among `keys`, the rest of them too unless they are
  // more than options_.round_clusters, and options_.round_clusters of those that wait, taken in
  // turn after the last round's: start-up work (`startup`: all `keys`), a bulk edit's clusters,
  // due reapplies, requests outstanding too long, deferred ones. `more`: waiting ones were left.
  std::vector<std::string> CollectWork(const std::vector<std::string>& keys, bool startup,
                                       const DirtyEdits& edits, bool& more);
  // Decides every cluster of `work` on a snapshot of the cache; returns what to send.
  std::vector<ToSend> DecideClusters(const std::vector<std::string>& work, const RoundAsk& ask,
                                     HubVersions& seen, ReconcileStats& stats);
  // Sends `to_send`, changes first, as the rate and the refusal hold-off allow; the rest stays
  // pending. Stops sending at the first broker failure. `seen`: how far the round's snapshot of
  // the cache had got.
  Status SendWithinRate(std::vector<ToSend>& to_send, const HubVersions& seen,
                        ReconcileStats& stats);
  Status SendBatch(std::vector<ToSend>& batch, const HubVersions& seen, ReconcileStats& stats);
  void RecordConfirmed(ToSend& item, const BatchOutcome& outcome, ReconcileStats& stats);
  // Start-up work stays start-up work and a bulk change stays bulk (resync lane) until it goes
  // out, so neither floods the change lane once deferred.
  void KeepPending(const ToSend& item) {
    ledger_.KeepPending(item.key,
                        {item.decision.reason == SyncReason::kStartup, item.decision.bulk_change});
  }
  void UpdateGauges();
  void LogRound(const ReconcileStats& stats) const;

  PublisherOptions options_;
  HubCache& cache_;
  Clock& clock_;
  SyncLedger ledger_;
  PublishRate rate_;
  RequestSender sender_;
  std::string pending_cursor_;  // the last waiting cluster a round took (they go in turn)

  prometheus::Gauge& outstanding_gauge_;
  prometheus::Gauge& oldest_outstanding_gauge_;
  prometheus::Gauge& pending_gauge_;
  prometheus::Counter& resent_;
  prometheus::Counter& promoted_;
  prometheus::Family<prometheus::Gauge>& clusters_;
  prometheus::Histogram& reconcile_seconds_;
  prometheus::Histogram& cache_lock_seconds_;
};

}  // namespace syncbus::publisher
