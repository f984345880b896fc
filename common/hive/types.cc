#include "common/hive/types.h"

namespace syncbus::hive {
namespace {

// Field readers: absent or null -> default; wrong type -> InvalidArgument naming the path.
Status ReadString(const Json& obj, const char* key, const std::string& path, std::string& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) return InvalidArgument(path + "." + key + ": expected a string");
  out = it->get<std::string>();
  return Status::Ok();
}

Status ReadBool(const Json& obj, const char* key, const std::string& path, bool& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean()) return InvalidArgument(path + "." + key + ": expected a boolean");
  out = it->get<bool>();
  return Status::Ok();
}

Status ReadInt(const Json& obj, const char* key, const std::string& path, int64_t& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_number_integer()) return InvalidArgument(path + "." + key + ": expected an integer");
  out = it->get<int64_t>();
  return Status::Ok();
}

Result<const Json*> ReadArray(const Json& obj, const char* key, const std::string& path) {
  static const Json kEmpty = Json::array();
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return &kEmpty;
  if (!it->is_array()) return InvalidArgument(path + "." + key + ": expected an array");
  return &*it;
}

Result<const Json*> ReadObject(const Json& obj, const char* key, const std::string& path) {
  static const Json kEmpty = Json::object();
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return &kEmpty;
  if (!it->is_object()) return InvalidArgument(path + "." + key + ": expected an object");
  return &*it;
}

Status ReadLabels(const Json& obj, const char* key, const std::string& path, Labels& out) {
  auto m = ReadObject(obj, key, path);
  SYNCBUS_RETURN_IF_ERROR(m);
  for (const auto& [k, v] : (*m)->items()) {
    if (!v.is_string()) return InvalidArgument(path + "." + key + "." + k + ": expected a string");
    out[k] = v.get<std::string>();
  }
  return Status::Ok();
}

Status RequireObject(const Json& j, const std::string& path) {
  return j.is_object() ? Status::Ok() : InvalidArgument(path + ": expected an object");
}

}  // namespace

EmbeddedObject::EmbeddedObject(const Json& object)
    : text_(object.dump(-1, ' ', false, Json::error_handler_t::replace)) {
  if (!object.is_object()) return;
  auto v = object.find("apiVersion");
  if (v != object.end() && v->is_string()) api_version_ = v->get<std::string>();
}

Json EmbeddedObject::Parse() const {
  return Json::parse(text_);
}

namespace {

Result<SyncSetCommonSpec> ParseCommonSpec(const Json& spec, SetResources keep) {
  SyncSetCommonSpec out;
  auto resources = ReadArray(spec, "resources", "spec");
  SYNCBUS_RETURN_IF_ERROR(resources);
  for (size_t i = 0; i < (*resources)->size(); ++i) {
    const Json& r = (**resources)[i];
    if (!r.is_object()) {
      return InvalidArgument("spec.resources[" + std::to_string(i) + "]: expected an object");
    }
    if (keep == SetResources::kKeep) out.resources.emplace_back(r);
  }
  std::string mode;
  SYNCBUS_RETURN_IF_ERROR(ReadString(spec, "resourceApplyMode", "spec", mode));
  out.resource_apply_mode = mode == "Sync" ? ResourceApplyMode::kSync : ResourceApplyMode::kUpsert;

  std::string behavior;
  SYNCBUS_RETURN_IF_ERROR(ReadString(spec, "applyBehavior", "spec", behavior));
  if (behavior == "CreateOnly") {
    out.apply_behavior = ApplyBehavior::kCreateOnly;
  } else if (behavior == "CreateOrUpdate") {
    out.apply_behavior = ApplyBehavior::kCreateOrUpdate;
  } else {
    out.apply_behavior = ApplyBehavior::kApply;  // "", "Apply", and what Hive does not know
  }

  auto patches = ReadArray(spec, "patches", "spec");
  SYNCBUS_RETURN_IF_ERROR(patches);
  for (size_t i = 0; i < (*patches)->size(); ++i) {
    const Json& p = (**patches)[i];
    std::string path = "spec.patches[" + std::to_string(i) + "]";
    SYNCBUS_RETURN_IF_ERROR(RequireObject(p, path));
    SyncObjectPatch patch;
    std::string type;
    SYNCBUS_RETURN_IF_ERROR(ReadString(p, "apiVersion", path, patch.api_version));
    SYNCBUS_RETURN_IF_ERROR(ReadString(p, "kind", path, patch.kind));
    SYNCBUS_RETURN_IF_ERROR(ReadString(p, "name", path, patch.name));
    SYNCBUS_RETURN_IF_ERROR(ReadString(p, "namespace", path, patch.ns));
    SYNCBUS_RETURN_IF_ERROR(ReadString(p, "patch", path, patch.patch));
    SYNCBUS_RETURN_IF_ERROR(ReadString(p, "patchType", path, type));
    patch.patch_type_text = type;
    if (type.empty() || type == "strategic") {
      patch.patch_type = PatchType::kStrategic;
    } else if (type == "merge") {
      patch.patch_type = PatchType::kMerge;
    } else if (type == "json") {
      patch.patch_type = PatchType::kJson;
    } else {
      patch.patch_type = PatchType::kInvalid;  // that patch fails when the set reaches it
    }
    out.patches.push_back(std::move(patch));
  }

  auto mappings = ReadArray(spec, "secretMappings", "spec");
  SYNCBUS_RETURN_IF_ERROR(mappings);
  for (size_t i = 0; i < (*mappings)->size(); ++i) {
    const Json& m = (**mappings)[i];
    std::string path = "spec.secretMappings[" + std::to_string(i) + "]";
    SYNCBUS_RETURN_IF_ERROR(RequireObject(m, path));
    SecretMapping mapping;
    auto src = ReadObject(m, "sourceRef", path);
    SYNCBUS_RETURN_IF_ERROR(src);
    auto dst = ReadObject(m, "targetRef", path);
    SYNCBUS_RETURN_IF_ERROR(dst);
    SYNCBUS_RETURN_IF_ERROR(ReadString(**src, "name", path + ".sourceRef", mapping.source.name));
    SYNCBUS_RETURN_IF_ERROR(ReadString(**src, "namespace", path + ".sourceRef", mapping.source.ns));
    SYNCBUS_RETURN_IF_ERROR(ReadString(**dst, "name", path + ".targetRef", mapping.target.name));
    SYNCBUS_RETURN_IF_ERROR(ReadString(**dst, "namespace", path + ".targetRef", mapping.target.ns));
    out.secret_mappings.push_back(std::move(mapping));
  }
  SYNCBUS_RETURN_IF_ERROR(
      ReadBool(spec, "enableResourceTemplates", "spec", out.enable_resource_templates));
  SYNCBUS_RETURN_IF_ERROR(
      ReadBool(spec, "enablePatchTemplates", "spec", out.enable_patch_templates));
  return out;
}

template <typename T>
Status ParseList(const Json& parent, const char* key, const std::string& path,
                 std::vector<T>& out) {
  auto arr = ReadArray(parent, key, path);
  SYNCBUS_RETURN_IF_ERROR(arr);
  for (size_t i = 0; i < (*arr)->size(); ++i) {
    auto item = T::FromJson((**arr)[i]);
    if (!item.ok()) {
      return item.status().Annotate(path + "." + key + "[" + std::to_string(i) + "]");
    }
    out.push_back(std::move(*item));
  }
  return Status::Ok();
}

}  // namespace

const char* SyncResultName(SyncResult r) {
  return r == SyncResult::kSuccess ? "Success" : "Failure";
}

std::optional<bool> ParseGoBool(const std::string& text) {
  for (const char* t : {"1", "t", "T", "TRUE", "true", "True"}) {
    if (text == t) return true;
  }
  for (const char* f : {"0", "f", "F", "FALSE", "false", "False"}) {
    if (text == f) return false;
  }
  return std::nullopt;
}

Result<ObjectMeta> ObjectMeta::FromJson(const Json& object) {
  if (!object.is_object()) return InvalidArgument("object: expected a JSON object");
  auto meta = ReadObject(object, "metadata", "");
  SYNCBUS_RETURN_IF_ERROR(meta);
  const Json& m = **meta;
  ObjectMeta out;
  SYNCBUS_RETURN_IF_ERROR(ReadString(m, "name", "metadata", out.name));
  SYNCBUS_RETURN_IF_ERROR(ReadString(m, "namespace", "metadata", out.ns));
  SYNCBUS_RETURN_IF_ERROR(ReadString(m, "uid", "metadata", out.uid));
  SYNCBUS_RETURN_IF_ERROR(ReadString(m, "resourceVersion", "metadata", out.resource_version));
  SYNCBUS_RETURN_IF_ERROR(ReadInt(m, "generation", "metadata", out.generation));
  SYNCBUS_RETURN_IF_ERROR(ReadString(m, "creationTimestamp", "metadata", out.creation_timestamp));
  SYNCBUS_RETURN_IF_ERROR(ReadLabels(m, "labels", "metadata", out.labels));
  SYNCBUS_RETURN_IF_ERROR(ReadLabels(m, "annotations", "metadata", out.annotations));
  auto del = m.find("deletionTimestamp");
  out.deleting = del != m.end() && !del->is_null();
  if (out.name.empty()) return InvalidArgument("metadata.name: required");
  return out;
}

Result<SyncSet> SyncSet::FromJson(const Json& object, SetResources resources) {
  auto meta = ObjectMeta::FromJson(object);
  SYNCBUS_RETURN_IF_ERROR(meta);
  auto spec_obj = ReadObject(object, "spec", "");
  SYNCBUS_RETURN_IF_ERROR(spec_obj);
  auto spec = ParseCommonSpec(**spec_obj, resources);
  if (!spec.ok()) return spec.status().Annotate("SyncSet " + meta->Key());
  SyncSet out{std::move(*meta), std::move(*spec), {}};
  auto refs = ReadArray(**spec_obj, "clusterDeploymentRefs", "spec");
  SYNCBUS_RETURN_IF_ERROR(refs);
  for (size_t i = 0; i < (*refs)->size(); ++i) {
    const Json& r = (**refs)[i];
    std::string name;
    std::string path = "spec.clusterDeploymentRefs[" + std::to_string(i) + "]";
    SYNCBUS_RETURN_IF_ERROR(RequireObject(r, path));
    SYNCBUS_RETURN_IF_ERROR(ReadString(r, "name", path, name));
    out.cluster_deployment_refs.push_back(std::move(name));
  }
  return out;
}

Result<SelectorSyncSet> SelectorSyncSet::FromJson(const Json& object, SetResources resources) {
  auto meta = ObjectMeta::FromJson(object);
  SYNCBUS_RETURN_IF_ERROR(meta);
  auto spec_obj = ReadObject(object, "spec", "");
  SYNCBUS_RETURN_IF_ERROR(spec_obj);
  auto spec = ParseCommonSpec(**spec_obj, resources);
  if (!spec.ok()) return spec.status().Annotate("SelectorSyncSet " + meta->Key());
  auto sel_obj = ReadObject(**spec_obj, "clusterDeploymentSelector", "spec");
  SYNCBUS_RETURN_IF_ERROR(sel_obj);
  auto selector = LabelSelector::FromJson(**sel_obj);
  if (!selector.ok()) {
    return selector.status().Annotate("SelectorSyncSet " + meta->Key() +
                                      " spec.clusterDeploymentSelector");
  }
  return SelectorSyncSet{std::move(*meta), std::move(*spec), std::move(*selector)};
}

Result<Condition> Condition::FromJson(const Json& c) {
  SYNCBUS_RETURN_IF_ERROR(RequireObject(c, "condition"));
  Condition out;
  SYNCBUS_RETURN_IF_ERROR(ReadString(c, "type", "condition", out.type));
  SYNCBUS_RETURN_IF_ERROR(ReadString(c, "status", "condition", out.status));
  SYNCBUS_RETURN_IF_ERROR(ReadString(c, "reason", "condition", out.reason));
  SYNCBUS_RETURN_IF_ERROR(ReadString(c, "message", "condition", out.message));
  SYNCBUS_RETURN_IF_ERROR(
      ReadString(c, "lastTransitionTime", "condition", out.last_transition_time));
  SYNCBUS_RETURN_IF_ERROR(ReadString(c, "lastProbeTime", "condition", out.last_probe_time));
  return out;
}

Json Condition::ToJson() const {
  Json j = {{"type", type}, {"status", status}};
  if (!reason.empty()) j["reason"] = reason;
  if (!message.empty()) j["message"] = message;
  if (!last_transition_time.empty()) j["lastTransitionTime"] = last_transition_time;
  if (!last_probe_time.empty()) j["lastProbeTime"] = last_probe_time;
  return j;
}

Result<ClusterDeployment> ClusterDeployment::FromJson(const Json& object) {
  auto meta = ObjectMeta::FromJson(object);
  SYNCBUS_RETURN_IF_ERROR(meta);
  ClusterDeployment out;
  out.meta = std::move(*meta);
  auto spec = ReadObject(object, "spec", "");
  SYNCBUS_RETURN_IF_ERROR(spec);
  SYNCBUS_RETURN_IF_ERROR(ReadBool(**spec, "installed", "spec", out.installed));
  auto cm = ReadObject(**spec, "clusterMetadata", "spec");
  SYNCBUS_RETURN_IF_ERROR(cm);
  auto ref = ReadObject(**cm, "adminKubeconfigSecretRef", "spec.clusterMetadata");
  SYNCBUS_RETURN_IF_ERROR(ref);
  SYNCBUS_RETURN_IF_ERROR(ReadString(**ref, "name", "spec.clusterMetadata.adminKubeconfigSecretRef",
                                     out.admin_kubeconfig_secret));
  auto cp = ReadObject(**spec, "controlPlaneConfig", "spec");
  SYNCBUS_RETURN_IF_ERROR(cp);
  SYNCBUS_RETURN_IF_ERROR(
      ReadString(**cp, "apiURLOverride", "spec.controlPlaneConfig", out.api_url_override));
  SYNCBUS_RETURN_IF_ERROR(ReadString(**cp, "apiServerIPOverride", "spec.controlPlaneConfig",
                                     out.api_server_ip_override));
  auto status = ReadObject(object, "status", "");
  SYNCBUS_RETURN_IF_ERROR(status);
  SYNCBUS_RETURN_IF_ERROR(ParseList(**status, "conditions", "status", out.conditions));
  SYNCBUS_RETURN_IF_ERROR(
      ReadString(**status, "installedTimestamp", "status", out.installed_timestamp));
  return out;
}

const Condition* ClusterDeployment::FindCondition(const std::string& type) const {
  for (const auto& c : conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

namespace {

bool TrueAnnotation(const Labels& annotations, const char* key) {
  auto it = annotations.find(key);
  return it != annotations.end() && ParseGoBool(it->second).value_or(false);
}

}  // namespace

bool ClusterDeployment::paused() const {
  return TrueAnnotation(meta.annotations, kSyncSetPauseAnnotation);
}

bool ClusterDeployment::reconcile_paused() const {
  return TrueAnnotation(meta.annotations, kReconcilePauseAnnotation);
}

bool ClusterDeployment::relocating() const {
  return meta.annotations.count(kRelocateAnnotation) > 0;
}

bool ClusterDeployment::fake() const {
  return TrueAnnotation(meta.annotations, kFakeClusterAnnotation);
}

bool ClusterDeployment::unreachable() const {
  const Condition* c = FindCondition("Unreachable");
  return c == nullptr || c->status == "True" || c->status == "Unknown";
}

std::string ClusterDeployment::ActiveApiUrl() const {
  if (api_url_override.empty()) return {};
  const Condition* active = FindCondition("ActiveAPIURLOverride");
  return active != nullptr && active->status == "True" ? api_url_override : std::string();
}

std::string ClusterDeployment::SkipReason() const {
  if (paused()) return "paused";
  if (reconcile_paused()) return "reconcile-paused";
  if (relocating()) return "relocating";
  if (meta.deleting) return "deleting";
  if (!installed) return "not-installed";
  if (unreachable()) return "unreachable";
  return {};
}

Json SyncResourceReference::ToJson() const {
  Json j = {{"apiVersion", api_version}, {"name", name}};
  if (!kind.empty()) j["kind"] = kind;
  if (!ns.empty()) j["namespace"] = ns;
  return j;
}

Result<SyncResourceReference> SyncResourceReference::FromJson(const Json& j) {
  SYNCBUS_RETURN_IF_ERROR(RequireObject(j, "resource"));
  SyncResourceReference out;
  SYNCBUS_RETURN_IF_ERROR(ReadString(j, "apiVersion", "resource", out.api_version));
  SYNCBUS_RETURN_IF_ERROR(ReadString(j, "kind", "resource", out.kind));
  SYNCBUS_RETURN_IF_ERROR(ReadString(j, "name", "resource", out.name));
  SYNCBUS_RETURN_IF_ERROR(ReadString(j, "namespace", "resource", out.ns));
  return out;
}

Json SyncStatus::ToJson() const {
  Json j = {{"name", name},
            {"observedGeneration", observed_generation},
            {"result", SyncResultName(result)},
            {"lastTransitionTime", last_transition_time}};
  if (!resources_to_delete.empty()) {
    Json arr = Json::array();
    for (const auto& r : resources_to_delete) arr.push_back(r.ToJson());
    j["resourcesToDelete"] = std::move(arr);
  }
  if (!failure_message.empty()) j["failureMessage"] = failure_message;
  if (!first_success_time.empty()) j["firstSuccessTime"] = first_success_time;
  return j;
}

Result<SyncStatus> SyncStatus::FromJson(const Json& j) {
  SYNCBUS_RETURN_IF_ERROR(RequireObject(j, "entry"));
  SyncStatus out;
  std::string result;
  SYNCBUS_RETURN_IF_ERROR(ReadString(j, "name", "entry", out.name));
  SYNCBUS_RETURN_IF_ERROR(ReadInt(j, "observedGeneration", "entry", out.observed_generation));
  SYNCBUS_RETURN_IF_ERROR(ReadString(j, "result", "entry", result));
  SYNCBUS_RETURN_IF_ERROR(ReadString(j, "failureMessage", "entry", out.failure_message));
  SYNCBUS_RETURN_IF_ERROR(ReadString(j, "lastTransitionTime", "entry", out.last_transition_time));
  SYNCBUS_RETURN_IF_ERROR(ReadString(j, "firstSuccessTime", "entry", out.first_success_time));
  SYNCBUS_RETURN_IF_ERROR(ParseList(j, "resourcesToDelete", "entry", out.resources_to_delete));
  out.result = result == "Success" ? SyncResult::kSuccess : SyncResult::kFailure;
  return out;
}

Json ClusterSyncStatus::ToJson() const {
  Json j = Json::object();
  auto list = [](const std::vector<SyncStatus>& v) {
    Json arr = Json::array();
    for (const auto& s : v) arr.push_back(s.ToJson());
    return arr;
  };
  if (!sync_sets.empty()) j["syncSets"] = list(sync_sets);
  if (!selector_sync_sets.empty()) j["selectorSyncSets"] = list(selector_sync_sets);
  if (!conditions.empty()) {
    Json arr = Json::array();
    for (const auto& c : conditions) arr.push_back(c.ToJson());
    j["conditions"] = std::move(arr);
  }
  if (!first_success_time.empty()) j["firstSuccessTime"] = first_success_time;
  if (controlled_by_replica) j["controlledByReplica"] = *controlled_by_replica;
  return j;
}

Result<ClusterSyncStatus> ClusterSyncStatus::FromJson(const Json& status) {
  ClusterSyncStatus out;
  if (status.is_null()) return out;
  SYNCBUS_RETURN_IF_ERROR(RequireObject(status, "status"));
  SYNCBUS_RETURN_IF_ERROR(ParseList(status, "syncSets", "status", out.sync_sets));
  SYNCBUS_RETURN_IF_ERROR(ParseList(status, "selectorSyncSets", "status", out.selector_sync_sets));
  SYNCBUS_RETURN_IF_ERROR(ParseList(status, "conditions", "status", out.conditions));
  SYNCBUS_RETURN_IF_ERROR(ReadString(status, "firstSuccessTime", "status", out.first_success_time));
  if (status.contains("controlledByReplica") && !status["controlledByReplica"].is_null()) {
    int64_t replica = 0;
    SYNCBUS_RETURN_IF_ERROR(ReadInt(status, "controlledByReplica", "status", replica));
    out.controlled_by_replica = replica;
  }
  return out;
}

Result<ClusterSync> ClusterSync::FromJson(const Json& object) {
  auto meta = ObjectMeta::FromJson(object);
  SYNCBUS_RETURN_IF_ERROR(meta);
  auto status = ClusterSyncStatus::FromJson(object.contains("status") ? object["status"] : Json());
  if (!status.ok()) return status.status().Annotate("ClusterSync " + meta->Key());
  return ClusterSync{std::move(*meta), std::move(*status)};
}

Result<ClusterSyncLease> ClusterSyncLease::FromJson(const Json& object) {
  auto meta = ObjectMeta::FromJson(object);
  SYNCBUS_RETURN_IF_ERROR(meta);
  ClusterSyncLease out{std::move(*meta), {}};
  auto spec = ReadObject(object, "spec", "");
  SYNCBUS_RETURN_IF_ERROR(spec);
  SYNCBUS_RETURN_IF_ERROR(ReadString(**spec, "renewTime", "spec", out.renew_time));  // null: ""
  return out;
}

}  // namespace syncbus::hive
