#include "tests/kubesim/builtin_types.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "common/base64.h"
#include "tests/kubesim/names.h"

namespace syncbus::kubesim {
namespace {

// --- schemas -----------------------------------------------------------------------------------

constexpr char kObjectMeta[] = R"json({
  "type": "object",
  "properties": {
    "name": {"type": "string"}, "generateName": {"type": "string"},
    "namespace": {"type": "string"}, "selfLink": {"type": "string"},
    "uid": {"type": "string"}, "resourceVersion": {"type": "string"},
    "generation": {"type": "integer"},
    "creationTimestamp": {"type": "string"}, "deletionTimestamp": {"type": "string"},
    "deletionGracePeriodSeconds": {"type": "integer"},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    "finalizers": {"type": "array", "items": {"type": "string"},
                   "x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"},
    "ownerReferences": {"type": "array",
      "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["uid"],
      "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "uid",
      "items": {"type": "object", "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"},
        "name": {"type": "string"}, "uid": {"type": "string"},
        "controller": {"type": "boolean"}, "blockOwnerDeletion": {"type": "boolean"}}}},
    "managedFields": {"type": "array",
      "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
  }})json";

constexpr char kStringMap[] =
    R"json({"type": "object", "additionalProperties": {"type": "string"}})json";

constexpr char kContainer[] = R"json({
  "type": "object", "x-kubernetes-preserve-unknown-fields": true,
  "properties": {
    "name": {"type": "string"}, "image": {"type": "string"},
    "command": {"type": "array", "items": {"type": "string"}},
    "args": {"type": "array", "items": {"type": "string"}},
    "workingDir": {"type": "string"}, "imagePullPolicy": {"type": "string"},
    "terminationMessagePath": {"type": "string"}, "terminationMessagePolicy": {"type": "string"},
    "env": {"type": "array", "x-kubernetes-patch-strategy": "merge",
            "x-kubernetes-patch-merge-key": "name",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                      "properties": {"name": {"type": "string"}, "value": {"type": "string"}}}},
    "ports": {"type": "array", "x-kubernetes-patch-strategy": "merge",
              "x-kubernetes-patch-merge-key": "containerPort",
              "x-kubernetes-list-type": "map",
              "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
              "items": {"type": "object", "properties": {
                "containerPort": {"type": "integer"},
                "protocol": {"type": "string", "default": "TCP"},
                "name": {"type": "string"}, "hostPort": {"type": "integer"},
                "hostIP": {"type": "string"}}}},
    "volumeMounts": {"type": "array", "x-kubernetes-patch-strategy": "merge",
                     "x-kubernetes-patch-merge-key": "mountPath",
                     "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                               "properties": {"mountPath": {"type": "string"},
                                              "name": {"type": "string"}}}},
    "resources": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
  }})json";

Json ParseSchema(const char* text) {
  return Json::parse(text);
}

Json WithMeta(Json root) {
  root["properties"]["metadata"] = ObjectMetaSchema();
  root["properties"]["apiVersion"] = {{"type", "string"}};
  root["properties"]["kind"] = {{"type", "string"}};
  return root;
}

Json ConfigMapSchema() {
  return WithMeta({{"type", "object"},
                   {"properties",
                    {{"data", ParseSchema(kStringMap)},
                     {"binaryData", ParseSchema(kStringMap)},
                     {"immutable", {{"type", "boolean"}}}}}});
}

Json SecretSchema() {
  return WithMeta({{"type", "object"},
                   {"properties",
                    {{"data", ParseSchema(kStringMap)},
                     {"stringData", ParseSchema(kStringMap)},
                     {"type", {{"type", "string"}}},
                     {"immutable", {{"type", "boolean"}}}}}});
}

Json NamespaceSchema() {
  Json spec = {
      {"type", "object"},
      {"properties", {{"finalizers", {{"type", "array"}, {"items", {{"type", "string"}}}}}}}};
  Json status = {{"type", "object"},
                 {"x-kubernetes-preserve-unknown-fields", true},
                 {"properties", {{"phase", {{"type", "string"}}}}}};
  return WithMeta({{"type", "object"}, {"properties", {{"spec", spec}, {"status", status}}}});
}

Json NamedRefList() {
  return {{"type", "array"},
          {"x-kubernetes-patch-strategy", "merge"},
          {"x-kubernetes-patch-merge-key", "name"},
          {"items",
           {{"type", "object"},
            {"x-kubernetes-preserve-unknown-fields", true},
            {"properties", {{"name", {{"type", "string"}}}}}}}};
}

Json ServiceAccountSchema() {
  return WithMeta({{"type", "object"},
                   {"properties",
                    {{"secrets", NamedRefList()},
                     {"imagePullSecrets", NamedRefList()},
                     {"automountServiceAccountToken", {{"type", "boolean"}}}}}});
}

Json ServiceSchema() {
  Json port = {{"type", "object"},
               {"properties",
                {{"name", {{"type", "string"}}},
                 {"protocol", {{"type", "string"}, {"default", "TCP"}}},
                 {"appProtocol", {{"type", "string"}}},
                 {"port", {{"type", "integer"}}},
                 {"targetPort", {{"x-kubernetes-int-or-string", true}}},
                 {"nodePort", {{"type", "integer"}}}}}};
  Json spec = {{"type", "object"},
               {"x-kubernetes-preserve-unknown-fields", true},
               {"properties",
                {{"ports",
                  {{"type", "array"},
                   {"x-kubernetes-patch-strategy", "merge"},
                   {"x-kubernetes-patch-merge-key", "port"},
                   {"x-kubernetes-list-type", "map"},
                   {"x-kubernetes-list-map-keys", {"port", "protocol"}},
                   {"items", port}}},
                 {"selector", ParseSchema(kStringMap)},
                 {"clusterIP", {{"type", "string"}}},
                 {"clusterIPs", {{"type", "array"}, {"items", {{"type", "string"}}}}},
                 {"type", {{"type", "string"}}},
                 {"sessionAffinity", {{"type", "string"}}},
                 {"externalName", {{"type", "string"}}},
                 {"ipFamilies", {{"type", "array"}, {"items", {{"type", "string"}}}}},
                 {"ipFamilyPolicy", {{"type", "string"}}},
                 {"internalTrafficPolicy", {{"type", "string"}}}}}};
  Json status = {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}};
  return WithMeta({{"type", "object"}, {"properties", {{"spec", spec}, {"status", status}}}});
}

Json LeaseSchema() {
  Json spec = {{"type", "object"},
               {"properties",
                {{"holderIdentity", {{"type", "string"}}},
                 {"leaseDurationSeconds", {{"type", "integer"}}},
                 {"acquireTime", {{"type", "string"}, {"format", "date-time"}}},
                 {"renewTime", {{"type", "string"}, {"format", "date-time"}}},
                 {"leaseTransitions", {{"type", "integer"}}}}}};
  return WithMeta({{"type", "object"}, {"properties", {{"spec", spec}}}});
}

// core/v1 Event (the legacy form kubectl describe lists; events.k8s.io/v1 is another view of it).
Json EventSchema() {
  Json str = {{"type", "string"}};
  Json time = {{"type", "string"}, {"format", "date-time"}};
  Json reference = {{"type", "object"},
                    {"properties",
                     {{"kind", str},
                      {"namespace", str},
                      {"name", str},
                      {"uid", str},
                      {"apiVersion", str},
                      {"resourceVersion", str},
                      {"fieldPath", str}}}};
  return WithMeta(
      {{"type", "object"},
       {"properties",
        {{"involvedObject", reference},
         {"related", reference},
         {"reason", str},
         {"message", str},
         {"source", {{"type", "object"}, {"properties", {{"component", str}, {"host", str}}}}},
         {"firstTimestamp", time},
         {"lastTimestamp", time},
         {"count", {{"type", "integer"}}},
         {"type", str},
         {"eventTime", time},
         {"series", {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}},
         {"action", str},
         {"reportingComponent", str},
         {"reportingInstance", str}}}});
}

Json DeploymentSchema() {
  Json containers = {{"type", "array"},
                     {"x-kubernetes-patch-strategy", "merge"},
                     {"x-kubernetes-patch-merge-key", "name"},
                     {"items", ParseSchema(kContainer)}};
  Json pod_spec = {{"type", "object"},
                   {"x-kubernetes-preserve-unknown-fields", true},
                   {"properties",
                    {{"containers", containers},
                     {"initContainers", containers},
                     {"volumes",
                      {{"type", "array"},
                       {"x-kubernetes-patch-strategy", "merge,retainKeys"},
                       {"x-kubernetes-patch-merge-key", "name"},
                       {"items",
                        {{"type", "object"},
                         {"x-kubernetes-preserve-unknown-fields", true},
                         {"properties", {{"name", {{"type", "string"}}}}}}}}},
                     {"imagePullSecrets", NamedRefList()},
                     {"nodeSelector", ParseSchema(kStringMap)},
                     {"restartPolicy", {{"type", "string"}}},
                     {"dnsPolicy", {{"type", "string"}}},
                     {"schedulerName", {{"type", "string"}}},
                     {"serviceAccountName", {{"type", "string"}}},
                     {"terminationGracePeriodSeconds", {{"type", "integer"}}},
                     {"securityContext",
                      {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}}};
  Json selector = {
      {"type", "object"},
      {"x-kubernetes-map-type", "atomic"},
      {"properties",
       {{"matchLabels", ParseSchema(kStringMap)},
        {"matchExpressions",
         {{"type", "array"},
          {"items", {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}}}}};
  Json spec = {{"type", "object"},
               {"properties",
                {{"replicas", {{"type", "integer"}}},
                 {"selector", selector},
                 {"template",
                  {{"type", "object"},
                   {"properties", {{"metadata", ObjectMetaSchema()}, {"spec", pod_spec}}}}},
                 {"strategy",
                  {{"type", "object"},
                   {"properties",
                    {{"type", {{"type", "string"}}},
                     {"rollingUpdate",
                      {{"type", "object"},
                       {"properties",
                        {{"maxSurge", {{"x-kubernetes-int-or-string", true}}},
                         {"maxUnavailable", {{"x-kubernetes-int-or-string", true}}}}}}}}}}},
                 {"minReadySeconds", {{"type", "integer"}}},
                 {"revisionHistoryLimit", {{"type", "integer"}}},
                 {"paused", {{"type", "boolean"}}},
                 {"progressDeadlineSeconds", {{"type", "integer"}}}}}};
  Json status = {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}};
  return WithMeta({{"type", "object"}, {"properties", {{"spec", spec}, {"status", status}}}});
}

Json RulesSchema() {
  Json strings = {{"type", "array"}, {"items", {{"type", "string"}}}};
  return {{"type", "array"},
          {"items",
           {{"type", "object"},
            {"properties",
             {{"apiGroups", strings},
              {"resources", strings},
              {"verbs", strings},
              {"resourceNames", strings},
              {"nonResourceURLs", strings}}}}}};
}

Json RoleSchema(bool cluster) {
  Json props = {{"rules", RulesSchema()}};
  if (cluster) {
    props["aggregationRule"] = {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}};
  }
  return WithMeta({{"type", "object"}, {"properties", props}});
}

Json BindingSchema() {
  Json subject = {{"type", "object"},
                  {"properties",
                   {{"kind", {{"type", "string"}}},
                    {"apiGroup", {{"type", "string"}}},
                    {"name", {{"type", "string"}}},
                    {"namespace", {{"type", "string"}}}}}};
  Json role_ref = {{"type", "object"},
                   {"properties",
                    {{"apiGroup", {{"type", "string"}}},
                     {"kind", {{"type", "string"}}},
                     {"name", {{"type", "string"}}}}}};
  return WithMeta(
      {{"type", "object"},
       {"properties",
        {{"subjects", {{"type", "array"}, {"items", subject}}}, {"roleRef", role_ref}}}});
}

Json CrdSchema() {
  Json open = {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}};
  return WithMeta({{"type", "object"}, {"properties", {{"spec", open}, {"status", open}}}});
}

// --- helpers -----------------------------------------------------------------------------------

const Json* Get(const Json& obj, std::initializer_list<const char*> path) {
  const Json* cur = &obj;
  for (const char* key : path) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(key);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

std::string Str(const Json& obj, std::initializer_list<const char*> path) {
  const Json* v = Get(obj, path);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

void SetIfAbsent(Json& obj, const char* key, Json value) {
  if (!obj.contains(key) || obj[key].is_null()) obj[key] = std::move(value);
}

size_t DataSize(const Json* map) {
  size_t total = 0;
  if (map == nullptr || !map->is_object()) return 0;
  for (const auto& [k, v] : map->items()) {
    total += k.size() + (v.is_string() ? v.get_ref<const std::string&>().size() : 0);
  }
  return total;
}

void ValidateDataKeys(const Json* map, const std::string& field, std::vector<FieldError>* errors) {
  if (map == nullptr || !map->is_object()) return;
  for (const auto& [k, v] : map->items()) {
    for (const auto& m : IsConfigMapKey(k)) errors->push_back(Invalid(field + "[" + k + "]", k, m));
  }
}

void ValidateImmutableData(const Json& obj, const Json* old, std::vector<FieldError>* errors) {
  if (old == nullptr) return;
  const Json* was = Get(*old, {"immutable"});
  if (was == nullptr || !was->is_boolean() || !was->get<bool>()) return;
  const Json* now = Get(obj, {"immutable"});
  if (now == nullptr || !now->is_boolean() || !now->get<bool>()) {
    errors->push_back(Forbidden("immutable", "field is immutable when `immutable` is set"));
  }
  for (const char* field : {"data", "binaryData"}) {
    const Json* a = Get(obj, {field});
    const Json* b = Get(*old, {field});
    Json av = a != nullptr ? *a : Json::object();
    Json bv = b != nullptr ? *b : Json::object();
    if (av != bv) {
      errors->push_back(Forbidden(field, "field is immutable when `immutable` is set"));
    }
  }
}

// --- ConfigMap ---------------------------------------------------------------------------------

std::string NormalizeConfigMap(Json& obj) {
  const Json* binary = Get(obj, {"binaryData"});
  if (binary != nullptr && binary->is_object()) {
    for (const auto& [k, v] : binary->items()) {
      if (v.is_string() && !DecodeBase64(v.get<std::string>(), kGoStdBase64)) {
        return "illegal base64 data at input byte 0";
      }
    }
  }
  return "";
}

void ValidateConfigMap(const Json& obj, const Json* old, std::vector<FieldError>* errors) {
  const Json* data = Get(obj, {"data"});
  const Json* binary = Get(obj, {"binaryData"});
  ValidateDataKeys(data, "data", errors);
  ValidateDataKeys(binary, "binaryData", errors);
  if (data != nullptr && binary != nullptr && data->is_object() && binary->is_object()) {
    for (const auto& [k, v] : binary->items()) {
      if (data->contains(k)) {
        errors->push_back(Invalid("data[" + k + "]", k, "duplicate of key present in binaryData"));
      }
    }
  }
  if (DataSize(data) + DataSize(binary) > 1024 * 1024) {
    errors->push_back(
        {FieldError::Type::kTooLong, "", nullptr, "must have at most 1048576 bytes", {}});
  }
  ValidateImmutableData(obj, old, errors);
}

// --- Secret ------------------------------------------------------------------------------------

std::string NormalizeSecret(Json& obj) {
  const Json* data = Get(obj, {"data"});
  if (data != nullptr && data->is_object()) {
    for (const auto& [k, v] : data->items()) {
      if (!v.is_string()) continue;
      const std::string& text = v.get_ref<const std::string&>();
      if (!DecodeBase64(text, kGoStdBase64)) {
        size_t bad = 0;
        while (bad < text.size() && (std::isalnum(static_cast<unsigned char>(text[bad])) ||
                                     text[bad] == '+' || text[bad] == '/')) {
          ++bad;
        }
        return "illegal base64 data at input byte " + std::to_string(bad);
      }
    }
  }
  auto string_data = obj.find("stringData");
  if (string_data != obj.end()) {
    if (string_data->is_object()) {
      for (const auto& [k, v] : string_data->items()) {
        if (v.is_string()) obj["data"][k] = EncodeBase64(v.get<std::string>());
      }
    }
    obj.erase("stringData");
  }
  return "";
}

void DefaultSecret(Json& obj, const Json*) {
  SetIfAbsent(obj, "type", "Opaque");
}

void ValidateSecret(const Json& obj, const Json* old, std::vector<FieldError>* errors) {
  const Json* data = Get(obj, {"data"});
  ValidateDataKeys(data, "data", errors);
  size_t total = 0;
  if (data != nullptr && data->is_object()) {
    for (const auto& [k, v] : data->items()) {
      if (!v.is_string()) continue;
      if (auto decoded = DecodeBase64(v.get<std::string>(), kGoStdBase64)) total += decoded->size();
    }
  }
  if (total > 1024 * 1024) {
    errors->push_back(
        {FieldError::Type::kTooLong, "data", nullptr, "must have at most 1048576 bytes", {}});
  }
  std::string type = Str(obj, {"type"});
  auto require_key = [&](const char* key) {
    if (data == nullptr || !data->is_object() || !data->contains(key)) {
      errors->push_back(Required(std::string("data[") + key + "]"));
    }
  };
  if (type == "kubernetes.io/tls") {
    require_key("tls.crt");
    require_key("tls.key");
  } else if (type == "kubernetes.io/dockerconfigjson") {
    require_key(".dockerconfigjson");
  } else if (type == "kubernetes.io/service-account-token") {
    const Json* sa = Get(obj, {"metadata", "annotations", "kubernetes.io/service-account.name"});
    if (sa == nullptr) {
      errors->push_back(Required("metadata.annotations[kubernetes.io/service-account.name]"));
    }
  }
  if (old != nullptr && Str(*old, {"type"}) != type) {
    errors->push_back(Invalid("type", type, "field is immutable"));
  }
  ValidateImmutableData(obj, old, errors);
}

// --- Namespace ---------------------------------------------------------------------------------

void DefaultNamespace(Json& obj, const Json* old) {
  std::string name = Str(obj, {"metadata", "name"});
  if (!name.empty()) obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
  if (old != nullptr) {
    const Json* finalizers = Get(*old, {"spec", "finalizers"});
    if (finalizers != nullptr) obj["spec"]["finalizers"] = *finalizers;
  }
}

void PrepareNamespace(Json& obj) {
  obj["spec"]["finalizers"] = Json::array({"kubernetes"});
  obj["status"] = {{"phase", "Active"}};
}

// --- Service -----------------------------------------------------------------------------------

std::string AllocateClusterIp(const Json& obj) {
  size_t h = std::hash<std::string>{}(Str(obj, {"metadata", "uid"}));
  int a = static_cast<int>((h >> 8) % 256);
  int b = static_cast<int>(h % 254) + 1;
  return "10.96." + std::to_string(a) + "." + std::to_string(b);
}

void DefaultService(Json& obj, const Json* old) {
  Json& spec = obj["spec"];
  if (!spec.is_object()) spec = Json::object();
  SetIfAbsent(spec, "type", "ClusterIP");
  SetIfAbsent(spec, "sessionAffinity", "None");
  std::string type = spec["type"].is_string() ? spec["type"].get<std::string>() : "";
  if (spec.contains("ports") && spec["ports"].is_array()) {
    for (auto& port : spec["ports"]) {
      if (!port.is_object()) continue;
      SetIfAbsent(port, "protocol", "TCP");
      if (port.contains("port")) SetIfAbsent(port, "targetPort", port["port"]);
    }
  }
  if (type != "ExternalName") SetIfAbsent(spec, "internalTrafficPolicy", "Cluster");
  if (type == "ExternalName" || old == nullptr) return;
  for (const char* key : {"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"}) {
    const Json* kept = Get(*old, {"spec", key});
    if (kept != nullptr && !spec.contains(key)) spec[key] = *kept;
  }
}

void PrepareService(Json& obj) {
  Json& spec = obj["spec"];
  if (Str(obj, {"spec", "type"}) != "ExternalName") {
    if (!spec.contains("clusterIP") || spec["clusterIP"] == "") {
      spec["clusterIP"] = AllocateClusterIp(obj);
    }
    SetIfAbsent(spec, "clusterIPs", Json::array({spec["clusterIP"]}));
    SetIfAbsent(spec, "ipFamilies", Json::array({"IPv4"}));
    SetIfAbsent(spec, "ipFamilyPolicy", "SingleStack");
  }
  obj["status"] = {{"loadBalancer", Json::object()}};
}

void ValidateService(const Json& obj, const Json* old, std::vector<FieldError>* errors) {
  std::string type = Str(obj, {"spec", "type"});
  static const std::vector<std::string> kTypes = {"ClusterIP", "NodePort", "LoadBalancer",
                                                  "ExternalName"};
  if (std::find(kTypes.begin(), kTypes.end(), type) == kTypes.end()) {
    errors->push_back(NotSupported("spec.type", type, kTypes));
  }
  const Json* ports = Get(obj, {"spec", "ports"});
  bool headless = Str(obj, {"spec", "clusterIP"}) == "None";
  if ((ports == nullptr || !ports->is_array() || ports->empty()) && type != "ExternalName" &&
      !headless) {
    errors->push_back(Required("spec.ports"));
  }
  if (ports != nullptr && ports->is_array()) {
    for (size_t i = 0; i < ports->size(); ++i) {
      const Json& p = (*ports)[i];
      std::string path = "spec.ports[" + std::to_string(i) + "]";
      const Json* port = Get(p, {"port"});
      long long n = port != nullptr && port->is_number_integer() ? port->get<long long>() : 0;
      if (n < 1 || n > 65535) {
        errors->push_back(Invalid(path + ".port", n, "must be between 1 and 65535, inclusive"));
      }
      if (ports->size() > 1 && Str(p, {"name"}).empty()) {
        errors->push_back(Required(path + ".name"));
      }
    }
  }
  if (type == "ExternalName" && Str(obj, {"spec", "externalName"}).empty()) {
    errors->push_back(Required("spec.externalName"));
  }
  if (old != nullptr && Str(*old, {"spec", "clusterIP"}) != Str(obj, {"spec", "clusterIP"}) &&
      Str(*old, {"spec", "type"}) != "ExternalName" && type != "ExternalName") {
    errors->push_back(
        Invalid("spec.clusterIPs[0]", Str(obj, {"spec", "clusterIP"}), "may not change once set"));
  }
}

// --- Lease -------------------------------------------------------------------------------------

void ValidateLease(const Json& obj, const Json*, std::vector<FieldError>* errors) {
  const Json* duration = Get(obj, {"spec", "leaseDurationSeconds"});
  if (duration != nullptr && duration->is_number_integer() && duration->get<long long>() <= 0) {
    errors->push_back(Invalid("spec.leaseDurationSeconds", *duration, "must be greater than 0"));
  }
  const Json* transitions = Get(obj, {"spec", "leaseTransitions"});
  if (transitions != nullptr && transitions->is_number_integer() &&
      transitions->get<long long>() < 0) {
    errors->push_back(
        Invalid("spec.leaseTransitions", *transitions, "must be greater than or equal to 0"));
  }
}

// --- Event ---------------------------------------------------------------------------------------

// What kube-apiserver 1.26 stores for fields a legacy Event leaves out (it also writes the
// unset timestamps as null, which the simulator leaves out).
void DefaultEvent(Json& obj, const Json*) {
  SetIfAbsent(obj, "source", Json::object());
  SetIfAbsent(obj, "reportingComponent", "");
  SetIfAbsent(obj, "reportingInstance", "");
}

// The legacy (core/v1, no eventTime) rules: the Event lives in its object's namespace.
void ValidateEvent(const Json& obj, const Json*, std::vector<FieldError>* errors) {
  std::string kind = Str(obj, {"involvedObject", "kind"});
  std::string involved = Str(obj, {"involvedObject", "namespace"});
  std::string ns = Str(obj, {"metadata", "namespace"});
  bool cluster_scoped = kind == "Node" || kind == "Namespace" || kind == "PersistentVolume";
  if (!involved.empty() && !cluster_scoped && involved != ns) {
    errors->push_back(
        Invalid("involvedObject.namespace", involved, "does not match event.namespace"));
  }
}

// --- Deployment --------------------------------------------------------------------------------

void DefaultContainers(Json* containers) {
  if (containers == nullptr || !containers->is_array()) return;
  for (auto& c : *containers) {
    if (!c.is_object()) continue;
    SetIfAbsent(c, "terminationMessagePath", "/dev/termination-log");
    SetIfAbsent(c, "terminationMessagePolicy", "File");
    std::string image = Str(c, {"image"});
    size_t slash = image.rfind('/');
    std::string last = slash == std::string::npos ? image : image.substr(slash + 1);
    bool latest = last.find(':') == std::string::npos || image.ends_with(":latest");
    if (image.find('@') != std::string::npos) latest = false;
    SetIfAbsent(c, "imagePullPolicy", latest ? "Always" : "IfNotPresent");
    if (c.contains("ports") && c["ports"].is_array()) {
      for (auto& p : c["ports"]) {
        if (p.is_object()) SetIfAbsent(p, "protocol", "TCP");
      }
    }
  }
}

void DefaultDeployment(Json& obj, const Json*) {
  Json& spec = obj["spec"];
  if (!spec.is_object()) spec = Json::object();
  SetIfAbsent(spec, "replicas", 1);
  Json& strategy = spec["strategy"];
  if (!strategy.is_object()) strategy = Json::object();
  SetIfAbsent(strategy, "type", "RollingUpdate");
  if (strategy["type"] == "RollingUpdate") {
    Json& rolling = strategy["rollingUpdate"];
    if (!rolling.is_object()) rolling = Json::object();
    SetIfAbsent(rolling, "maxUnavailable", "25%");
    SetIfAbsent(rolling, "maxSurge", "25%");
  }
  SetIfAbsent(spec, "revisionHistoryLimit", 10);
  SetIfAbsent(spec, "progressDeadlineSeconds", 600);
  Json& pod = spec["template"]["spec"];
  if (!pod.is_object()) pod = Json::object();
  SetIfAbsent(pod, "restartPolicy", "Always");
  SetIfAbsent(pod, "terminationGracePeriodSeconds", 30);
  SetIfAbsent(pod, "dnsPolicy", "ClusterFirst");
  SetIfAbsent(pod, "securityContext", Json::object());
  SetIfAbsent(pod, "schedulerName", "default-scheduler");
  DefaultContainers(pod.contains("containers") ? &pod["containers"] : nullptr);
  DefaultContainers(pod.contains("initContainers") ? &pod["initContainers"] : nullptr);
}

void PrepareDeployment(Json& obj) {
  obj["status"] = Json::object();
}

void ValidateDeployment(const Json& obj, const Json* old, std::vector<FieldError>* errors) {
  const Json* selector = Get(obj, {"spec", "selector"});
  const Json* labels = Get(obj, {"spec", "template", "metadata", "labels"});
  if (selector == nullptr || !selector->is_object()) {
    errors->push_back(Required("spec.selector"));
  } else {
    const Json* match = Get(*selector, {"matchLabels"});
    const Json* exprs = Get(*selector, {"matchExpressions"});
    bool empty = (match == nullptr || match->empty()) && (exprs == nullptr || exprs->empty());
    if (empty) {
      errors->push_back(
          Invalid("spec.selector", *selector, "empty selector is invalid for deployment"));
    } else if (match != nullptr && match->is_object()) {
      for (const auto& [k, v] : match->items()) {
        const Json* have = labels != nullptr ? Get(*labels, {k.c_str()}) : nullptr;
        if (have == nullptr || *have != v) {
          errors->push_back(Invalid("spec.template.metadata.labels",
                                    labels != nullptr ? *labels : Json::object(),
                                    "`selector` does not match template `labels`"));
          break;
        }
      }
    }
  }
  const Json* replicas = Get(obj, {"spec", "replicas"});
  if (replicas != nullptr && replicas->is_number_integer() && replicas->get<long long>() < 0) {
    errors->push_back(Invalid("spec.replicas", *replicas, "must be greater than or equal to 0"));
  }
  const Json* containers = Get(obj, {"spec", "template", "spec", "containers"});
  if (containers == nullptr || !containers->is_array() || containers->empty()) {
    errors->push_back(Required("spec.template.spec.containers"));
  } else {
    for (size_t i = 0; i < containers->size(); ++i) {
      const Json& c = (*containers)[i];
      std::string path = "spec.template.spec.containers[" + std::to_string(i) + "]";
      std::string name = Str(c, {"name"});
      if (name.empty()) {
        errors->push_back(Required(path + ".name"));
      } else {
        for (const auto& m : IsDns1123Label(name))
          errors->push_back(Invalid(path + ".name", name, m));
      }
      if (Str(c, {"image"}).empty()) errors->push_back(Required(path + ".image"));
    }
  }
  if (old != nullptr) {
    const Json* was = Get(*old, {"spec", "selector"});
    if (was != nullptr && selector != nullptr && *was != *selector) {
      errors->push_back(Invalid("spec.selector", *selector, "field is immutable"));
    }
  }
}

// --- RBAC --------------------------------------------------------------------------------------

void ValidateRules(const Json& obj, bool namespaced, std::vector<FieldError>* errors) {
  const Json* rules = Get(obj, {"rules"});
  if (rules == nullptr || !rules->is_array()) return;
  for (size_t i = 0; i < rules->size(); ++i) {
    const Json& r = (*rules)[i];
    std::string path = "rules[" + std::to_string(i) + "]";
    auto empty = [&](const char* key) {
      const Json* v = Get(r, {key});
      return v == nullptr || !v->is_array() || v->empty();
    };
    if (empty("verbs")) {
      errors->push_back(Required(path + ".verbs", "verbs must contain at least one value"));
    }
    if (!empty("nonResourceURLs")) {
      if (namespaced) {
        errors->push_back(Invalid(path + ".nonResourceURLs", r["nonResourceURLs"],
                                  "namespaced rules cannot apply to non-resource URLs"));
      }
      if (!empty("apiGroups") || !empty("resources") || !empty("resourceNames")) {
        errors->push_back(Invalid(path + ".nonResourceURLs", r["nonResourceURLs"],
                                  "rules cannot apply to both regular resources and non-resource "
                                  "URLs"));
      }
      continue;
    }
    if (empty("apiGroups")) {
      errors->push_back(
          Required(path + ".apiGroups", "resource rules must supply at least one api group"));
    }
    if (empty("resources")) {
      errors->push_back(
          Required(path + ".resources", "resource rules must supply at least one resource"));
    }
  }
}

void ValidateRole(const Json& obj, const Json*, std::vector<FieldError>* errors) {
  ValidateRules(obj, true, errors);
}

void ValidateClusterRole(const Json& obj, const Json*, std::vector<FieldError>* errors) {
  ValidateRules(obj, false, errors);
}

void ValidateBinding(const Json& obj, const Json* old, bool namespaced,
                     std::vector<FieldError>* errors) {
  const Json* role_ref = Get(obj, {"roleRef"});
  std::string api_group = Str(obj, {"roleRef", "apiGroup"});
  std::string kind = Str(obj, {"roleRef", "kind"});
  if (api_group != "rbac.authorization.k8s.io") {
    errors->push_back(NotSupported("roleRef.apiGroup", api_group, {"rbac.authorization.k8s.io"}));
  }
  std::vector<std::string> kinds = namespaced ? std::vector<std::string>{"Role", "ClusterRole"}
                                              : std::vector<std::string>{"ClusterRole"};
  if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) {
    errors->push_back(NotSupported("roleRef.kind", kind, kinds));
  }
  if (Str(obj, {"roleRef", "name"}).empty()) errors->push_back(Required("roleRef.name"));
  const Json* subjects = Get(obj, {"subjects"});
  if (subjects != nullptr && subjects->is_array()) {
    for (size_t i = 0; i < subjects->size(); ++i) {
      const Json& s = (*subjects)[i];
      std::string path = "subjects[" + std::to_string(i) + "]";
      std::string skind = Str(s, {"kind"});
      if (skind != "ServiceAccount" && skind != "User" && skind != "Group") {
        errors->push_back(NotSupported(path + ".kind", skind, {"ServiceAccount", "User", "Group"}));
      }
      if (Str(s, {"name"}).empty()) errors->push_back(Required(path + ".name"));
      if (skind == "ServiceAccount" && !namespaced && Str(s, {"namespace"}).empty()) {
        errors->push_back(Required(path + ".namespace"));
      }
    }
  }
  if (old != nullptr) {
    const Json* was = Get(*old, {"roleRef"});
    if (was != nullptr && role_ref != nullptr && *was != *role_ref) {
      errors->push_back(Invalid("roleRef", *role_ref, "cannot change roleRef"));
    }
  }
}

void ValidateRoleBinding(const Json& obj, const Json* old, std::vector<FieldError>* errors) {
  ValidateBinding(obj, old, true, errors);
}

void ValidateClusterRoleBinding(const Json& obj, const Json* old, std::vector<FieldError>* errors) {
  ValidateBinding(obj, old, false, errors);
}

// --- CustomResourceDefinition ------------------------------------------------------------------

void ValidateCrd(const Json& obj, const Json*, std::vector<FieldError>* errors) {
  std::string group = Str(obj, {"spec", "group"});
  std::string plural = Str(obj, {"spec", "names", "plural"});
  if (group.empty()) errors->push_back(Required("spec.group"));
  if (plural.empty()) errors->push_back(Required("spec.names.plural"));
  if (Str(obj, {"spec", "names", "kind"}).empty()) errors->push_back(Required("spec.names.kind"));
  std::string scope = Str(obj, {"spec", "scope"});
  if (scope != "Namespaced" && scope != "Cluster") {
    errors->push_back(NotSupported("spec.scope", scope, {"Cluster", "Namespaced"}));
  }
  std::string name = Str(obj, {"metadata", "name"});
  if (!plural.empty() && !group.empty() && name != plural + "." + group) {
    errors->push_back(Invalid("metadata.name", name, "must be spec.names.plural+\".\"+spec.group"));
  }
  const Json* versions = Get(obj, {"spec", "versions"});
  if (versions == nullptr || !versions->is_array() || versions->empty()) {
    errors->push_back(
        Required("spec.versions", "must have exactly one version marked as storage version"));
    return;
  }
  int storage = 0;
  for (const auto& v : *versions) {
    const Json* s = Get(v, {"storage"});
    if (s != nullptr && s->is_boolean() && s->get<bool>()) ++storage;
  }
  if (storage != 1) {
    errors->push_back(Invalid("spec.versions", *versions,
                              "must have exactly one version marked as storage version"));
  }
}

// --- ValidatingWebhookConfiguration -------------------------------------------------------------

Json WebhookConfigurationSchema() {
  Json webhook = {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}};
  return WithMeta({{"type", "object"},
                   {"properties",
                    {{"webhooks",
                      {{"type", "array"},
                       {"x-kubernetes-patch-strategy", "merge"},
                       {"x-kubernetes-patch-merge-key", "name"},
                       {"items", webhook}}}}}});
}

// --- registration ------------------------------------------------------------------------------

const BuiltinBehavior kConfigMap{nullptr, NormalizeConfigMap, ValidateConfigMap};
const BuiltinBehavior kSecret{DefaultSecret, NormalizeSecret, ValidateSecret};
const BuiltinBehavior kNamespace{DefaultNamespace, nullptr, nullptr, PrepareNamespace};
const BuiltinBehavior kServiceAccount{nullptr, nullptr, nullptr};
const BuiltinBehavior kService{DefaultService, nullptr, ValidateService, PrepareService};
const BuiltinBehavior kLease{nullptr, nullptr, ValidateLease};
const BuiltinBehavior kEvent{DefaultEvent, nullptr, ValidateEvent};
const BuiltinBehavior kDeployment{DefaultDeployment, nullptr, ValidateDeployment,
                                  PrepareDeployment};
const BuiltinBehavior kRole{nullptr, nullptr, ValidateRole};
const BuiltinBehavior kClusterRole{nullptr, nullptr, ValidateClusterRole};
const BuiltinBehavior kRoleBinding{nullptr, nullptr, ValidateRoleBinding};
const BuiltinBehavior kClusterRoleBinding{nullptr, nullptr, ValidateClusterRoleBinding};
const BuiltinBehavior kCrd{nullptr, nullptr, ValidateCrd};
const BuiltinBehavior kWebhookConfiguration{nullptr, nullptr, nullptr};

const std::vector<std::string> kAllVerbs = {"create", "delete", "deletecollection", "get",
                                            "list",   "patch",  "update",           "watch"};

TypePtr Make(const char* group, const char* plural, const char* singular, const char* kind,
             bool namespaced, std::vector<std::string> short_names, const Json& schema,
             const BuiltinBehavior* behavior, const std::function<void(ResourceType&)>& extra) {
  auto t = std::make_shared<ResourceType>();
  t->group = group;
  t->version = "v1";
  t->plural = plural;
  t->singular = singular;
  t->kind = kind;
  t->list_kind = std::string(kind) + "List";
  t->namespaced = namespaced;
  t->short_names = std::move(short_names);
  t->verbs = kAllVerbs;
  auto compiled = Schema::Compile(schema);
  if (!compiled.ok()) {
    std::fprintf(stderr, "built-in schema of %s does not compile: %s\n", plural,
                 compiled.status().ToString().c_str());
    std::abort();
  }
  t->schema = *compiled;
  t->zero_object = {{"metadata", Json::object()}};
  t->behavior = behavior;
  if (extra) extra(*t);
  t->Finish();
  return t;
}

}  // namespace

const Json& ObjectMetaSchema() {
  static const Json* schema = new Json(Json::parse(kObjectMeta));
  return *schema;
}

const std::vector<TypePtr>& BuiltinTypes() {
  static const std::vector<TypePtr>* types = [] {
    auto* v = new std::vector<TypePtr>();
    v->push_back(Make("", "namespaces", "namespace", "Namespace", false, {"ns"}, NamespaceSchema(),
                      &kNamespace, [](ResourceType& t) {
                        t.status_subresource = true;
                        t.return_deleted_object = true;
                        t.name_rule = NameRule::kDnsLabel;
                        t.verbs = {"create", "delete", "get", "list", "patch", "update", "watch"};
                        t.field_selectors = {"status.phase"};
                        t.zero_object = {{"metadata", Json::object()},
                                         {"spec", Json::object()},
                                         {"status", Json::object()}};
                      }));
    v->push_back(Make("", "configmaps", "configmap", "ConfigMap", true, {"cm"}, ConfigMapSchema(),
                      &kConfigMap, nullptr));
    v->push_back(Make("", "secrets", "secret", "Secret", true, {}, SecretSchema(), &kSecret,
                      [](ResourceType& t) { t.field_selectors = {"type"}; }));
    v->push_back(Make("", "serviceaccounts", "serviceaccount", "ServiceAccount", true, {"sa"},
                      ServiceAccountSchema(), &kServiceAccount,
                      [](ResourceType& t) { t.return_deleted_object = true; }));
    v->push_back(Make("", "services", "service", "Service", true, {"svc"}, ServiceSchema(),
                      &kService, [](ResourceType& t) {
                        t.status_subresource = true;
                        t.name_rule = NameRule::kDns1035Label;
                        t.verbs = {"create", "delete", "get", "list", "patch", "update", "watch"};
                        t.zero_object = {{"metadata", Json::object()},
                                         {"spec", Json::object()},
                                         {"status", {{"loadBalancer", Json::object()}}}};
                      }));
    v->push_back(Make("coordination.k8s.io", "leases", "lease", "Lease", true, {}, LeaseSchema(),
                      &kLease, [](ResourceType& t) {
                        t.zero_object = {{"metadata", Json::object()}, {"spec", Json::object()}};
                      }));
    v->push_back(Make(
        "", "events", "event", "Event", true, {"ev"}, EventSchema(), &kEvent, [](ResourceType& t) {
          t.field_selectors = {"involvedObject.kind",       "involvedObject.namespace",
                               "involvedObject.name",       "involvedObject.uid",
                               "involvedObject.apiVersion", "involvedObject.resourceVersion",
                               "involvedObject.fieldPath",  "reason",
                               "reportingComponent",        "type"};
        }));
    v->push_back(Make(
        "apps", "deployments", "deployment", "Deployment", true, {"deploy"}, DeploymentSchema(),
        &kDeployment, [](ResourceType& t) {
          t.status_subresource = true;
          t.tracks_generation = true;
          t.categories = {"all"};
          t.zero_object = {{"metadata", Json::object()},
                           {"spec",
                            {{"template", {{"metadata", Json::object()}, {"spec", Json::object()}}},
                             {"strategy", Json::object()}}},
                           {"status", Json::object()}};
        }));
    const char* rbac = "rbac.authorization.k8s.io";
    v->push_back(Make(rbac, "roles", "role", "Role", true, {}, RoleSchema(false), &kRole,
                      [](ResourceType& t) { t.name_rule = NameRule::kPathSegment; }));
    v->push_back(Make(rbac, "rolebindings", "rolebinding", "RoleBinding", true, {}, BindingSchema(),
                      &kRoleBinding,
                      [](ResourceType& t) { t.name_rule = NameRule::kPathSegment; }));
    v->push_back(Make(rbac, "clusterroles", "clusterrole", "ClusterRole", false, {},
                      RoleSchema(true), &kClusterRole,
                      [](ResourceType& t) { t.name_rule = NameRule::kPathSegment; }));
    v->push_back(Make(rbac, "clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding",
                      false, {}, BindingSchema(), &kClusterRoleBinding,
                      [](ResourceType& t) { t.name_rule = NameRule::kPathSegment; }));
    v->push_back(Make("admissionregistration.k8s.io", "validatingwebhookconfigurations",
                      "validatingwebhookconfiguration", "ValidatingWebhookConfiguration", false, {},
                      WebhookConfigurationSchema(), &kWebhookConfiguration,
                      [](ResourceType& t) { t.categories = {"api-extensions"}; }));
    v->push_back(Make("apiextensions.k8s.io", "customresourcedefinitions",
                      "customresourcedefinition", "CustomResourceDefinition", false,
                      {"crd", "crds"}, CrdSchema(), &kCrd, [](ResourceType& t) {
                        t.status_subresource = true;
                        t.tracks_generation = true;
                        t.categories = {"api-extensions"};
                      }));
    return v;
  }();
  return *types;
}

}  // namespace syncbus::kubesim
