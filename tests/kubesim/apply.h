// Server-side apply and field ownership (metadata.managedFields), after sigs.k8s.io/
// structured-merge-diff as kube-apiserver 1.26 runs it: typed field sets, comparison, merge of an
// applied configuration into the live object, removal of fields a manager stopped applying,
// conflicts with other managers (409 FieldManagerConflict) and force, and the Update entries
// that every other write records. Pure functions over values; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "tests/kubesim/field_set.h"
#include "tests/kubesim/schema.h"
#include "tests/kubesim/status_error.h"

namespace syncbus::kubesim {

// Typed set of the fields `value` sets (structured-merge-diff ToFieldSet), skipping the
// subtrees that are members of `ignore`.
FieldSet ToFieldSet(const Json& value, const Schema& schema, const FieldSet& ignore);

struct Comparison {
  FieldSet added, removed, modified;
};
Comparison Compare(const Json& before, const Json& after, const Schema& schema,
                   const FieldSet& ignore);

// `config` merged into `live`: granular maps by key, associative lists by key (set lists by
// value), everything else (scalars, atomic lists and maps) replaced.
Json Merge(const Json& live, const Json& config, const Schema& schema);

struct ManagedEntry {
  std::string manager;
  std::string operation;  // "Apply" or "Update"
  std::string api_version;
  std::string subresource;  // "" or "status"
  std::string time;         // RFC 3339, may be empty
  FieldSet fields;
  bool operator==(const ManagedEntry&) const = default;
};

std::vector<ManagedEntry> ParseManagedFields(const Json& object);
// Sorted as the apiserver writes them (operation, time, manager, apiVersion, subresource).
Json EncodeManagedFields(std::vector<ManagedEntry> entries);

// Where a write lands: the resource's schema, the request's API version, the subresource, the
// fields that endpoint may not own (metadata system fields plus the reset fields: status on the
// main endpoint of a resource with a status subresource, spec and metadata on /status).
struct FieldManagerScope {
  const Schema* schema = nullptr;
  std::string api_version;
  std::string subresource;
  bool status_subresource = false;  // the resource has one (so the main endpoint resets status)
  std::string now;                  // timestamp for changed entries
};

// Records an Update (create, PUT, PATCH) by `manager` that turned `before` into `after`.
void RecordUpdate(std::vector<ManagedEntry>* entries, const Json& before, const Json& after,
                  const std::string& manager, const FieldManagerScope& scope);

// Applies `config` for `manager` on top of `live` (an empty object when creating). Returns the
// new object (managedFields not yet written) and updates `entries`; 409 with
// FieldManagerConflict causes when another manager owns a field the config changes and
// !force.
Outcome<Json> ApplyConfig(std::vector<ManagedEntry>* entries, const Json& live, const Json& config,
                          const std::string& manager, bool force, const FieldManagerScope& scope);

}  // namespace syncbus::kubesim
