#include "consumer/object_diff.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "consumer/client_side_apply.h"

namespace syncbus::consumer {
namespace {

constexpr char kNone[] = "<none>";

// `object` without what the server manages and what a diff would only repeat.
Json Comparable(Json object) {
  if (!object.is_object()) return object;
  object.erase("status");
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return object;
  for (const char* key :
       {"resourceVersion", "generation", "managedFields", "creationTimestamp", "uid", "selfLink"}) {
    meta->erase(key);
  }
  auto annotations = meta->find("annotations");
  if (annotations != meta->end() && annotations->is_object()) {
    annotations->erase(kLastAppliedAnnotation);
    if (annotations->empty()) meta->erase("annotations");
  }
  return object;
}

bool PlainKey(const std::string& key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '_' || c == '-';
  });
}

std::string Child(const std::string& path, const std::string& key) {
  if (PlainKey(key)) return path.empty() ? key : path + "." + key;
  return path + "[" + Json(key).dump() + "]";
}

std::string Show(const Json* value) {
  return value == nullptr ? kNone : value->dump();
}

void Walk(const std::string& path, const Json* before, const Json* after,
          std::vector<std::string>& out) {
  const bool objects =
      (before == nullptr || before->is_object()) && (after == nullptr || after->is_object());
  const bool arrays =
      (before == nullptr || before->is_array()) && (after == nullptr || after->is_array());
  const bool empty = (before == nullptr || before->empty()) && (after == nullptr || after->empty());
  if (objects && !empty && !(before == nullptr && after == nullptr)) {
    std::set<std::string> keys;
    for (const Json* side : {before, after}) {
      if (side == nullptr) continue;
      for (const auto& [key, value] : side->items()) keys.insert(key);
    }
    for (const std::string& key : keys) {
      const Json* b = before != nullptr && before->contains(key) ? &(*before)[key] : nullptr;
      const Json* a = after != nullptr && after->contains(key) ? &(*after)[key] : nullptr;
      Walk(Child(path, key), b, a, out);
    }
    return;
  }
  if (arrays && !empty && !(before == nullptr && after == nullptr)) {
    const size_t n =
        std::max(before == nullptr ? 0 : before->size(), after == nullptr ? 0 : after->size());
    for (size_t i = 0; i < n; ++i) {
      const Json* b = before != nullptr && i < before->size() ? &(*before)[i] : nullptr;
      const Json* a = after != nullptr && i < after->size() ? &(*after)[i] : nullptr;
      Walk(path + "[" + std::to_string(i) + "]", b, a, out);
    }
    return;
  }
  if (before == nullptr && after == nullptr) return;
  if (before != nullptr && after != nullptr && *before == *after) return;
  out.push_back(path + ": " + Show(before) + " -> " + Show(after));
}

}  // namespace

std::vector<std::string> ObjectDiff(const Json& before, const Json& after) {
  const Json b = Comparable(before);
  const Json a = Comparable(after);
  std::vector<std::string> out;
  Walk("", b.is_null() ? nullptr : &b, a.is_null() ? nullptr : &a, out);
  return out;
}

}  // namespace syncbus::consumer
