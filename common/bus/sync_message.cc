#include "common/bus/sync_message.h"

#include <array>
#include <utility>

#include "common/kube/resource_version.h"
#include "common/time_format.h"

namespace syncbus {
namespace {

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

Result<std::string> RequireString(const Json& obj, const char* key, size_t max_len) {
  auto it = obj.find(key);
  if (it == obj.end()) return InvalidArgument(std::string("missing field \"") + key + "\"");
  if (!it->is_string())
    return InvalidArgument(std::string("field \"") + key + "\" must be a string");
  std::string v = it->get<std::string>();
  if (v.size() > max_len) {
    return InvalidArgument(std::string("field \"") + key + "\" is longer than " +
                           std::to_string(max_len) + " characters");
  }
  return v;
}

// The body's names for the fields of a (const) HubVersions.
template <typename Versions>
auto SeenFields(Versions& v) {
  using Field = decltype(&v.sync_sets);
  return std::array<std::pair<const char*, Field>, 3>{
      {{"clusterDeployments", &v.cluster_deployments},
       {"syncSets", &v.sync_sets},
       {"selectorSyncSets", &v.selector_sync_sets}}};
}

Status DecodeSeen(const Json& j, HubVersions& seen) {
  if (!j.is_object()) return InvalidArgument("field \"seen\" must be an object");
  for (const auto& [key, field] : SeenFields(seen)) {
    auto version = j.find(key);
    if (version == j.end()) continue;
    auto value = RequireString(j, key, 20);
    if (!value.ok()) return value.status().Annotate("seen");
    if (!kube::ParseResourceVersion(*value)) {
      return InvalidArgument(std::string("seen.") + key + " \"" + *value +
                             "\" is not a resourceVersion");
    }
    *field = std::move(*value);
  }
  return Status::Ok();
}

}  // namespace

Result<Json> ParseVersionedBody(std::string_view body, size_t max_bytes, int version) {
  if (body.size() > max_bytes) {
    return InvalidArgument("body of " + std::to_string(body.size()) +
                           " bytes exceeds the limit of " + std::to_string(max_bytes));
  }
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("body is not valid JSON");
  if (!j.is_object()) return InvalidArgument("body is not a JSON object");
  auto v = j.find("version");
  if (v == j.end()) return InvalidArgument("missing field \"version\"");
  if (!v->is_number_integer()) return InvalidArgument("field \"version\" must be an integer");
  if (v->get<int64_t>() != version) {
    return InvalidArgument("unsupported version " + v->dump() + " (this build reads " +
                           std::to_string(version) + ")");
  }
  return j;
}

bool IsDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > 63 || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '-') return false;
  }
  return true;
}

bool IsDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    if (!IsDnsLabel(s.substr(start, dot == std::string_view::npos ? dot : dot - start)))
      return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

std::string EncodeSyncRequest(const SyncRequest& r) {
  Json j = {{"version", kSyncRequestVersion},
            {"cluster", {{"namespace", r.cluster_namespace}, {"name", r.cluster_name}}},
            {"revision", r.revision},
            {"lane", amqp::LaneName(r.lane)},
            {"reason", r.reason},
            {"fullReapply", r.full_reapply},
            {"enqueuedAt", r.enqueued_at}};
  if (!r.seen.empty()) {
    Json seen = Json::object();
    for (const auto& [key, value] : SeenFields(r.seen)) {
      if (!value->empty()) seen[key] = *value;
    }
    j["seen"] = std::move(seen);
  }
  if (!r.kubeconfig_version.empty()) j["kubeconfigVersion"] = r.kubeconfig_version;
  return j.dump();
}

Result<SyncRequest> DecodeSyncRequest(std::string_view body) {
  auto fail = [](const Status& s) { return InvalidArgument("sync request: " + s.message()); };
  auto parsed = ParseVersionedBody(body, kMaxSyncRequestBytes, kSyncRequestVersion);
  if (!parsed.ok()) return fail(parsed.status());
  const Json& j = *parsed;
  auto c = j.find("cluster");
  if (c == j.end() || !c->is_object()) {
    return InvalidArgument(
        "sync request: field \"cluster\" must be an object with namespace and name");
  }
  SyncRequest r;
  auto ns = RequireString(*c, "namespace", 253);
  if (!ns.ok()) return fail(ns.status().Annotate("cluster"));
  auto name = RequireString(*c, "name", 253);
  if (!name.ok()) return fail(name.status().Annotate("cluster"));
  if (!IsDnsLabel(*ns))
    return InvalidArgument("sync request: cluster.namespace \"" + *ns +
                           "\" is not a valid namespace name");
  if (!IsDnsSubdomain(*name))
    return InvalidArgument("sync request: cluster.name \"" + *name +
                           "\" is not a valid object name");
  r.cluster_namespace = std::move(*ns);
  r.cluster_name = std::move(*name);

  auto revision = RequireString(j, "revision", 128);
  if (!revision.ok()) return fail(revision.status());
  r.revision = std::move(*revision);
  auto lane = RequireString(j, "lane", 16);
  if (!lane.ok()) return fail(lane.status());
  if (*lane == "change")
    r.lane = amqp::Lane::kChange;
  else if (*lane == "resync")
    r.lane = amqp::Lane::kResync;
  else
    return InvalidArgument("sync request: unknown lane \"" + *lane + "\"");
  auto reason = RequireString(j, "reason", 64);
  if (!reason.ok()) return fail(reason.status());
  r.reason = std::move(*reason);
  auto full = j.find("fullReapply");
  if (full != j.end()) {
    if (!full->is_boolean())
      return InvalidArgument("sync request: field \"fullReapply\" must be a boolean");
    r.full_reapply = full->get<bool>();
  }
  auto at = RequireString(j, "enqueuedAt", 64);
  if (!at.ok()) return fail(at.status());
  if (!ParseRfc3339(*at).ok())
    return InvalidArgument("sync request: field \"enqueuedAt\" is not an RFC 3339 time");
  r.enqueued_at = std::move(*at);
  if (auto seen = j.find("seen"); seen != j.end()) {
    if (Status s = DecodeSeen(*seen, r.seen); !s.ok()) return fail(s);
  }
  if (j.contains("kubeconfigVersion")) {
    auto version = RequireString(j, "kubeconfigVersion", 20);
    if (!version.ok()) return fail(version.status());
    if (!kube::ParseResourceVersion(*version)) {
      return InvalidArgument("sync request: kubeconfigVersion \"" + *version +
                             "\" is not a resourceVersion");
    }
    r.kubeconfig_version = std::move(*version);
  }
  return r;
}

amqp::Message ToAmqpMessage(const SyncRequest& request, const std::string& app_id,
                            const std::string& message_id, WallTime now) {
  amqp::Message m;
  m.body = EncodeSyncRequest(request);
  m.content_type = "application/json";
  m.message_id = message_id;
  m.app_id = app_id;
  m.type = "syncbus.sync-request.v1";
  m.timestamp = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  m.persistent = true;
  m.headers = Json{{kClusterHeader, request.ClusterKey()},
                   {kAttemptHeader, 0},
                   {kLaneHeader, amqp::LaneName(request.lane)},
                   {kRevisionHeader, request.revision}};
  return m;
}

}  // namespace syncbus
