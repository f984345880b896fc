// Route: where a sync request's delivery goes, decided in one place. A delivery is routed when it
// arrives (run it, run it alone, settle it unrun, hold it back, defer it, forward it to the
// consumer holding its cluster, park it), when its run has ended (settle it, retry it in a delay
// tier, defer or forward it, park it) and when it waited too long to run alone (defer it). The
// consumer's DeliveryLoop asks and carries the answer out; the publications are the retry policy's
// (retry_policy.h). Pure: what it knows of the cluster it asks a ClusterFacts, and only where the
// answer matters. Thread-compatible.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "common/amqp/session.h"
#include "common/bus/retry_policy.h"
#include "common/bus/sync_message.h"
#include "common/clock.h"
#include "common/status.h"

namespace syncbus {

struct RoutePolicy {
  RetryPolicy retry;
  // topology.deliveryLimit: a request whose deliveries ended unsettled more often than this is
  // parked as poison (0: the broker's own limit alone).
  int delivery_limit = 0;
  // A request is forwarded to the consumer holding its cluster's sticky claim at most this often
  // (then deferred): holders that keep changing must not bounce it around for ever.
  int max_hops = 3;
};

// What the router may ask about a request's cluster. Both answers come from the consumer's hub
// mirror, without waiting; each is asked only for a request that ended unsettled before.
class ClusterFacts {
 public:
  virtual ~ClusterFacts() = default;
  // Why running `request` would write nothing now (the cluster is gone or skipped, or up to
  // date); "" when it would, or when that cannot be told without waiting.
  virtual std::string SettledAlready(const SyncRequest& request) = 0;
  // Another consumer holding the cluster's lease, live and unfinished; "" when none.
  virtual std::string HolderElsewhere(const SyncRequest& request) = 0;
  // Another live consumer holding the cluster's sticky claim, where the request is forwarded;
  // "" when none (or claims are not sticky). Asked for every request.
  virtual std::string StickyHolder(const SyncRequest& request) = 0;
};

// How a run ended.
struct RunEnd {
  bool busy = false;       // the cluster's lease is held elsewhere, or was lost meanwhile
  std::string holder;      // busy: the live consumer holding its sticky claim ("" unknown)
  bool succeeded = false;  // applied, up to date or skipped: nothing left to retry
  std::string error;       // otherwise: what failed
  bool permanent = false;  // it needs an edit, not a quick retry
  std::chrono::milliseconds retry_after{0};  // a server's Retry-After
};

// When the router is asked.
struct Situation {
  enum class When {
    kArrived,             // a delivery came in
    kRan,                 // its run ended (`ran`)
    kAloneWaitedTooLong,  // it runs alone, and the work in flight did not finish in time
  };
  When when = When::kArrived;
  const amqp::Delivery* delivery = nullptr;
  const Result<SyncRequest>* request = nullptr;  // kArrived: the delivery's body, decoded
  RunEnd ran;                                    // kRan only

  static Situation Arrived(const amqp::Delivery& d, const Result<SyncRequest>& request) {
    return Situation{When::kArrived, &d, &request, RunEnd{}};
  }
  static Situation Ran(const amqp::Delivery& d, RunEnd ran) {
    return Situation{When::kRan, &d, nullptr, std::move(ran)};
  }
  static Situation AloneWaitedTooLong(const amqp::Delivery& d) {
    return Situation{When::kAloneWaitedTooLong, &d, nullptr, RunEnd{}};
  }
};

enum class Step {
  kRun,            // hand it to a worker
  kRunAlone,       // hand it to a worker, nothing else of its connection in flight meanwhile
  kAckDone,        // its run is done: ack it
  kAckSuperseded,  // it ended unsettled before, and its work is done: ack it without running
  kRetry,          // publish its next attempt to a delay tier, then ack it
  kDefer,          // publish it to the shortest tier, counting no attempt, then ack it
  kHoldBack,       // it ended unsettled before: publish it to its unsettled count's tier
  kDeadLetter,     // publish it to the dead-letter queue, then ack it
  kForward,        // publish it to the queue of the consumer holding its cluster, then ack it
};
const char* StepName(Step step);

struct Route {
  Step step = Step::kRun;
  // syncbus_consumer_deliveries_total's outcome for every step but kRun, kRunAlone and kAckDone
  // (whose outcome is the run's): "superseded", "retried", "busy", "quarantined",
  // "dead-lettered", "forwarded".
  std::string outcome;
  // Why, in words: the trace event's error text and the log's reason. kDeadLetter:
  // `dead_reason` is the dead-letter queue's reason ("undecodable", "delivery_limit",
  // "max-attempts").
  std::string why;
  std::string dead_reason;
  int unsettled = 0;  // its deliveries that ended unsettled before
  // kRetry, kDefer, kHoldBack, kDeadLetter, kForward: what to publish before the ack.
  std::optional<amqp::Publication> publication;
  // The delay tier `publication` goes to ("" for none).
  std::string tier() const;
};

Route RouteDelivery(const Situation& situation, const RoutePolicy& policy, ClusterFacts& facts,
                    WallTime now);

}  // namespace syncbus
