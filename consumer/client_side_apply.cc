#include "consumer/client_side_apply.h"

#include <algorithm>

#include "common/go_json.h"

namespace syncbus::consumer {
namespace {

// The annotations of an object may hold at most this many bytes (keys and values).
constexpr size_t kMaxAnnotationBytes = size_t{256} * 1024;

// kubectl's client-side apply bookkeeping: the object as applied, without the annotation itself
// (an empty annotations map stays), serialized as Go does. `typed` adds what a Go struct of the
// kind writes that an unstructured object does not (creationTimestamp: null).
std::string LastApplied(const Json& object, bool typed) {
  Json modified = object;
  Json& meta = modified["metadata"];
  Json annotations = meta.contains("annotations") && meta["annotations"].is_object()
                         ? meta["annotations"]
                         : Json::object();
  annotations.erase(kLastAppliedAnnotation);
  meta["annotations"] = std::move(annotations);
  if (typed) meta["creationTimestamp"] = nullptr;
  return GoJsonEncode(modified) + "\n";
}

size_t AnnotationBytes(const Json& annotations) {
  size_t n = 0;
  for (const auto& [key, value] : annotations.items()) {
    n += key.size() + (value.is_string() ? value.get_ref<const std::string&>().size() : 0);
  }
  return n;
}

// The entry (of managedFields) owns the last-applied annotation.
bool OwnsLastApplied(const Json& entry) {
  const Json* f = &entry;
  for (const char* key : {"fieldsV1", "f:metadata", "f:annotations"}) {
    auto it = f->find(key);
    if (it == f->end() || !it->is_object()) return false;
    f = &*it;
  }
  return f->contains(std::string("f:") + kLastAppliedAnnotation);
}

void UnionFields(Json& into, const Json& from) {
  if (!into.is_object() || !from.is_object()) return;
  for (const auto& [key, value] : from.items()) {
    auto it = into.find(key);
    if (it == into.end()) {
      into[key] = value;
    } else {
      UnionFields(*it, value);
    }
  }
}

// A three-way patch from `original` (the last-applied annotation, or null) to `modified`,
// against `current`: what differs from current, and null for what the original had and the
// modified does not. Lists are sent whole (a strategic merge merges keyed lists by key).
Json ThreeWayPatch(const Json& original, const Json& modified, const Json& current) {
  Json patch = Json::object();
  for (const auto& [key, value] : modified.items()) {
    auto cur = current.is_object() ? current.find(key) : current.end();
    bool present = current.is_object() && cur != current.end();
    if (value.is_object() && present && cur->is_object()) {
      const Json& orig = original.is_object() && original.contains(key) ? original[key] : Json();
      Json sub = ThreeWayPatch(orig, value, *cur);
      if (!sub.empty()) patch[key] = std::move(sub);
    } else if (!present || *cur != value) {
      patch[key] = value;
    }
  }
  if (original.is_object()) {
    for (const auto& [key, value] : original.items()) {
      if (modified.contains(key)) continue;
      if (current.is_object() && current.contains(key)) patch[key] = nullptr;
    }
  }
  return patch;
}

}  // namespace

std::string SetLastApplied(Json& object, bool typed) {
  std::string value = LastApplied(object, typed);
  Json& meta = object["metadata"];
  Json& annotations = meta["annotations"];
  if (!annotations.is_object()) annotations = Json::object();
  annotations.erase(kLastAppliedAnnotation);
  if (AnnotationBytes(annotations) + value.size() + std::string(kLastAppliedAnnotation).size() >
      kMaxAnnotationBytes) {
    if (annotations.empty()) meta.erase("annotations");
    return {};
  }
  annotations[kLastAppliedAnnotation] = value;
  return value;
}

bool BuiltinGroup(const std::string& group) {
  static const std::set<std::string> kGroups = {"",
                                                "admissionregistration.k8s.io",
                                                "apps",
                                                "authentication.k8s.io",
                                                "authorization.k8s.io",
                                                "autoscaling",
                                                "batch",
                                                "certificates.k8s.io",
                                                "coordination.k8s.io",
                                                "discovery.k8s.io",
                                                "events.k8s.io",
                                                "extensions",
                                                "flowcontrol.apiserver.k8s.io",
                                                "internal.apiserver.k8s.io",
                                                "networking.k8s.io",
                                                "node.k8s.io",
                                                "policy",
                                                "rbac.authorization.k8s.io",
                                                "resource.k8s.io",
                                                "scheduling.k8s.io",
                                                "storage.k8s.io"};
  return kGroups.count(group) > 0;
}

// client-go's csaupgrade, as a JSON patch: the fields of the client-side apply managers are
// merged into the `applier`'s Apply entry and their entries removed, with the resourceVersion as
// precondition. nullopt when there is nothing to take over.
std::optional<std::string> TakeOverPatch(const Json& live, const std::string& applier,
                                         const std::set<std::string>& managers) {
  if (!live.is_object() || !live.contains("metadata")) return std::nullopt;
  const Json& meta = live["metadata"];
  auto list = meta.find("managedFields");
  if (list == meta.end() || !list->is_array()) return std::nullopt;
  auto is_csa = [&](const Json& e) {
    if (!e.is_object() || e.value("operation", "") != "Update" ||
        !e.value("subresource", "").empty())
      return false;
    return managers.count(e.value("manager", "")) > 0 || OwnsLastApplied(e);
  };
  if (std::none_of(list->begin(), list->end(), is_csa)) return std::nullopt;
  auto own = std::find_if(list->begin(), list->end(), [&](const Json& e) {
    return e.is_object() && e.value("manager", "") == applier &&
           e.value("operation", "") == "Apply" && e.value("subresource", "").empty();
  });
  if (own == list->end()) return std::nullopt;  // the apply just made it: cannot be missing
  Json mine = *own;
  if (!mine.contains("fieldsV1")) mine["fieldsV1"] = Json::object();
  for (const Json& e : *list) {
    if (is_csa(e) && e.value("apiVersion", "") == mine.value("apiVersion", "") &&
        e.contains("fieldsV1")) {
      UnionFields(mine["fieldsV1"], e["fieldsV1"]);
    }
  }
  Json entries = Json::array();
  for (const Json& e : *list) {
    if (is_csa(e)) continue;
    entries.push_back(&e == &*own ? mine : e);
  }
  Json patch = Json::array(
      {{{"op", "test"},
        {"path", "/metadata/resourceVersion"},
        {"value", meta.value("resourceVersion", "")}},
       {{"op", "replace"}, {"path", "/metadata/managedFields"}, {"value", std::move(entries)}}});
  return patch.dump();
}

// The patch CreateOrUpdate sends to an existing object, as kubectl's Patcher computes it.
std::string UpdatePatch(const Json& modified, const Json& current) {
  Json original;
  if (current.contains("metadata") && current["metadata"].contains("annotations")) {
    const Json& annotations = current["metadata"]["annotations"];
    auto it = annotations.find(kLastAppliedAnnotation);
    if (it != annotations.end() && it->is_string()) {
      original = Json::parse(it->get<std::string>(), nullptr, /*allow_exceptions=*/false);
      if (original.is_discarded()) original = nullptr;
    }
  }
  return ThreeWayPatch(original, modified, current).dump();
}

}  // namespace syncbus::consumer
