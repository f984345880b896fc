#include "ctl/trace_reader.h"

#include <algorithm>
#include <unordered_set>

#include "common/bus/topology.h"

namespace syncbus::ctl {

bool TraceClusterMatches(const std::string& filter, const std::string& cluster) {
  if (filter.empty() || filter == cluster) return true;
  if (filter.find('/') != std::string::npos) return false;
  size_t slash = cluster.find('/');
  return slash != std::string::npos && cluster.compare(slash + 1, std::string::npos, filter) == 0;
}

Result<TraceRead> ReadTrace(amqp::Session& session, const TraceQuery& query) {
  int64_t from =
      std::chrono::duration_cast<std::chrono::seconds>(query.since.time_since_epoch()).count();
  auto tag = session.ConsumeStream(amqp::kTraceQueue, 1000, from);
  if (!tag.ok() && tag.status().code() == Code::kNotFound) {
    return NotFound("the trace stream " + std::string(amqp::kTraceQueue) +
                    " does not exist on this vhost: no publisher or consumer that records traces "
                    "has connected yet");
  }
  if (!tag.ok())
    return tag.status().Annotate("reading the trace stream " + std::string(amqp::kTraceQueue));
  TraceRead out;
  std::unordered_set<std::string> seen;  // the events kept: a recorder may publish one twice
  const bool follow = static_cast<bool>(query.keep_going);
  while (!follow || query.keep_going()) {
    auto next = session.Next(query.quiet);
    if (!next.ok()) return next.status().Annotate("reading the trace stream");
    if (!next->has_value()) {
      if (follow) continue;
      break;  // quiet: the end of what was recorded
    }
    const amqp::Delivery& d = **next;
    if (Status acked = session.Ack(d.delivery_tag); !acked.ok())
      return acked.Annotate("reading the trace stream");
    auto message = DecodeTraceMessage(d.message.body);
    if (!message.ok()) {
      ++out.scanned;
      ++out.undecodable;
      continue;
    }
    out.scanned += message->events.size() + message->invalid;
    out.undecodable += message->invalid;
    bool past_end = false;
    for (TraceEvent& event : message->events) {
      if (event.at < query.since) continue;  // the offset is found with second precision
      past_end = !follow && query.until != WallTime{} && event.at > query.until;
      if (past_end) break;
      if (TraceClusterMatches(query.cluster, event.cluster) &&
          seen.insert(EncodeTraceEvent(event)).second) {
        if (query.on_event) query.on_event(event);
        out.events.push_back(std::move(event));
      }
    }
    if (past_end) break;
  }
  (void)session.Cancel(*tag);
  // Daemons flush at different moments: order by when each step happened. Within one clock tick
  // (a replay delivered at once on loopback) a request is sent before it is delivered, and
  // delivered before it is settled.
  auto rank = [](TraceStep step) {
    return step == TraceStep::kPublished || step == TraceStep::kReplayed ? 0
           : step == TraceStep::kDelivered                               ? 1
                                                                         : 2;
  };
  std::stable_sort(out.events.begin(), out.events.end(),
                   [&](const TraceEvent& a, const TraceEvent& b) {
                     return a.at != b.at ? a.at < b.at : rank(a.step) < rank(b.step);
                   });
  return out;
}

}  // namespace syncbus::ctl
