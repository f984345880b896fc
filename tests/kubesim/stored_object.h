// StoredObject: one object as a simulated API server keeps it — its compact JSON (without
// apiVersion/kind, which the type supplies) and the few fields that lists, watches, selectors
// and garbage collection need without parsing. PreparedObject is the same before commit: the
// JSON split around the resourceVersion that the store assigns under its lock.
// Immutable once built; shared between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/json.h"
#include "tests/kubesim/resource_registry.h"
#include "tests/kubesim/selector.h"

namespace syncbus::kubesim {

struct ObjectIndex {
  std::string key;  // "ns/name", or "name" for cluster-scoped objects
  std::string ns, name, uid;
  LabelMap labels;
  std::vector<std::pair<std::string, std::string>> fields;  // the type's extra field selectors
  std::vector<std::string> owner_uids;
  bool has_finalizers = false;
  bool deleting = false;  // metadata.deletionTimestamp set
};

struct StoredObject {
  std::string body;  // {"metadata":{...,"resourceVersion":"7",...},...}
  uint64_t rv = 0;
  ObjectIndex index;
};
using ObjectPtr = std::shared_ptr<const StoredObject>;

struct PreparedObject {
  std::string head, tail;  // body = head + rv + tail
  ObjectIndex index;
  ObjectPtr Finish(uint64_t rv) const;
};

// Serialises `object` (apiVersion/kind and metadata.resourceVersion are left out).
PreparedObject Prepare(const ResourceType& type, const Json& object);
// The object's JSON with apiVersion and kind, as GET returns it.
std::string FullJson(const ResourceType& type, const StoredObject& object);
// The object parsed, with apiVersion and kind.
Json ParseStored(const ResourceType& type, const StoredObject& object);
// A copy with another resourceVersion (DELETED events carry the deletion's version).
ObjectPtr WithResourceVersion(const ResourceType& type, const StoredObject& object, uint64_t rv);
// The value of a selectable field ("metadata.name", "metadata.namespace", or a type field).
std::string FieldValue(const StoredObject& object, const std::string& field);

struct StoreEvent {
  enum class Type { kAdded, kModified, kDeleted };
  uint64_t rv = 0;
  Type type = Type::kAdded;
  TypePtr resource;
  ObjectPtr object;  // new state; for kDeleted the last state with the deletion's rv
  ObjectPtr prev;    // state before (null for kAdded)
};

}  // namespace syncbus::kubesim
