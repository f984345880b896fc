#include "common/bus/trace_event.h"

#include <array>
#include <utility>

#include "common/bus/sync_message.h"
#include "common/bus/topology.h"
#include "common/time_format.h"

namespace syncbus {
namespace {

constexpr std::array<std::pair<TraceStep, const char*>, 4> kSteps{{
    {TraceStep::kPublished, "published"},
    {TraceStep::kDelivered, "delivered"},
    {TraceStep::kSettled, "settled"},
    {TraceStep::kReplayed, "replayed"},
}};

constexpr std::array<std::pair<TraceOutcome, const char*>, 7> kOutcomes{{
    {TraceOutcome::kNone, ""},
    {TraceOutcome::kApplied, "applied"},
    {TraceOutcome::kUpToDate, "up-to-date"},
    {TraceOutcome::kSkipped, "skipped"},
    {TraceOutcome::kRetry, "retry"},
    {TraceOutcome::kDeferred, "deferred"},
    {TraceOutcome::kParked, "parked"},
}};

int64_t Millis(std::chrono::milliseconds d) {
  return d.count();
}

// Reads the optional fields of one JSON object strictly: a present field of the wrong type, too
// long or out of range is an error naming it; unknown fields are ignored (newer writers).
class Fields {
 public:
  explicit Fields(const Json& object, std::string where = "")
      : j_(object), where_(std::move(where)) {}

  Status String(const char* key, std::string& out, size_t max_len, bool required = false) const {
    auto it = j_.find(key);
    if (it == j_.end()) return required ? Missing(key) : Status::Ok();
    if (!it->is_string()) return Error(key, "must be a string");
    const auto& v = it->get_ref<const std::string&>();
    if (v.size() > max_len)
      return Error(key, "is longer than " + std::to_string(max_len) + " characters");
    out = v;
    return Status::Ok();
  }
  Status Int(const char* key, int64_t& out, int64_t min, int64_t max) const {
    auto it = j_.find(key);
    if (it == j_.end()) return Status::Ok();
    if (!it->is_number_integer()) return Error(key, "must be an integer");
    int64_t v = it->get<int64_t>();
    if (v < min || v > max) return Error(key, "is out of range");
    out = v;
    return Status::Ok();
  }
  Status Millis(const char* key, std::chrono::milliseconds& out) const {
    int64_t v = 0;
    SYNCBUS_RETURN_IF_ERROR(Int(key, v, 0, int64_t{1} << 40));
    out = std::chrono::milliseconds(v);
    return Status::Ok();
  }
  Status Bool(const char* key, bool& out) const {
    auto it = j_.find(key);
    if (it == j_.end()) return Status::Ok();
    if (!it->is_boolean()) return Error(key, "must be a boolean");
    out = it->get<bool>();
    return Status::Ok();
  }
  Status Time(const char* key, WallTime& out, bool required = false) const {
    std::string text;
    SYNCBUS_RETURN_IF_ERROR(String(key, text, 64, required));
    if (text.empty()) return Status::Ok();
    auto t = ParseRfc3339(text);
    if (!t.ok()) return Error(key, "is not an RFC 3339 time");
    out = *t;
    return Status::Ok();
  }

 private:
  Status Missing(const char* key) const {
    return InvalidArgument("trace event: missing field \"" + where_ + key + "\"");
  }
  Status Error(const char* key, const std::string& what) const {
    return InvalidArgument("trace event: field \"" + where_ + key + "\" " + what);
  }
  const Json& j_;
  std::string where_;
};

Status ValidCluster(const std::string& key) {
  size_t slash = key.find('/');
  if (slash == std::string::npos || !IsDnsLabel(std::string_view(key).substr(0, slash)) ||
      !IsDnsSubdomain(std::string_view(key).substr(slash + 1))) {
    return InvalidArgument(
        "trace event: field \"cluster\" must be \"namespace/name\" with valid names");
  }
  return Status::Ok();
}

Result<TraceSet> DecodeSet(const Json& j, size_t index) {
  std::string where = "sets[" + std::to_string(index) + "].";
  if (!j.is_object())
    return InvalidArgument("trace event: field \"" + where.substr(0, where.size() - 1) +
                           "\" must be an object");
  Fields f(j, where);
  TraceSet s;
  SYNCBUS_RETURN_IF_ERROR(f.String("kind", s.kind, 32, true));
  if (s.kind != "SyncSet" && s.kind != "SelectorSyncSet") {
    return InvalidArgument("trace event: field \"" + where +
                           "kind\" must be SyncSet or SelectorSyncSet");
  }
  SYNCBUS_RETURN_IF_ERROR(f.String("name", s.name, 253, true));
  SYNCBUS_RETURN_IF_ERROR(f.Int("generation", s.generation, 0, INT64_MAX));
  int64_t applies = 0;
  SYNCBUS_RETURN_IF_ERROR(f.Int("applies", applies, 0, 1 << 24));
  s.applies = static_cast<int>(applies);
  SYNCBUS_RETURN_IF_ERROR(f.Bool("success", s.success));
  SYNCBUS_RETURN_IF_ERROR(f.String("failure", s.failure, 512));
  return s;
}

// The event's fields, without a version (a batch carries one for all its events).
Json EventJson(const TraceEvent& e) {
  Json j = {{"step", TraceStepName(e.step)},
            {"cluster", e.cluster},
            {"request", e.request},
            {"at", FormatRfc3339Millis(e.at)},
            {"durationMs", Millis(e.duration)},
            {"actor", e.actor}};
  auto put = [&](const char* key, const std::string& v) {
    if (!v.empty()) j[key] = v;
  };
  put("reason", e.reason);
  put("lane", e.lane);
  put("revision", e.revision);
  if (e.decided_at != WallTime{}) j["decidedAt"] = FormatRfc3339Millis(e.decided_at);
  if (e.attempt != 0) j["attempt"] = e.attempt;
  if (e.redelivered) j["redelivered"] = true;
  if (e.queued.count() != 0) j["queuedMs"] = Millis(e.queued);
  if (e.outcome != TraceOutcome::kNone) j["outcome"] = TraceOutcomeName(e.outcome);
  put("tier", e.tier);
  put("deadReason", e.dead_reason);
  put("error", e.error);
  if (e.prepare.count() != 0) j["prepareMs"] = Millis(e.prepare);
  if (e.target.count() != 0) j["targetMs"] = Millis(e.target);
  if (e.store.count() != 0) j["storeMs"] = Millis(e.store);
  if (!e.sets.empty()) {
    Json sets = Json::array();
    for (const auto& s : e.sets) {
      Json o = {{"kind", s.kind},
                {"name", s.name},
                {"generation", s.generation},
                {"applies", s.applies},
                {"success", s.success}};
      if (!s.failure.empty()) o["failure"] = s.failure;
      sets.push_back(std::move(o));
    }
    j["sets"] = std::move(sets);
  }
  return j;
}

}  // namespace

const char* TraceStepName(TraceStep step) {
  for (const auto& [s, name] : kSteps) {
    if (s == step) return name;
  }
  return "unknown";
}

const char* TraceOutcomeName(TraceOutcome outcome) {
  for (const auto& [o, name] : kOutcomes) {
    if (o == outcome) return name;
  }
  return "unknown";
}

namespace {

// An event's fields (its version already checked, by itself or by its batch).
Result<TraceEvent> DecodeEventFields(const Json& j) {
  if (!j.is_object()) return InvalidArgument("trace event: not a JSON object");
  Fields f(j);
  TraceEvent e;
  std::string step;
  SYNCBUS_RETURN_IF_ERROR(f.String("step", step, 32, true));
  bool known = false;
  for (const auto& [s, name] : kSteps) {
    if (step == name) e.step = s, known = true;
  }
  if (!known) return InvalidArgument("trace event: unknown step \"" + step + "\"");
  SYNCBUS_RETURN_IF_ERROR(f.String("cluster", e.cluster, 64 + 1 + 253, true));
  SYNCBUS_RETURN_IF_ERROR(ValidCluster(e.cluster));
  SYNCBUS_RETURN_IF_ERROR(f.String("request", e.request, 512, true));
  SYNCBUS_RETURN_IF_ERROR(f.Time("at", e.at, true));
  SYNCBUS_RETURN_IF_ERROR(f.Millis("durationMs", e.duration));
  SYNCBUS_RETURN_IF_ERROR(f.String("actor", e.actor, 256));
  SYNCBUS_RETURN_IF_ERROR(f.String("reason", e.reason, 64));
  SYNCBUS_RETURN_IF_ERROR(f.String("lane", e.lane, 16));
  if (!e.lane.empty() && e.lane != "change" && e.lane != "resync") {
    return InvalidArgument("trace event: unknown lane \"" + e.lane + "\"");
  }
  SYNCBUS_RETURN_IF_ERROR(f.String("revision", e.revision, 128));
  SYNCBUS_RETURN_IF_ERROR(f.Time("decidedAt", e.decided_at));
  int64_t attempt = 0;
  SYNCBUS_RETURN_IF_ERROR(f.Int("attempt", attempt, 0, 1 << 20));
  e.attempt = static_cast<int>(attempt);
  SYNCBUS_RETURN_IF_ERROR(f.Bool("redelivered", e.redelivered));
  SYNCBUS_RETURN_IF_ERROR(f.Millis("queuedMs", e.queued));
  std::string outcome;
  SYNCBUS_RETURN_IF_ERROR(f.String("outcome", outcome, 32));
  known = outcome.empty();
  for (const auto& [o, name] : kOutcomes) {
    if (!outcome.empty() && outcome == name) e.outcome = o, known = true;
  }
  if (!known) return InvalidArgument("trace event: unknown outcome \"" + outcome + "\"");
  if ((e.step == TraceStep::kSettled) != (e.outcome != TraceOutcome::kNone)) {
    return InvalidArgument(
        "trace event: field \"outcome\" belongs to settled events, and only to them");
  }
  SYNCBUS_RETURN_IF_ERROR(f.String("tier", e.tier, 16));
  SYNCBUS_RETURN_IF_ERROR(f.String("deadReason", e.dead_reason, 64));
  SYNCBUS_RETURN_IF_ERROR(f.String("error", e.error, 1024));
  SYNCBUS_RETURN_IF_ERROR(f.Millis("prepareMs", e.prepare));
  SYNCBUS_RETURN_IF_ERROR(f.Millis("targetMs", e.target));
  SYNCBUS_RETURN_IF_ERROR(f.Millis("storeMs", e.store));
  if (auto sets = j.find("sets"); sets != j.end()) {
    if (!sets->is_array()) return InvalidArgument("trace event: field \"sets\" must be an array");
    if (sets->size() > kMaxTraceSets) {
      return InvalidArgument("trace event: more than " + std::to_string(kMaxTraceSets) + " sets");
    }
    for (size_t i = 0; i < sets->size(); ++i) {
      auto s = DecodeSet((*sets)[i], i);
      if (!s.ok()) return s.status();
      e.sets.push_back(std::move(*s));
    }
  }
  return e;
}

// The message's JSON object and its version, or why it is not one.
Result<Json> ParseMessage(std::string_view body, size_t limit, int64_t& version) {
  if (body.size() > limit) {
    return InvalidArgument("trace event: body of " + std::to_string(body.size()) +
                           " bytes exceeds the limit of " + std::to_string(limit));
  }
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("trace event: body is not valid JSON");
  if (!j.is_object()) return InvalidArgument("trace event: body is not a JSON object");
  if (!j.contains("version")) return InvalidArgument("trace event: missing field \"version\"");
  SYNCBUS_RETURN_IF_ERROR(Fields(j).Int("version", version, INT64_MIN, INT64_MAX));
  return j;
}

Status Unsupported(int64_t version) {
  return InvalidArgument("trace event: unsupported version " + std::to_string(version) +
                         " (this build reads " + std::to_string(kTraceEventVersion) + " and " +
                         std::to_string(kTraceBatchVersion) + ")");
}

}  // namespace

std::string EncodeTraceEvent(const TraceEvent& event) {
  Json j = EventJson(event);
  j["version"] = kTraceEventVersion;
  return j.dump();
}

Result<TraceEvent> DecodeTraceEvent(std::string_view body) {
  int64_t version = 0;
  auto j = ParseMessage(body, kMaxTraceEventBytes, version);
  if (!j.ok()) return j.status();
  if (version != kTraceEventVersion) return Unsupported(version);
  return DecodeEventFields(*j);
}

Result<TraceMessage> DecodeTraceMessage(std::string_view body) {
  int64_t version = 0;
  auto j = ParseMessage(body, kMaxTraceMessageBytes, version);
  if (!j.ok()) return j.status();
  TraceMessage out;
  if (version == kTraceEventVersion) {
    if (body.size() > kMaxTraceEventBytes) {
      return InvalidArgument("trace event: body of " + std::to_string(body.size()) +
                             " bytes exceeds the limit of " + std::to_string(kMaxTraceEventBytes));
    }
    auto e = DecodeEventFields(*j);
    if (!e.ok()) return e.status();
    out.events.push_back(std::move(*e));
    return out;
  }
  if (version != kTraceBatchVersion) return Unsupported(version);
  auto events = j->find("events");
  if (events == j->end() || !events->is_array())
    return InvalidArgument("trace event: a batch's field \"events\" must be an array");
  if (events->size() > kMaxTraceBatchEvents) {
    return InvalidArgument("trace event: a batch of more than " +
                           std::to_string(kMaxTraceBatchEvents) + " events");
  }
  out.events.reserve(events->size());
  for (const Json& element : *events) {
    auto e = DecodeEventFields(element);
    if (e.ok()) {
      out.events.push_back(std::move(*e));
    } else {
      ++out.invalid;
    }
  }
  return out;
}

std::vector<TraceBatch> TraceBatches(const std::vector<const TraceEvent*>& events,
                                     size_t max_events, size_t max_bytes) {
  static const std::string kHead =
      R"({"version":)" + std::to_string(kTraceBatchVersion) + R"(,"events":[)";
  std::vector<TraceBatch> out;
  TraceBatch batch;
  std::string body;
  auto close = [&](size_t end) {
    if (end == batch.first) return;
    batch.end = end;
    amqp::Message& m = batch.publication.message;
    m.body = std::move(body);
    m.body += "]}";
    m.content_type = "application/json";
    m.type = "syncbus.trace-events.v2";
    m.app_id = events[batch.first]->actor;
    m.message_id = events[batch.first]->request + "/" + TraceStepName(events[batch.first]->step) +
                   "+" + std::to_string(end - batch.first);
    m.timestamp =
        std::chrono::duration_cast<std::chrono::seconds>(events[batch.first]->at.time_since_epoch())
            .count();
    m.persistent = true;
    batch.publication.exchange = amqp::kTraceExchange;
    batch.publication.routing_key = "";
    batch.publication.mandatory = false;
    out.push_back(std::move(batch));
    batch = TraceBatch{};
    batch.first = end;
    body.clear();
  };
  for (size_t i = 0; i < events.size(); ++i) {
    std::string one = EventJson(*events[i]).dump();
    const size_t count = i - batch.first;
    if (count > 0 && (count >= max_events || body.size() + one.size() + 3 > max_bytes)) close(i);
    body += body.empty() ? kHead : ",";
    body += one;
  }
  close(events.size());
  return out;
}

}  // namespace syncbus
