#include "ctl/request_timeline.h"

#include "common/bus/topology.h"
#include "common/time_format.h"
#include "ctl/text_table.h"

namespace syncbus::ctl {
namespace {

using std::chrono::milliseconds;

std::string Took(milliseconds d) {
  if (d.count() < 1000) return std::to_string(d.count()) + "ms";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(d.count()) / 1000);
  return buf;
}

std::string Ago(WallTime then, WallTime now) {
  auto ms = std::chrono::duration_cast<milliseconds>(now - then);
  if (ms.count() < 0) ms = milliseconds(0);
  return FormatAge(std::chrono::duration_cast<std::chrono::seconds>(ms)) + " ago";
}

// "ns/name/0123abcd4567/42" -> "#42": the publisher's sequence; other ids are kept whole.
std::string ShortRequest(const std::string& id) {
  size_t slash = id.rfind('/');
  if (slash == std::string::npos || slash + 1 == id.size()) return id.empty() ? "-" : id;
  std::string tail = id.substr(slash + 1);
  return tail.find_first_not_of("0123456789") == std::string::npos ? "#" + tail : id;
}

std::string RetryQueueOf(const std::string& tier) {
  return std::string(amqp::kRetryExchange) + "." + tier;
}

std::string SetLine(const TraceSet& s) {
  std::string out = s.kind + " " + s.name +
                    (s.generation == 0 ? " (removed)" : " gen " + std::to_string(s.generation));
  out += s.success ? " ok" : " FAILED";
  if (!s.success && !s.failure.empty()) out += " (" + s.failure + ")";
  return out;
}

// Up to three sets are named; beyond that the successes are counted and only failures named.
std::string SetsSummary(const TraceEvent& e) {
  int applies = 0;
  size_t ok = 0;
  for (const auto& s : e.sets) {
    applies += s.applies;
    ok += s.success ? 1 : 0;
  }
  std::string out = std::to_string(e.sets.size()) + (e.sets.size() == 1 ? " set, " : " sets, ") +
                    std::to_string(applies) + (applies == 1 ? " object:" : " objects:");
  const bool all = e.sets.size() <= 3;
  if (!all) out += " " + std::to_string(ok) + " ok";
  bool first = all;
  for (const auto& s : e.sets) {
    if (!all && s.success) continue;
    out += (first ? " " : "; ") + SetLine(s);
    first = false;
  }
  return out;
}

struct Row {
  WallTime at;
  std::string request, step, took, detail;
};

void Expand(const TraceEvent& e, std::vector<Row>& rows) {
  const std::string id = ShortRequest(e.request);
  switch (e.step) {
    case TraceStep::kPublished:
      rows.push_back({e.decided_at, id, "decided", "-",
                      "reason=" + e.reason + " lane=" + e.lane +
                          (e.revision.empty() ? "" : " revision=" + e.revision)});
      rows.push_back(
          {e.at, id, "published", Took(e.duration),
           "confirmed by the broker, on " +
               amqp::WorkQueueName(e.lane == "resync" ? amqp::Lane::kResync : amqp::Lane::kChange) +
               " (by " + e.actor + ")"});
      return;
    case TraceStep::kReplayed:
      rows.push_back({e.at, id, "replayed", "-",
                      "from " + std::string(amqp::kDeadQueue) + " to the " + e.lane + " lane by " +
                          e.actor + (e.reason.empty() ? "" : " (was " + e.reason + ")")});
      return;
    case TraceStep::kDelivered:
      rows.push_back({e.at, id, "delivered", e.queued.count() > 0 ? Took(e.queued) : "-",
                      "to " + e.actor + ", attempt " + std::to_string(e.attempt + 1) + ", lane " +
                          e.lane + (e.redelivered ? " (redelivered)" : "") +
                          (e.queued.count() > 0 ? "; took = since decided" : "")});
      return;
    case TraceStep::kSettled: break;
  }
  bool synced = e.prepare.count() > 0 || e.target.count() > 0 || !e.sets.empty();
  if (synced) {
    WallTime applied_at = e.at - e.store;
    rows.push_back({applied_at - e.target, id, "prepared", Took(e.prepare),
                    "hub reads, kubeconfig, discovery"});
    rows.push_back({applied_at, id, "applied", Took(e.target),
                    e.sets.empty() ? "no set needed applying" : SetsSummary(e)});
    if (e.store.count() > 0)
      rows.push_back({e.at, id, "status", Took(e.store), "ClusterSync status stored"});
  }
  std::string detail;
  std::string step;
  switch (e.outcome) {
    case TraceOutcome::kApplied:
      step = "acked";
      detail = "done";
      break;
    case TraceOutcome::kUpToDate:
      step = "acked";
      detail = "already up to date: nothing applied";
      break;
    case TraceOutcome::kSkipped:
      step = "acked";
      detail = "skipped: " + e.error;
      break;
    case TraceOutcome::kRetry:
      step = "retry";
      detail = "to " + RetryQueueOf(e.tier) + " (attempt " + std::to_string(e.attempt + 1) +
               " failed): " + e.error;
      break;
    case TraceOutcome::kDeferred:
      step = "deferred";
      detail = "to " + RetryQueueOf(e.tier) + ", no attempt counted: " + e.error;
      break;
    case TraceOutcome::kParked:
      step = "parked";
      detail = "in " + std::string(amqp::kDeadQueue) + " (" + e.dead_reason + "): " + e.error;
      break;
    case TraceOutcome::kNone: step = "settled"; break;
  }
  rows.push_back({e.at, id, step, Took(e.duration), detail + " (by " + e.actor + ")"});
}

}  // namespace

const char* WhereName(RequestPosition::Where where) {
  switch (where) {
    case RequestPosition::Where::kUnknown: return "unknown";
    case RequestPosition::Where::kNone: return "none";
    case RequestPosition::Where::kQueued: return "queued";
    case RequestPosition::Where::kInFlight: return "in-flight";
    case RequestPosition::Where::kRetrying: return "retrying";
    case RequestPosition::Where::kParked: return "parked";
  }
  return "unknown";
}

Json RequestPosition::ToJson(WallTime now) const {
  Json j = {{"where", WhereName(where)}, {"description", Describe(now)}};
  if (!request.empty()) j["request"] = request;
  if (!queue.empty()) j["queue"] = queue;
  if (!consumer.empty()) j["consumer"] = consumer;
  if (!tier.empty()) j["tier"] = tier;
  if (!detail.empty()) j["detail"] = detail;
  if (since != WallTime{}) j["since"] = FormatRfc3339Millis(since);
  if (where != Where::kUnknown && where != Where::kNone) j["attempt"] = attempt;
  return j;
}

std::string RequestPosition::Describe(WallTime now) const {
  const std::string when =
      since == WallTime{} ? "" : " since " + FormatRfc3339(since) + " (" + Ago(since, now) + ")";
  switch (where) {
    case Where::kUnknown: return "no request in the trace window and nothing parked";
    case Where::kNone:
      return "no request outstanding; the last one ended " +
             (since == WallTime{} ? std::string("?") : Ago(since, now)) +
             (detail.empty() ? "" : ": " + detail);
    case Where::kQueued: return "queued on " + queue + when;
    case Where::kInFlight:
      return "in flight on " + consumer + when + ", attempt " + std::to_string(attempt + 1);
    case Where::kRetrying:
      return "waiting in " + queue + when + (detail.empty() ? "" : ": " + detail);
    case Where::kParked: return "parked in " + queue + when + (detail.empty() ? "" : ": " + detail);
  }
  return "";
}

RequestPosition LocateRequest(const std::vector<TraceEvent>& events,
                              const std::vector<DeadLetter>& parked) {
  RequestPosition p;
  if (!parked.empty()) {
    const DeadLetter* newest = &parked.front();
    for (const auto& d : parked) {
      if (d.dead_at && (!newest->dead_at || *d.dead_at > *newest->dead_at)) newest = &d;
    }
    p.where = RequestPosition::Where::kParked;
    p.queue = amqp::kDeadQueue;
    p.request = newest->message_id;
    p.since = newest->dead_at.value_or(WallTime{});
    p.attempt = newest->attempts;
    p.detail = newest->reason + (newest->last_error.empty() ? "" : ": " + newest->last_error);
    return p;
  }
  if (events.empty()) return p;
  const TraceEvent& last = events.back();
  p.request = last.request;
  p.since = last.at;
  p.attempt = last.attempt;
  switch (last.step) {
    case TraceStep::kPublished:
    case TraceStep::kReplayed:
      p.where = RequestPosition::Where::kQueued;
      p.queue =
          amqp::WorkQueueName(last.lane == "resync" ? amqp::Lane::kResync : amqp::Lane::kChange);
      p.attempt = 0;
      return p;
    case TraceStep::kDelivered:
      p.where = RequestPosition::Where::kInFlight;
      p.consumer = last.actor;
      return p;
    case TraceStep::kSettled: break;
  }
  switch (last.outcome) {
    case TraceOutcome::kRetry:
    case TraceOutcome::kDeferred:
      p.where = RequestPosition::Where::kRetrying;
      p.tier = last.tier;
      p.queue = RetryQueueOf(last.tier);
      p.attempt = last.outcome == TraceOutcome::kRetry ? last.attempt + 1 : last.attempt;
      p.detail = last.error;
      return p;
    case TraceOutcome::kParked:
      // Not in the dead-letter queue any more: purged (a replay records its own event).
      p.where = RequestPosition::Where::kNone;
      p.detail =
          "parked (" + last.dead_reason + "), then removed from " + std::string(amqp::kDeadQueue);
      return p;
    default:
      p.where = RequestPosition::Where::kNone;
      p.detail = std::string(TraceOutcomeName(last.outcome)) + " by " + last.actor;
      return p;
  }
}

std::string FormatTimeline(const std::vector<TraceEvent>& events, bool wide) {
  std::vector<std::vector<std::string>> table = {{"TIME", "REQUEST", "STEP", "TOOK", "DETAIL"}};
  if (wide) table = {{"TIME", "CLUSTER", "REQUEST", "STEP", "TOOK", "DETAIL"}};
  for (const auto& e : events) {
    std::vector<Row> rows;
    Expand(e, rows);
    for (const auto& r : rows) {
      if (wide) {
        table.push_back(
            {FormatRfc3339Millis(r.at), e.cluster, e.request, r.step, r.took, r.detail});
      } else {
        table.push_back({FormatRfc3339Millis(r.at), r.request, r.step, r.took, r.detail});
      }
    }
  }
  return FormatTable(table);
}

Json TimelineJson(const std::vector<TraceEvent>& events, const RequestPosition& position,
                  WallTime now) {
  Json list = Json::array();
  for (const auto& e : events) list.push_back(Json::parse(EncodeTraceEvent(e)));
  return {{"events", std::move(list)}, {"position", position.ToJson(now)}};
}

}  // namespace syncbus::ctl
