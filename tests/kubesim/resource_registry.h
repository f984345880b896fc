// ResourceRegistry: the resource types one simulated API server serves — the built-in types and
// the custom resources of registered CustomResourceDefinitions — and the discovery documents
// (/api, /apis, /apis/<g>, /api/v1, /apis/<g>/<v>) built from them. Thread-safe (CRDs may be
// added and removed while requests run); ResourceType values are immutable and shared.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "tests/kubesim/object_meta.h"
#include "tests/kubesim/schema.h"
#include "tests/kubesim/status_error.h"

namespace syncbus::kubesim {

// Type-specific semantics of a built-in resource (the registry strategy of its Go type).
struct BuiltinBehavior {
  // SetDefaults of the versioned type, plus what an update keeps from the old object
  // (old == nullptr on create).
  void (*set_defaults)(Json& object, const Json* old) = nullptr;
  // Conversion-time rewrites that can fail like decoding (Secret stringData into data, base64
  // checks): "" or the decode error.
  std::string (*normalize)(Json& object) = nullptr;
  // Validation (create: old == nullptr), metadata excluded.
  void (*validate)(const Json& object, const Json* old, std::vector<FieldError>* errors) = nullptr;
  // PrepareForCreate: fields the server sets on create, after field ownership was recorded
  // (so nobody owns them): initial status, allocated cluster IPs, namespace finalizers.
  void (*prepare_for_create)(Json& object) = nullptr;
};

struct ResourceType {
  std::string group, version, plural, singular, kind, list_kind;
  std::vector<std::string> short_names, categories;
  std::vector<std::string> verbs;
  bool namespaced = true;
  bool status_subresource = false;
  bool tracks_generation = false;      // metadata.generation set and bumped on spec changes
  bool custom = false;                 // a custom resource (CRD-defined)
  bool return_deleted_object = false;  // DELETE answers with the object instead of a Status
  NameRule name_rule = NameRule::kDnsSubdomain;
  std::shared_ptr<const Schema> schema;       // never null
  std::vector<std::string> field_selectors;   // selectable fields besides name/namespace
  Json zero_object = Json::object();          // an empty object of the type (managedFields)
  const BuiltinBehavior* behavior = nullptr;  // built-ins only
  std::string crd_name;                       // custom resources: the CRD's name

  std::string key;             // "group/version/plural": identity across re-registrations
  std::string api_version;     // "v1", "hive.openshift.io/v1"
  std::string group_resource;  // "configmaps", "syncsets.hive.openshift.io"
  std::string group_kind;      // "ConfigMap", "SyncSet.hive.openshift.io"

  // Fills key, api_version, group_resource, group_kind.
  void Finish();
};

using TypePtr = std::shared_ptr<const ResourceType>;

class ResourceRegistry {
 public:
  ResourceRegistry();

  TypePtr Find(const std::string& group, const std::string& version,
               const std::string& plural) const;
  TypePtr Namespaces() const { return namespaces_; }
  TypePtr CustomResourceDefinitions() const { return crds_; }

  // Registers the served versions of a CRD object (apiextensions.k8s.io/v1). Replaces the types
  // of a CRD with the same name. Errors are field errors of the CRD.
  Outcome<std::vector<TypePtr>> AddCrd(const Json& crd);
  // Unregisters a CRD's types and returns them.
  std::vector<TypePtr> RemoveCrd(const std::string& crd_name);

  Json ApiVersions() const;                                      // /api
  Json ApiGroupList() const;                                     // /apis
  std::optional<Json> ApiGroup(const std::string& group) const;  // /apis/<g>
  std::optional<Json> ResourceList(const std::string& group, const std::string& version) const;

 private:
  Json GroupJson(const std::string& group) const;  // caller holds mu_

  mutable std::shared_mutex mu_;
  std::map<std::string, TypePtr> types_;  // key: group/version/plural
  std::vector<std::string> group_order_;  // discovery order of groups
  TypePtr namespaces_;
  TypePtr crds_;
};

// Compiles the types a CRD defines (one per served version); used by AddCrd and cached per file
// by LoadCrdFile.
Outcome<std::vector<TypePtr>> CompileCrd(const Json& crd);
// A CRD YAML file parsed once per process (immutable): the CRD object.
Result<Json> LoadCrdFile(const std::string& path);

}  // namespace syncbus::kubesim
