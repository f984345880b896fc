#include "tests/kubesim/resource_registry.h"

#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "common/yaml_json.h"
#include "tests/kubesim/builtin_types.h"

namespace syncbus::kubesim {

void ResourceType::Finish() {
  key = group + "/" + version + "/" + plural;
  api_version = group.empty() ? version : group + "/" + version;
  group_resource = group.empty() ? plural : plural + "." + group;
  group_kind = group.empty() ? kind : kind + "." + group;
}

namespace {

std::string RegistryKey(const std::string& group, const std::string& version,
                        const std::string& plural) {
  return group + "/" + version + "/" + plural;
}

std::string Str(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::vector<std::string> Strings(const Json& obj, const char* key) {
  std::vector<std::string> out;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_array()) return out;
  for (const auto& v : *it) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

std::string CrdName(const Json& crd) {
  auto meta = crd.find("metadata");
  return meta != crd.end() && meta->is_object() ? Str(*meta, "name") : std::string();
}

}  // namespace

Outcome<std::vector<TypePtr>> CompileCrd(const Json& crd) {
  std::string name = CrdName(crd);
  const Json empty = Json::object();
  const Json& spec = crd.contains("spec") && crd["spec"].is_object() ? crd["spec"] : empty;
  const Json& names = spec.contains("names") && spec["names"].is_object() ? spec["names"] : empty;
  std::vector<FieldError> errors;
  std::vector<TypePtr> out;
  auto versions = spec.find("versions");
  if (versions == spec.end() || !versions->is_array()) {
    errors.push_back(Required("spec.versions"));
    return InvalidError("CustomResourceDefinition", "apiextensions.k8s.io", name, errors);
  }
  for (size_t i = 0; i < versions->size(); ++i) {
    const Json& v = (*versions)[i];
    if (!v.is_object() || !v.value("served", false)) continue;
    auto t = std::make_shared<ResourceType>();
    t->group = Str(spec, "group");
    t->version = Str(v, "name");
    t->plural = Str(names, "plural");
    t->singular = Str(names, "singular");
    t->kind = Str(names, "kind");
    t->list_kind = Str(names, "listKind").empty() ? t->kind + "List" : Str(names, "listKind");
    t->short_names = Strings(names, "shortNames");
    t->categories = Strings(names, "categories");
    t->verbs = {"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"};
    t->namespaced = Str(spec, "scope") != "Cluster";
    t->custom = true;
    t->tracks_generation = true;
    t->crd_name = name;
    t->zero_object = Json::object();
    auto subresources = v.find("subresources");
    t->status_subresource =
        subresources != v.end() && subresources->is_object() && subresources->contains("status");
    Json openapi = {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}};
    auto schema = v.find("schema");
    if (schema != v.end() && schema->is_object() && schema->contains("openAPIV3Schema")) {
      openapi = (*schema)["openAPIV3Schema"];
    }
    if (!openapi.is_object()) openapi = Json::object();
    openapi["properties"]["metadata"] = ObjectMetaSchema();
    auto compiled = Schema::Compile(openapi);
    if (!compiled.ok()) {
      errors.push_back(Invalid("spec.versions[" + std::to_string(i) + "].schema.openAPIV3Schema",
                               nullptr, compiled.status().message()));
      continue;
    }
    t->schema = *compiled;
    t->Finish();
    out.push_back(std::move(t));
  }
  if (!errors.empty()) {
    return InvalidError("CustomResourceDefinition", "apiextensions.k8s.io", name, errors);
  }
  return out;
}

Result<Json> LoadCrdFile(const std::string& path) {
  static std::mutex mu;
  static auto* cache = new std::unordered_map<std::string, Json>();
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache->find(path);
    if (it != cache->end()) return it->second;
  }
  std::ifstream in(path);
  if (!in) return NotFound("cannot read CRD file " + path);
  std::stringstream text;
  text << in.rdbuf();
  auto docs = YamlDocumentsToJson(text.str());
  if (!docs.ok()) return docs.status().Annotate(path);
  for (auto& doc : *docs) {
    if (doc.is_object() && Str(doc, "kind") == "CustomResourceDefinition") {
      std::lock_guard<std::mutex> lock(mu);
      cache->emplace(path, doc);
      return doc;
    }
  }
  return InvalidArgument(path + ": no CustomResourceDefinition in the file");
}

ResourceRegistry::ResourceRegistry() {
  group_order_.push_back("");
  for (const auto& t : BuiltinTypes()) {
    types_[RegistryKey(t->group, t->version, t->plural)] = t;
    if (std::find(group_order_.begin(), group_order_.end(), t->group) == group_order_.end()) {
      group_order_.push_back(t->group);
    }
    if (t->plural == "namespaces") namespaces_ = t;
    if (t->plural == "customresourcedefinitions") crds_ = t;
  }
}

TypePtr ResourceRegistry::Find(const std::string& group, const std::string& version,
                               const std::string& plural) const {
  std::shared_lock lock(mu_);
  auto it = types_.find(RegistryKey(group, version, plural));
  return it == types_.end() ? nullptr : it->second;
}

Outcome<std::vector<TypePtr>> ResourceRegistry::AddCrd(const Json& crd) {
  auto types = CompileCrd(crd);
  if (!types.ok()) return types;
  std::string name = CrdName(crd);
  std::unique_lock lock(mu_);
  for (auto it = types_.begin(); it != types_.end();) {
    if (it->second->custom && it->second->crd_name == name) {
      it = types_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& t : *types) {
    types_[RegistryKey(t->group, t->version, t->plural)] = t;
    if (std::find(group_order_.begin(), group_order_.end(), t->group) == group_order_.end()) {
      group_order_.push_back(t->group);
    }
  }
  return types;
}

std::vector<TypePtr> ResourceRegistry::RemoveCrd(const std::string& crd_name) {
  std::vector<TypePtr> removed;
  std::unique_lock lock(mu_);
  for (auto it = types_.begin(); it != types_.end();) {
    if (it->second->custom && it->second->crd_name == crd_name) {
      removed.push_back(it->second);
      it = types_.erase(it);
    } else {
      ++it;
    }
  }
  return removed;
}

Json ResourceRegistry::ApiVersions() const {
  return {{"kind", "APIVersions"},
          {"versions", {"v1"}},
          {"serverAddressByClientCIDRs",
           {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", "127.0.0.1:6443"}}}}};
}

Json ResourceRegistry::GroupJson(const std::string& group) const {
  Json versions = Json::array();
  std::vector<std::string> seen;
  for (const auto& [key, t] : types_) {
    if (t->group != group || std::find(seen.begin(), seen.end(), t->version) != seen.end()) {
      continue;
    }
    seen.push_back(t->version);
    versions.push_back({{"groupVersion", t->api_version}, {"version", t->version}});
  }
  Json out = {{"name", group}, {"versions", versions}};
  if (!versions.empty()) out["preferredVersion"] = versions[0];
  return out;
}

Json ResourceRegistry::ApiGroupList() const {
  std::shared_lock lock(mu_);
  Json groups = Json::array();
  for (const auto& g : group_order_) {
    if (g.empty()) continue;
    Json group = GroupJson(g);
    if (!group["versions"].empty()) groups.push_back(std::move(group));
  }
  return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}};
}

std::optional<Json> ResourceRegistry::ApiGroup(const std::string& group) const {
  std::shared_lock lock(mu_);
  Json out = GroupJson(group);
  if (out["versions"].empty()) return std::nullopt;
  out["kind"] = "APIGroup";
  out["apiVersion"] = "v1";
  return out;
}

std::optional<Json> ResourceRegistry::ResourceList(const std::string& group,
                                                   const std::string& version) const {
  std::shared_lock lock(mu_);
  Json resources = Json::array();
  for (const auto& [key, t] : types_) {
    if (t->group != group || t->version != version) continue;
    Json r = {{"name", t->plural},
              {"singularName", t->custom ? t->singular : ""},
              {"namespaced", t->namespaced},
              {"kind", t->kind},
              {"verbs", t->verbs}};
    if (!t->short_names.empty()) r["shortNames"] = t->short_names;
    if (!t->categories.empty()) r["categories"] = t->categories;
    resources.push_back(std::move(r));
    if (t->status_subresource) {
      resources.push_back({{"name", t->plural + "/status"},
                           {"singularName", ""},
                           {"namespaced", t->namespaced},
                           {"kind", t->kind},
                           {"verbs", {"get", "patch", "update"}}});
    }
    if (t->plural == "namespaces") {
      resources.push_back({{"name", "namespaces/finalize"},
                           {"singularName", ""},
                           {"namespaced", false},
                           {"kind", "Namespace"},
                           {"verbs", {"update"}}});
    }
  }
  if (resources.empty()) return std::nullopt;
  return Json{{"kind", "APIResourceList"},
              {"apiVersion", "v1"},
              {"groupVersion", group.empty() ? version : group + "/" + version},
              {"resources", resources}};
}

}  // namespace syncbus::kubesim
