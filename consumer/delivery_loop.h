// DeliveryLoop: consumes both work lanes and carries out where each delivery goes, as the router
// (common/bus/route.h) says when it arrives, when its run ends and when it waited too long to run
// alone. It hands requests to a pool of workers (change lane first) that take the cluster's lease
// and run the sync under its fence, then settles them on the session's thread: ack once the status
// is stored; on failure publish the next attempt to its delay queue (or the dead-letter queue) and
// ack the original only after that publish is confirmed, so a request is never in neither queue; a
// publish the broker refuses (a delay queue without a leader while a node is down), or does not
// confirm within settle_confirm_timeout, is tried again shortly, never left unacked on a live
// connection; refusals that last are met with a new publishing channel (a stale channel,
// channel_renewal.h), keeping the deliveries, and only if those are refused too, end Step() with an
// error so that the caller reconnects. A cluster busy on another consumer goes to the shortest
// delay tier without counting an attempt; with sticky claims, to the own queue of the consumer
// holding it (forwarded, at most max_hops times; to the shortest tier when that queue is gone).
// Undecodable messages are parked at once. A request that ended unsettled before (its consumer died
// or lost its connection holding it) is held back in a delay tier first; from its second such
// delivery on (RunsAlone) it then runs alone, with nothing else of the live connection in flight in
// this process, so a request that crashes consumers takes neither the pool nor other work down with
// it (RetryPolicy's Quarantine), unless its work is already done (settled_already: acked as
// superseded, without running it); while its cluster is leased elsewhere (by the consumer that died
// holding it), or when the work in flight does not finish within alone_wait, it is deferred
// instead, without holding up this consumer's other work. Deliveries for a cluster already in
// progress in this process wait for it. When the broker connection is lost, the syncs of its
// deliveries stop at their next write and give their cluster leases back at once: the broker has
// handed those requests to other consumers, which need the clusters now. Step()/Drain() run on one
// thread (the session's owner); workers are internal.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "common/amqp/channel_renewal.h"
#include "common/amqp/session.h"
#include "common/backoff.h"
#include "common/bus/retry_policy.h"
#include "common/bus/route.h"
#include "common/bus/trace_recorder.h"
#include "common/clock.h"
#include "common/random_impl.h"
#include "consumer/cluster_lease.h"
#include "consumer/cluster_syncer.h"
#include "consumer/sync_events.h"

namespace syncbus::consumer {

struct DeliveryOptions {
  uint16_t prefetch = 20;  // per lane
  int workers = 20;        // clusters processed at once
  RetryPolicy retry;
  // topology.deliveryLimit: a request whose deliveries ended unsettled more often than this,
  // counted across deferrals and quarantines, is parked as poison (0 = the broker alone; the
  // work queues' delivery-limit policy is the broker's backstop for each copy).
  int delivery_limit = 0;
  // Sticky claims: this consumer's own queues (topology.h, ConsumerQueueName: one per lane),
  // consumed beside the work lanes, where other consumers forward requests for the clusters it
  // holds; empty = none.
  std::vector<std::string> own_queues;
  std::chrono::milliseconds confirm_timeout{30000};  // a publish to the dead-letter queue
  // A publish to a delay tier (the next attempt, a deferral, a hold-back): waited for on the
  // session's thread, so it is kept short; unconfirmed by then, it counts as refused and is tried
  // again (a late confirm leaves a second copy: one more cheap up-to-date check).
  std::chrono::milliseconds settle_confirm_timeout{3000};
  // How long a request that runs alone waits to start: for the syncs in flight to finish, with
  // nothing new starting meanwhile. Past that (one of them is slow: a target that does not
  // answer holds its sync up to the request timeout) it goes back to the shortest delay tier,
  // counts unchanged, and this consumer's other work resumes.
  std::chrono::milliseconds alone_wait{1000};
  // Where deliveries and settlements are recorded for `syncbusctl trace`; published by its owner
  // (common/bus/trace_flusher.h), never by the loop. Null = no trace. Must outlive the loop.
  TraceRecorder* trace = nullptr;
  // Told of failed, parked and recovered syncs once settled (Kubernetes Events). Null = none.
  // Must outlive the loop.
  SyncEventSink* events = nullptr;  // For a request that ended unsettled before: why running it
                                    // would write nothing now ("" = it
  // would), read without waiting and without a hub request (NoWriteReason over the mirror's
  // state, fresh at the request's `seen`). Most often another delivery of it, or a newer
  // request, did the work meanwhile; a request that keeps crashing its consumers never gets
  // its work done, so it is still held back, run alone and parked. Null = always "".
  std::function<std::string(const SyncRequest&)> settled_already;
};

// Processes one request (ClusterSyncer::Sync in production), checking `fence` before each write.
using SyncFunction = std::function<Result<SyncOutcome>(const SyncRequest&, const SyncFence&)>;

class DeliveryLoop {
 public:
  // `leases` may be null (a single consumer needs no cross-process exclusion); it must outlive
  // the loop, as must `session` and `clock`.
  DeliveryLoop(DeliveryOptions options, amqp::Session& session, SyncFunction sync,
               ClusterLeases* leases, Clock& clock, prometheus::Registry& registry);
  // Fences off running syncs, stops and joins the workers (their results are dropped: the
  // broker redelivers them).
  ~DeliveryLoop();

  // Starts consuming both lanes (again after a reconnect; results of the old connection are
  // dropped — the broker redelivers those messages).
  Status Subscribe();
  // The broker connection is gone (Step() failed): the syncs of its deliveries fail their next
  // fence check, so they stop writing and their leases are given back (see above).
  void ConnectionLost();
  // Settles finished work, then waits up to `timeout` for one delivery and dispatches it.
  // An error means the broker connection is gone: reconnect, Subscribe() again.
  Status Step(std::chrono::milliseconds timeout);
  // Stops consuming and settles in-flight work for up to `grace`; returns how many were left
  // unsettled (they return to the queue when the connection closes; syncs still running stop
  // writing at their next fence check).
  size_t Drain(std::chrono::milliseconds grace);

  size_t in_flight() const;

 private:
  struct Job {
    uint64_t generation = 0;  // subscription the delivery belongs to
    amqp::Delivery delivery;
    SyncRequest request;
    SteadyTime received;
    SteadyTime ready{};  // when it became runnable (its cluster's turn)
    bool alone = false;  // a suspect: runs with no other job of its connection in flight
  };
  struct Done {
    Job job;
    Result<SyncOutcome> outcome;
    bool busy = false;   // the cluster's lease is held elsewhere (or was lost): defer
    std::string holder;  // busy: the live consumer holding it (sticky claims): forward
  };

  void Dispatch(amqp::Delivery delivery);
  void Enqueue(Job job);
  // With mu_ held: the queue `job` waits in when runnable, and whether a worker may take one.
  std::deque<Job>& ReadyQueueLocked(const Job& job);
  void MakeReadyLocked(Job job);
  // With mu_ held: a job of cluster `key` is done (or gone): the next one waiting for it, if
  // any, becomes ready.
  void ReleaseClusterLocked(const std::string& key);
  bool RunnableLocked() const;
  void WorkerMain();
  Done Run(Job job);
  using TraceFill = std::function<void(TraceEvent&)>;
  // A settlement by publication: the next attempt, a deferral or the dead-letter queue.
  struct PendingPark {
    uint64_t generation = 0;
    amqp::Delivery delivery;
    amqp::Publication publication;
    std::string outcome;                 // syncbus_consumer_deliveries_total's label
    std::optional<SyncRequest> request;  // with `fill`: the trace's kSettled event
    SteadyTime since;
    TraceFill fill;
    std::optional<SyncEvent> event;  // for options_.events once settled
    SteadyTime refused_at{};         // first refused
  };

  Status SettleFinished();
  // Defers the requests that waited longer than alone_wait to run alone.
  Status DeferStalledSuspects();
  Status Settle(Done& done);
  // Publishes `publication`, acks `delivery` once it is confirmed, counts it and traces it
  // (kSettled, `fill`, duration from `since`, default now). Refused on a live connection, it
  // is kept and tried again from Step() after a hold-off (250 ms doubling to 2 s): a delivery
  // is never left unacked on a live connection. An error means the connection is gone.
  Status Park(const amqp::Delivery& delivery, const amqp::Publication& publication,
              const char* outcome, const SyncRequest* request, TraceFill fill,
              std::optional<SteadyTime> since = std::nullopt,
              std::optional<SyncEvent> event = std::nullopt);
  Status TryPark(const PendingPark& park);
  // Tries the kept settlements again once their hold-off has passed; an error: the connection
  // is gone, or one has been refused on it for so long, on new publishing channels too, that a
  // new connection is needed (renewal_).
  Status RetryParks();
  // What the router (common/bus/route.h) may ask of this loop: settled_already and the leases.
  class LoopFacts final : public ClusterFacts {
   public:
    explicit LoopFacts(DeliveryLoop& loop) : loop_(loop) {}
    std::string SettledAlready(const SyncRequest& request) override;
    std::string HolderElsewhere(const SyncRequest& request) override;
    std::string StickyHolder(const SyncRequest& request) override;

   private:
    DeliveryLoop& loop_;
  };
  // Carries out a route that publishes (a retry, a deferral, a hold-back, the dead-letter queue):
  // logs it, then Park()s its publication with its trace event (from `ran`'s sync, when it ran)
  // and `event`. An error: the connection is gone.
  Status Forward(const Route& route, const amqp::Delivery& delivery, const SyncRequest* request,
                 SteadyTime since, std::optional<SyncOutcome> ran = std::nullopt,
                 std::optional<SyncEvent> event = std::nullopt);
  void LogRoute(const Route& route, const amqp::Delivery& delivery, const SyncRequest* request,
                const std::optional<SyncOutcome>& ran);
  // Acks a delivery whose run is done, counting, tracing and telling of a recovery.
  Status AckDone(const amqp::Delivery& d, const SyncRequest& r, const SyncOutcome& outcome,
                 SteadyTime received);
  // Acks a request that ended unsettled before but whose work is done (the route says why),
  // counting and tracing it; a failed ack leaves it to the broker's redelivery.
  void SettleSuperseded(const amqp::Delivery& delivery, const SyncRequest& request,
                        const Route& route);
  // Records a trace event for `delivery` (no-op without a recorder).
  void Trace(TraceStep step, const amqp::Delivery& delivery, const SyncRequest& request,
             SteadyTime since, const std::function<void(TraceEvent&)>& fill);

  DeliveryOptions options_;
  const RoutePolicy policy_;  // the router's, from options_
  amqp::Session& session_;
  SyncFunction sync_;
  ClusterLeases* leases_;
  Clock& clock_;
  uint64_t generation_ = 0;  // session thread only
  // The subscription whose deliveries may still be worked on; a fence of another one fails.
  std::atomic<uint64_t> live_generation_{0};
  std::vector<std::string> consumer_tags_;
  std::deque<PendingPark> pending_parks_;  // session thread only
  // Refused settlements: 250 ms doubling to 2 s.
  Backoff park_hold_off_{
      {std::chrono::milliseconds(250), std::chrono::milliseconds(2000), 2.0, /*jitter=*/0.0},
      RealRandom()};              // session thread only
  SteadyTime parks_due_{};        // session thread only
  amqp::ChannelRenewal renewal_;  // session thread only
  // Publishing channels renewed in the current streak of refusals; after this many, a new
  // connection.
  static constexpr int kChannelRenewalsBeforeReconnect = 2;
  int channel_renewals_ = 0;                   // session thread only
  std::atomic<size_t> pending_park_count_{0};  // for in_flight()

  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::deque<Job> ready_change_, ready_resync_;  // runnable jobs; change lane first
  std::deque<Job> ready_alone_;                  // suspects, first of all, one at a time
  bool alone_running_ = false;
  std::map<uint64_t, size_t> running_by_generation_;  // running jobs by subscription
  std::set<std::string> active_;                      // clusters with a ready or running job
  std::map<std::string, std::deque<Job>> waiting_;    // cluster busy: jobs queued behind it
  std::vector<Done> finished_;
  size_t running_ = 0;
  bool stopping_ = false;
  std::atomic<bool> abandon_{false};  // running syncs fail their next fence check
  std::vector<std::thread> workers_;

  prometheus::Family<prometheus::Counter>& deliveries_;
  prometheus::Family<prometheus::Counter>& retries_;
  prometheus::Family<prometheus::Counter>& dead_lettered_;
  prometheus::Counter& redeliveries_;
  prometheus::Gauge& in_flight_gauge_;
  prometheus::Gauge& workers_busy_gauge_;
  prometheus::Histogram& enqueue_to_ack_;
};

}  // namespace syncbus::consumer
