#include "ctl/fleet_status.h"

#include <algorithm>

#include "common/time_format.h"
#include "ctl/text_table.h"

namespace syncbus::ctl {
namespace {

WallTime ParseOr(const std::string& text) {
  if (text.empty()) return WallTime{};
  auto t = ParseRfc3339(text);
  return t.ok() ? *t : WallTime{};
}

std::string Age(WallTime since, WallTime now) {
  if (since == WallTime{}) return "-";
  return FormatAge(std::chrono::duration_cast<std::chrono::seconds>(now - since));
}

}  // namespace

ClusterStatus ClusterStateOf(const ClusterHubState& hub, const RequestPosition& pos) {
  ClusterStatus c;
  c.key = hub.key;
  using W = RequestPosition::Where;
  if (hub.kind == ClusterHubState::Kind::kSkipped) {
    c.state = FleetState::kSkipped;
    c.detail = hub.skip_reason;
    return c;
  }
  switch (pos.where) {
    case W::kParked:
      c.state = FleetState::kParked;
      c.since = pos.since;
      c.detail = pos.detail;
      return c;
    case W::kInFlight:
      c.state = FleetState::kInFlight;
      c.since = pos.since;
      c.detail = "on " + pos.consumer;
      return c;
    case W::kRetrying:
      c.state = FleetState::kRetrying;
      c.since = pos.since;
      c.detail = pos.tier;
      return c;
    case W::kQueued:
      c.state = FleetState::kPending;
      c.since = pos.since;
      c.detail = "queued on " + pos.queue;
      return c;
    case W::kNone:
    case W::kUnknown: break;
  }
  switch (hub.kind) {
    case ClusterHubState::Kind::kFailing:
      c.state = FleetState::kFailed;
      c.since = ParseOr(hub.since);
      c.detail = hub.detail;
      break;
    case ClusterHubState::Kind::kPending:
      c.state = FleetState::kPending;
      c.detail = hub.held ? hub.detail : "behind, no request in the trace window: " + hub.detail;
      break;
    default:
      c.state = FleetState::kSynced;
      c.since = std::max(ParseOr(hub.since), pos.where == W::kNone ? pos.since : WallTime{});
      break;
  }
  return c;
}

namespace {

std::map<std::string, std::vector<DeadLetter>> ByCluster(const std::vector<DeadLetter>& parked) {
  std::map<std::string, std::vector<DeadLetter>> out;
  for (const auto& d : parked) {
    if (!d.cluster.empty()) out[d.cluster].push_back(d);
  }
  return out;
}

// For synced clusters "oldest" means the least recently confirmed: the earliest time.
void Summarize(FleetStatus& status) {
  for (FleetState s : kFleetStates) status.states[s];
  for (const auto& c : status.clusters) {
    StateSummary& sum = status.states[c.state];
    ++sum.count;
    if (c.state == FleetState::kRetrying || c.state == FleetState::kSkipped)
      ++sum.breakdown[c.detail];
    if (c.state == FleetState::kParked) ++sum.breakdown[c.detail.substr(0, c.detail.find(':'))];
    if (c.since == WallTime{}) {
      if (sum.oldest.empty()) sum.oldest = c.key;
      continue;
    }
    if (sum.oldest_since == WallTime{} || c.since < sum.oldest_since) {
      sum.oldest = c.key;
      sum.oldest_since = c.since;
    }
  }
}

std::string Breakdown(const std::map<std::string, size_t>& counts) {
  std::string out;
  for (const auto& [k, n] : counts)
    out += (out.empty() ? "" : " ") + (k.empty() ? "?" : k) + "=" + std::to_string(n);
  return out;
}

// ROLLOUT PHASE WAVE HELD MESSAGE; under a stopped one's message, its failing clusters.
std::string FormatRollouts(const std::vector<RolloutSummary>& rollouts) {
  std::vector<std::vector<std::string>> rows = {{"ROLLOUT", "PHASE", "WAVE", "HELD", "MESSAGE"}};
  for (const auto& r : rollouts) {
    rows.push_back({r.Ref(), r.phase,
                    r.waves == 0 ? "-" : std::to_string(r.wave) + "/" + std::to_string(r.waves),
                    std::to_string(r.held), r.message.empty() ? "-" : r.message});
    if (!r.Stopped()) continue;
    for (const auto& f : r.failing)
      rows.push_back({"", "", "", "", "failing " + f.cluster + ": " + f.message});
  }
  return FormatTable(rows);
}

}  // namespace

const char* FleetStateName(FleetState state) {
  switch (state) {
    case FleetState::kSynced: return "synced";
    case FleetState::kPending: return "pending";
    case FleetState::kInFlight: return "in-flight";
    case FleetState::kRetrying: return "retrying";
    case FleetState::kParked: return "parked";
    case FleetState::kFailed: return "failed";
    case FleetState::kSkipped: return "skipped";
  }
  return "unknown";
}

FleetStatus ComputeFleetStatus(const FleetProgress& hub, const std::vector<TraceEvent>& trace,
                               const std::vector<DeadLetter>& parked,
                               std::map<std::string, uint32_t> queues) {
  std::map<std::string, std::vector<TraceEvent>> events;
  for (const auto& e : trace) events[e.cluster].push_back(e);
  auto letters = ByCluster(parked);
  FleetStatus status;
  static const std::vector<TraceEvent> kNoEvents;
  static const std::vector<DeadLetter> kNoLetters;
  for (const auto& h : hub.states) {
    auto ev = events.find(h.key);
    auto dl = letters.find(h.key);
    RequestPosition pos = LocateRequest(ev == events.end() ? kNoEvents : ev->second,
                                        dl == letters.end() ? kNoLetters : dl->second);
    if (pos.where == RequestPosition::Where::kQueued) {
      auto depth = queues.find(pos.queue);
      if (depth != queues.end() && depth->second == 0) pos.where = RequestPosition::Where::kUnknown;
    }
    status.clusters.push_back(ClusterStateOf(h, pos));
  }
  status.queues = std::move(queues);
  status.trace_events = trace.size();
  status.rollouts = hub.rollouts;
  Summarize(status);
  return status;
}

Json FleetStatus::ToJson(WallTime now, bool with_clusters) const {
  Json j = Json::object();
  Json st = Json::object();
  for (const auto& [state, sum] : states) {
    Json s = {{"count", sum.count}};
    if (!sum.oldest.empty()) {
      s["oldest"] = {{"cluster", sum.oldest}};
      if (sum.oldest_since != WallTime{}) {
        s["oldest"]["since"] = FormatRfc3339Millis(sum.oldest_since);
        s["oldest"]["seconds"] =
            std::chrono::duration_cast<std::chrono::seconds>(now - sum.oldest_since).count();
      }
    }
    if (!sum.breakdown.empty()) s["breakdown"] = sum.breakdown;
    st[FleetStateName(state)] = std::move(s);
  }
  j["states"] = std::move(st);
  j["queues"] = queues;
  Json rollouts_json = Json::array();
  for (const auto& r : rollouts) rollouts_json.push_back(r.ToJson());
  j["rollouts"] = std::move(rollouts_json);
  j["trace"] = {{"events", trace_events}};
  if (trace_since != WallTime{}) j["trace"]["since"] = FormatRfc3339(trace_since);
  if (with_clusters) {
    Json list = Json::array();
    for (const auto& c : clusters) {
      Json o = {{"cluster", c.key}, {"state", FleetStateName(c.state)}};
      if (c.since != WallTime{}) o["since"] = FormatRfc3339Millis(c.since);
      if (!c.detail.empty()) o["detail"] = c.detail;
      list.push_back(std::move(o));
    }
    j["clusters"] = std::move(list);
  }
  return j;
}

std::string FormatFleetStatus(const FleetStatus& status, WallTime now) {
  std::vector<std::vector<std::string>> rows = {{"STATE", "CLUSTERS", "OLDEST", "FOR", "DETAIL"}};
  for (FleetState s : kFleetStates) {
    auto it = status.states.find(s);
    if (it == status.states.end()) continue;
    const StateSummary& sum = it->second;
    std::string detail;
    if (s == FleetState::kRetrying || s == FleetState::kSkipped || s == FleetState::kParked) {
      detail = Breakdown(sum.breakdown);
    } else if (sum.count > 0) {
      for (const auto& c : status.clusters) {
        if (c.key == sum.oldest) detail = c.detail;
      }
    }
    rows.push_back({FleetStateName(s), std::to_string(sum.count), sum.count == 0 ? "-" : sum.oldest,
                    sum.count == 0 ? "-" : Age(sum.oldest_since, now), detail});
  }
  std::string out = FormatTable(rows);
  if (!status.rollouts.empty()) out += "\n" + FormatRollouts(status.rollouts);
  if (!status.queues.empty()) {
    out += "\nqueues:";
    for (const auto& [name, n] : status.queues) out += " " + name + "=" + std::to_string(n);
    out += "\n";
  }
  out += "trace: " + std::to_string(status.trace_events) + " events";
  if (status.trace_since != WallTime{}) out += " since " + FormatRfc3339(status.trace_since);
  out += "\n";
  return out;
}

Json ClusterReport::ToJson(WallTime now) const {
  Json sets_json = Json::array();
  for (const auto& s : sets) {
    Json o = {{"kind", s.kind}, {"name", s.name}, {"generation", s.generation}};
    if (s.observed) o["observedGeneration"] = *s.observed;
    if (!s.result.empty()) o["result"] = s.result;
    if (!s.last_transition.empty()) o["lastTransitionTime"] = s.last_transition;
    if (!s.failure.empty()) o["failureMessage"] = s.failure;
    if (!s.held.empty()) o["heldBy"] = s.held;
    sets_json.push_back(std::move(o));
  }
  Json j = {{"cluster", key},
            {"state", FleetStateName(state)},
            {"request", position.ToJson(now)},
            {"sets", sets_json}};
  if (!skip_reason.empty()) j["skipReason"] = skip_reason;
  if (!lease_holder.empty()) {
    j["lease"] = {{"holder", lease_holder},
                  {"renewTime", lease_renewed},
                  {"durationSeconds", lease_seconds},
                  {"releasedByStatus", lease_released_by_status}};
  }
  return j;
}

std::string FormatClusterReport(const ClusterReport& r, WallTime now) {
  std::string out = "cluster:  " + r.key + "\nstate:    " + FleetStateName(r.state) +
                    (r.skip_reason.empty() ? "" : " (" + r.skip_reason + ")") +
                    "\nrequest:  " + r.position.Describe(now) + "\nlease:    ";
  if (r.lease_holder.empty()) {
    out += "not held";
  } else if (r.lease_released_by_status) {
    out += "not held (" + r.lease_holder + " gave it back with its status write " +
           Age(ParseOr(r.lease_renewed), now) + " ago or later)";
  } else {
    out += "held by " + r.lease_holder + ", renewed " + Age(ParseOr(r.lease_renewed), now) +
           " ago (duration " + std::to_string(r.lease_seconds) + "s)";
  }
  out += "\n\n";
  std::vector<std::vector<std::string>> rows = {
      {"KIND", "NAME", "GENERATION", "OBSERVED", "RESULT", "LAST-TRANSITION", "FAILURE"}};
  for (const auto& s : r.sets) {
    // A generation its rollout holds back: why the entry is behind, in place of its failure.
    const bool held = !s.held.empty() && s.observed != s.generation;
    std::string note =
        held ? s.held + (s.failure.empty() ? "" : "; before: " + s.failure) : s.failure;
    rows.push_back(
        {s.kind, s.name, std::to_string(s.generation),
         s.observed ? std::to_string(*s.observed) : "-", s.result.empty() ? "-" : s.result,
         s.last_transition.empty() ? "-" : s.last_transition, note.empty() ? "-" : note});
  }
  if (r.sets.empty()) rows.push_back({"-", "(no applicable sets)"});
  return out + FormatTable(rows);
}

}  // namespace syncbus::ctl
