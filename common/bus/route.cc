#include "common/bus/route.h"

#include "common/bus/headers.h"

namespace syncbus {
namespace {

std::string Unsettled(int unsettled) {
  return "delivered " + std::to_string(unsettled) + " time(s) without being settled";
}

Route Publishing(Step step, std::string outcome, std::string why, amqp::Publication publication,
                 int unsettled) {
  Route r;
  r.step = step;
  r.outcome = std::move(outcome);
  r.why = std::move(why);
  r.unsettled = unsettled;
  if (step == Step::kDeadLetter)
    r.dead_reason = publication.message.headers.value(kDeadReasonHeader, "");
  r.publication = std::move(publication);
  return r;
}

// Where a request whose cluster `holder` holds goes: to that consumer's own queue, or, once it
// has been forwarded max_hops times, to the shortest delay tier.
Route ToHolder(const amqp::Delivery& delivery, const std::string& holder, const RoutePolicy& policy,
               int unsettled) {
  if (HopsOf(delivery.message) >= policy.max_hops) {
    return Publishing(Step::kDefer, "busy",
                      "the cluster is held by another consumer (" + holder +
                          "), and the request was forwarded " + std::to_string(policy.max_hops) +
                          " times already",
                      Defer(delivery, policy.retry), unsettled);
  }
  return Publishing(Step::kForward, "forwarded",
                    "the cluster is held by another consumer (" + holder + ")",
                    Forwarded(delivery, holder), unsettled);
}

Route Arrived(const amqp::Delivery& delivery, const Result<SyncRequest>& request,
              const RoutePolicy& policy, ClusterFacts& facts, WallTime now) {
  if (!request.ok()) {
    const std::string& error = request.status().message();
    return Publishing(Step::kDeadLetter, "dead-lettered", error,
                      ParkedCopy(delivery, "undecodable", error, now), 0);
  }
  const int unsettled = UnsettledDeliveries(delivery.message);
  if (unsettled == 0) {
    // The common case: run it, unless another consumer holds its cluster.
    if (std::string holder = facts.StickyHolder(*request); !holder.empty())
      return ToHolder(delivery, holder, policy, 0);
    return Route{};
  }
  // It ended unsettled before: a consumer died or lost its connection holding it. Most often
  // its work has been done meanwhile (by another delivery of it, or a newer request).
  if (std::string done = facts.SettledAlready(*request); !done.empty()) {
    Route r;
    r.step = Step::kAckSuperseded;
    r.outcome = "superseded";
    r.unsettled = unsettled;
    r.why = Unsettled(unsettled) +
            "; settled without running, as the cluster needs no write now (" + done + ")";
    return r;
  }
  if (policy.delivery_limit > 0 && unsettled > policy.delivery_limit) {
    const std::string why = "delivered " + std::to_string(unsettled) +
                            " times without being settled (consumers crashed or were killed)";
    amqp::Publication dead = ParkedCopy(delivery, "delivery_limit", why, now);
    dead.message.headers[kUnsettledHeader] = unsettled;  // for `dlq list`
    dead.message.headers[kReturnedHeader] = ReturnsFromConsumers(delivery.message);
    return Publishing(Step::kDeadLetter, "dead-lettered", why, std::move(dead), unsettled);
  }
  const bool alone = RunsAlone(unsettled, policy.delivery_limit);
  if (NeedsQuarantine(delivery.message)) {
    return Publishing(Step::kHoldBack, "quarantined",
                      Unsettled(unsettled) +
                          " (a consumer died or lost its connection holding it): held back" +
                          (alone ? ", then run alone" : ""),
                      Quarantine(delivery, policy.retry), unsettled);
  }
  // Running alone holds up the consumer's other work: not while the cluster is leased
  // elsewhere (most often by the consumer that died holding it), when it would only be deferred.
  if (std::string holder = facts.StickyHolder(*request); !holder.empty())
    return ToHolder(delivery, holder, policy, unsettled);
  if (std::string holder = facts.HolderElsewhere(*request); !holder.empty()) {
    return Publishing(Step::kDefer, "busy",
                      "the cluster is busy on another consumer (" + holder + ")",
                      Defer(delivery, policy.retry), unsettled);
  }
  Route r;
  r.step = alone ? Step::kRunAlone : Step::kRun;
  r.unsettled = unsettled;
  return r;
}

Route Ran(const amqp::Delivery& delivery, const RunEnd& ran, const RoutePolicy& policy,
          WallTime now) {
  if (ran.busy && !ran.holder.empty()) return ToHolder(delivery, ran.holder, policy, 0);
  if (ran.busy) {
    return Publishing(Step::kDefer, "busy", "the cluster is busy on another consumer",
                      Defer(delivery, policy.retry), 0);
  }
  if (ran.succeeded) {
    Route r;
    r.step = Step::kAckDone;
    return r;
  }
  amqp::Publication next =
      NextAttempt(delivery, policy.retry, ran.error, ran.permanent, now, ran.retry_after);
  const bool dead = next.exchange == amqp::kDeadExchange;
  return Publishing(dead ? Step::kDeadLetter : Step::kRetry, dead ? "dead-lettered" : "retried",
                    SanitizeError(ran.error), std::move(next), 0);
}

}  // namespace

const char* StepName(Step step) {
  switch (step) {
    case Step::kRun: return "run";
    case Step::kRunAlone: return "run alone";
    case Step::kAckDone: return "ack";
    case Step::kAckSuperseded: return "ack as superseded";
    case Step::kRetry: return "retry";
    case Step::kDefer: return "defer";
    case Step::kHoldBack: return "hold back";
    case Step::kDeadLetter: return "dead-letter";
    case Step::kForward: return "forward";
  }
  return "?";
}

std::string Route::tier() const {
  if (!publication) return "";
  return publication->message.headers.value(kRetryTierHeader, "");
}

Route RouteDelivery(const Situation& situation, const RoutePolicy& policy, ClusterFacts& facts,
                    WallTime now) {
  const amqp::Delivery& delivery = *situation.delivery;
  switch (situation.when) {
    case Situation::When::kArrived:
      return Arrived(delivery, *situation.request, policy, facts, now);
    case Situation::When::kRan: return Ran(delivery, situation.ran, policy, now);
    case Situation::When::kAloneWaitedTooLong:
      return Publishing(
          Step::kDefer, "busy",
          "it runs alone, and the syncs in flight in this consumer did not finish in time",
          Defer(delivery, policy.retry), UnsettledDeliveries(delivery.message));
  }
  return Route{};
}

}  // namespace syncbus
