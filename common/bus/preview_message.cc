#include "common/bus/preview_message.h"

#include <array>
#include <utility>

#include "common/bus/sync_message.h"

namespace syncbus {
namespace {

constexpr std::array<std::pair<ObjectOutcome, const char*>, 6> kObjectOutcomes = {{
    {ObjectOutcome::kCreated, "created"},
    {ObjectOutcome::kChanged, "changed"},
    {ObjectOutcome::kUnchanged, "unchanged"},
    {ObjectOutcome::kDeleted, "deleted"},
    {ObjectOutcome::kRefused, "refused"},
    {ObjectOutcome::kNotReached, "not-reached"},
}};

// Reads the fields of one JSON object; `where` prefixes its errors ("cluster", "objects[3]").
class PreviewFields {
 public:
  PreviewFields(const Json& obj, std::string where) : obj_(obj), where_(std::move(where)) {}

  Status String(const char* key, size_t max_len, std::string& out, bool optional = false) const {
    auto it = obj_.find(key);
    if (it == obj_.end()) return optional ? Status::Ok() : Fail("missing field", key);
    if (!it->is_string()) return Fail("field", key, " must be a string");
    if (it->get_ref<const std::string&>().size() > max_len) {
      return Fail("field", key, " is longer than " + std::to_string(max_len) + " characters");
    }
    out = it->get<std::string>();
    return Status::Ok();
  }
  // The array at `key` (nullptr with an error when absent and not optional, or not an array).
  const Json* Array(const char* key, Status& error, bool optional = false) const {
    auto it = obj_.find(key);
    if (it == obj_.end()) {
      if (!optional) error = Fail("missing field", key);
      return nullptr;
    }
    if (!it->is_array()) {
      error = Fail("field", key, " must be an array");
      return nullptr;
    }
    return &*it;
  }
  Status Fail(const char* what, const char* key, const std::string& rest = "") const {
    return InvalidArgument(std::string(what) + " \"" + Path(key) + "\"" + rest);
  }
  std::string Path(const char* key) const { return where_.empty() ? key : where_ + "." + key; }

 private:
  const Json& obj_;
  std::string where_;
};

// The outer checks of both bodies: size, JSON object, version, preview id.
Result<Json> ParseBody(std::string_view body, size_t max_bytes, std::string& preview_id) {
  auto j = ParseVersionedBody(body, max_bytes, kPreviewVersion);
  if (!j.ok()) return j.status();
  SYNCBUS_RETURN_IF_ERROR(
      PreviewFields(*j, "").String("previewId", kMaxPreviewIdBytes, preview_id));
  if (preview_id.empty()) return InvalidArgument("field \"previewId\" is empty");
  return j;
}

Result<PreviewCluster> DecodeCluster(const Json& j, const std::string& where) {
  if (!j.is_object())
    return InvalidArgument("field \"" + where + "\" must be an object with namespace and name");
  PreviewFields f(j, where);
  PreviewCluster c;
  SYNCBUS_RETURN_IF_ERROR(f.String("namespace", 253, c.ns));
  SYNCBUS_RETURN_IF_ERROR(f.String("name", 253, c.name));
  if (!IsDnsLabel(c.ns))
    return InvalidArgument(f.Path("namespace") + " \"" + c.ns + "\" is not a valid namespace name");
  if (!IsDnsSubdomain(c.name))
    return InvalidArgument(f.Path("name") + " \"" + c.name + "\" is not a valid object name");
  return c;
}

Json EncodeCluster(const PreviewCluster& c) {
  return {{"namespace", c.ns}, {"name", c.name}};
}

// A set as the operator would apply it: the checks the consumer relies on before it reads it.
Status CheckSet(const Json& set) {
  if (!set.is_object()) return InvalidArgument("field \"set\" must be an object");
  PreviewFields f(set, "set");
  std::string api_version, kind;
  SYNCBUS_RETURN_IF_ERROR(f.String("apiVersion", 64, api_version));
  SYNCBUS_RETURN_IF_ERROR(f.String("kind", 64, kind));
  if (api_version != "hive.openshift.io/v1" || (kind != "SyncSet" && kind != "SelectorSyncSet")) {
    return InvalidArgument("set is a " + api_version + " " + kind +
                           ", not a hive.openshift.io/v1 SyncSet or SelectorSyncSet");
  }
  auto meta = set.find("metadata");
  if (meta == set.end() || !meta->is_object())
    return InvalidArgument("field \"set.metadata\" must be an object");
  PreviewFields m(*meta, "set.metadata");
  std::string name, ns;
  SYNCBUS_RETURN_IF_ERROR(m.String("name", 253, name));
  if (!IsDnsSubdomain(name))
    return InvalidArgument("set.metadata.name \"" + name + "\" is not a valid object name");
  SYNCBUS_RETURN_IF_ERROR(m.String("namespace", 253, ns, /*optional=*/kind != "SyncSet"));
  if (kind == "SyncSet" && !IsDnsLabel(ns))
    return InvalidArgument("set.metadata.namespace \"" + ns + "\" is not a valid namespace name");
  auto spec = set.find("spec");
  if (spec == set.end() || !spec->is_object())
    return InvalidArgument("field \"set.spec\" must be an object");
  return Status::Ok();
}

Result<ObjectPreview> DecodeObject(const Json& j, const std::string& where) {
  if (!j.is_object()) return InvalidArgument("field \"" + where + "\" must be an object");
  PreviewFields f(j, where);
  ObjectPreview o;
  SYNCBUS_RETURN_IF_ERROR(f.String("apiVersion", 253, o.api_version));
  SYNCBUS_RETURN_IF_ERROR(f.String("kind", 253, o.kind));
  SYNCBUS_RETURN_IF_ERROR(f.String("namespace", 253, o.ns, /*optional=*/true));
  SYNCBUS_RETURN_IF_ERROR(f.String("name", 253, o.name));
  std::string outcome;
  SYNCBUS_RETURN_IF_ERROR(f.String("outcome", 32, outcome));
  bool known = false;
  for (const auto& [value, name] : kObjectOutcomes) {
    if (outcome == name) {
      o.outcome = value;
      known = true;
    }
  }
  if (!known) return InvalidArgument(f.Path("outcome") + ": unknown outcome \"" + outcome + "\"");
  Status error;
  if (const Json* diff = f.Array("diff", error, /*optional=*/true)) {
    for (const Json& line : *diff) {
      if (!line.is_string())
        return InvalidArgument("field \"" + f.Path("diff") + "\" must be an array of strings");
      o.diff.push_back(line.get<std::string>());
    }
  }
  SYNCBUS_RETURN_IF_ERROR(error);
  SYNCBUS_RETURN_IF_ERROR(f.String("message", kMaxPreviewReplyBytes, o.message, true));
  return o;
}

Json EncodeObject(const ObjectPreview& o) {
  Json j = {{"apiVersion", o.api_version},
            {"kind", o.kind},
            {"namespace", o.ns},
            {"name", o.name},
            {"outcome", ObjectOutcomeName(o.outcome)}};
  if (!o.diff.empty()) j["diff"] = o.diff;
  if (!o.message.empty()) j["message"] = o.message;
  return j;
}

}  // namespace

const char* ObjectOutcomeName(ObjectOutcome outcome) {
  for (const auto& [value, name] : kObjectOutcomes) {
    if (value == outcome) return name;
  }
  return "unknown";
}

std::string EncodePreviewRequest(const PreviewRequest& request) {
  Json clusters = Json::array();
  for (const auto& c : request.clusters) clusters.push_back(EncodeCluster(c));
  return Json{{"version", kPreviewVersion},
              {"previewId", request.preview_id},
              {"set", request.set},
              {"clusters", std::move(clusters)}}
      .dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<PreviewRequest> DecodePreviewRequest(std::string_view body) {
  auto fail = [](const Status& s) { return InvalidArgument("preview request: " + s.message()); };
  PreviewRequest r;
  auto j = ParseBody(body, kMaxPreviewRequestBytes, r.preview_id);
  if (!j.ok()) return fail(j.status());
  auto set = j->find("set");
  if (set == j->end()) return fail(InvalidArgument("missing field \"set\""));
  if (Status s = CheckSet(*set); !s.ok()) return fail(s);
  r.set = *set;
  Status error;
  const Json* clusters = PreviewFields(*j, "").Array("clusters", error);
  if (clusters == nullptr) return fail(error);
  if (clusters->empty() || clusters->size() > kMaxPreviewClusters) {
    return fail(InvalidArgument("field \"clusters\" has " + std::to_string(clusters->size()) +
                                " entries; a request names 1 to " +
                                std::to_string(kMaxPreviewClusters)));
  }
  for (size_t i = 0; i < clusters->size(); ++i) {
    auto c = DecodeCluster((*clusters)[i], "clusters[" + std::to_string(i) + "]");
    if (!c.ok()) return fail(c.status());
    r.clusters.push_back(std::move(*c));
  }
  return r;
}

std::string EncodePreviewReply(const PreviewReply& reply) {
  Json objects = Json::array();
  for (const auto& o : reply.objects) objects.push_back(EncodeObject(o));
  Json j = {{"version", kPreviewVersion},
            {"previewId", reply.preview_id},
            {"cluster", EncodeCluster(reply.cluster)},
            {"objects", std::move(objects)}};
  if (!reply.error.empty()) j["error"] = reply.error;
  // A reply carries apiserver messages verbatim: invalid UTF-8 is replaced, never thrown on.
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<PreviewReply> DecodePreviewReply(std::string_view body) {
  auto fail = [](const Status& s) { return InvalidArgument("preview reply: " + s.message()); };
  PreviewReply r;
  auto j = ParseBody(body, kMaxPreviewReplyBytes, r.preview_id);
  if (!j.ok()) return fail(j.status());
  auto cluster = j->find("cluster");
  if (cluster == j->end()) return fail(InvalidArgument("missing field \"cluster\""));
  auto c = DecodeCluster(*cluster, "cluster");
  if (!c.ok()) return fail(c.status());
  r.cluster = std::move(*c);
  PreviewFields f(*j, "");
  if (Status s = f.String("error", kMaxPreviewReplyBytes, r.error, true); !s.ok()) return fail(s);
  Status error;
  const Json* objects = f.Array("objects", error);
  if (objects == nullptr) return fail(error);
  for (size_t i = 0; i < objects->size(); ++i) {
    auto o = DecodeObject((*objects)[i], "objects[" + std::to_string(i) + "]");
    if (!o.ok()) return fail(o.status());
    r.objects.push_back(std::move(*o));
  }
  if (!r.error.empty() && !r.objects.empty())
    return fail(InvalidArgument("a reply with an error lists no objects"));
  return r;
}

namespace {

amqp::Message PreviewMessage(std::string body, const char* type, const std::string& message_id,
                             const std::string& preview_id, const std::string& app_id,
                             WallTime now) {
  amqp::Message m;
  m.body = std::move(body);
  m.content_type = "application/json";
  m.message_id = message_id;
  m.app_id = app_id;
  m.type = type;
  m.timestamp = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  m.correlation_id = preview_id;
  return m;
}

}  // namespace

amqp::Message ToAmqpMessage(const PreviewRequest& request, const std::string& app_id,
                            const std::string& message_id, const std::string& reply_queue,
                            WallTime now) {
  amqp::Message m = PreviewMessage(EncodePreviewRequest(request), "syncbus.preview-request.v1",
                                   message_id, request.preview_id, app_id, now);
  m.persistent = true;
  m.reply_to = reply_queue;
  return m;
}

amqp::Message ToAmqpMessage(const PreviewReply& reply, const std::string& app_id, WallTime now) {
  amqp::Message m =
      PreviewMessage(EncodePreviewReply(reply), "syncbus.preview-reply.v1",
                     reply.preview_id + "/" + reply.cluster.Key(), reply.preview_id, app_id, now);
  m.persistent = false;
  return m;
}

}  // namespace syncbus
