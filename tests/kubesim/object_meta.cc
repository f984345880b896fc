#include "tests/kubesim/object_meta.h"

#include <algorithm>

#include "tests/kubesim/json_util.h"
#include "tests/kubesim/names.h"

namespace syncbus::kubesim {
namespace {

enum class MetaType { kString, kInt, kTime, kStringMap, kStringList, kObjectList };

struct MetaField {
  const char* name;
  MetaType type;
};

constexpr MetaField kMetaFields[] = {
    {"name", MetaType::kString},
    {"generateName", MetaType::kString},
    {"namespace", MetaType::kString},
    {"selfLink", MetaType::kString},
    {"uid", MetaType::kString},
    {"resourceVersion", MetaType::kString},
    {"generation", MetaType::kInt},
    {"creationTimestamp", MetaType::kTime},
    {"deletionTimestamp", MetaType::kTime},
    {"deletionGracePeriodSeconds", MetaType::kInt},
    {"labels", MetaType::kStringMap},
    {"annotations", MetaType::kStringMap},
    {"ownerReferences", MetaType::kObjectList},
    {"finalizers", MetaType::kStringList},
    {"managedFields", MetaType::kObjectList},
};

const MetaField* FindMetaField(const std::string& name) {
  for (const auto& f : kMetaFields) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

bool HasType(const Json& v, MetaType t) {
  if (v.is_null()) return true;
  switch (t) {
    case MetaType::kString: return v.is_string();
    case MetaType::kInt: return v.is_number_integer();
    case MetaType::kTime: return v.is_string();
    case MetaType::kStringMap:
      if (!v.is_object()) return false;
      for (const auto& [k, e] : v.items()) {
        if (!e.is_string()) return false;
      }
      return true;
    case MetaType::kStringList:
      if (!v.is_array()) return false;
      for (const auto& e : v) {
        if (!e.is_string()) return false;
      }
      return true;
    case MetaType::kObjectList:
      if (!v.is_array()) return false;
      for (const auto& e : v) {
        if (!e.is_object()) return false;
      }
      return true;
  }
  return false;
}

const char* GoType(MetaType t) {
  switch (t) {
    case MetaType::kString: return "string";
    case MetaType::kInt: return "int64";
    case MetaType::kTime: return "Time";
    case MetaType::kStringMap: return "map[string]string";
    case MetaType::kStringList: return "[]string";
    case MetaType::kObjectList: return "[]struct";
  }
  return "";
}

void ValidateOwnerReferences(const Json& refs, const std::string& path,
                             std::vector<FieldError>* errors) {
  std::vector<std::string> controllers;
  for (const auto& ref : refs) {
    auto str = [&](const char* key) {
      auto it = ref.find(key);
      return it != ref.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    std::string api_version = str("apiVersion");
    std::string version = api_version.substr(
        api_version.find('/') == std::string::npos ? 0 : api_version.find('/') + 1);
    if (version.empty()) {
      errors->push_back(Invalid(path + ".apiVersion", api_version, "version must not be empty"));
    }
    if (str("kind").empty()) {
      errors->push_back(Invalid(path + ".kind", str("kind"), "kind must not be empty"));
    }
    if (str("name").empty()) {
      errors->push_back(Invalid(path + ".name", str("name"), "name must not be empty"));
    }
    if (str("uid").empty()) {
      errors->push_back(Invalid(path + ".uid", str("uid"), "uid must not be empty"));
    }
    auto controller = ref.find("controller");
    if (controller != ref.end() && controller->is_boolean() && controller->get<bool>()) {
      controllers.push_back(str("kind") + "/" + str("name"));
    }
  }
  if (controllers.size() > 1) {
    std::string list;
    for (const auto& c : controllers) list += (list.empty() ? "" : ", ") + c;
    errors->push_back(Invalid(path, refs,
                              "Only one reference can have Controller set to true. Found \"true\" "
                              "in references for " +
                                  list));
  }
}

}  // namespace

std::string NormalizeObjectMeta(Json& meta, bool drop_malformed, const std::string& path,
                                std::vector<std::string>* pruned) {
  if (!meta.is_object()) return "metadata must be an object";
  for (auto it = meta.begin(); it != meta.end();) {
    const MetaField* field = FindMetaField(it.key());
    if (field == nullptr) {
      if (pruned != nullptr) pruned->push_back(path + "." + it.key());
      it = meta.erase(it);
      continue;
    }
    if (!HasType(it.value(), field->type)) {
      if (!drop_malformed) {
        return std::string("json: cannot unmarshal ") + GoJsonTypeName(it.value()) +
               " into Go struct field ObjectMeta." + path + "." + it.key() + " of type " +
               GoType(field->type);
      }
      it = meta.erase(it);
      continue;
    }
    if (it.value().is_null()) {
      it = meta.erase(it);
      continue;
    }
    ++it;
  }
  return "";
}

void ValidateObjectMeta(const Json& meta, bool requires_namespace, NameRule rule,
                        const std::string& path, std::vector<FieldError>* errors) {
  auto str = [&](const char* key) {
    auto it = meta.find(key);
    return it != meta.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto name_check = [&](const std::string& v, bool prefix) {
    switch (rule) {
      case NameRule::kDnsSubdomain: return NameIsDnsSubdomain(v, prefix);
      case NameRule::kDnsLabel: return NameIsDnsLabel(v, prefix);
      case NameRule::kDns1035Label: return NameIsDns1035Label(v, prefix);
      case NameRule::kPathSegment: return IsPathSegmentName(v);
    }
    return Messages{};
  };
  std::string generate_name = str("generateName");
  if (!generate_name.empty()) {
    for (const auto& m : name_check(generate_name, true)) {
      errors->push_back(Invalid(path + ".generateName", generate_name, m));
    }
  }
  std::string name = str("name");
  if (name.empty()) {
    errors->push_back(Required(path + ".name", "name or generateName is required"));
  } else {
    for (const auto& m : name_check(name, false)) {
      errors->push_back(Invalid(path + ".name", name, m));
    }
  }
  std::string ns = str("namespace");
  if (requires_namespace) {
    if (ns.empty()) {
      errors->push_back(Required(path + ".namespace"));
    } else {
      for (const auto& m : IsDns1123Label(ns)) {
        errors->push_back(Invalid(path + ".namespace", ns, m));
      }
    }
  } else if (!ns.empty()) {
    errors->push_back(Forbidden(path + ".namespace", "not allowed on this type"));
  }
  auto generation = meta.find("generation");
  if (generation != meta.end() && generation->is_number_integer() &&
      generation->get<long long>() < 0) {
    errors->push_back(
        Invalid(path + ".generation", *generation, "must be greater than or equal to 0"));
  }
  auto labels = meta.find("labels");
  if (labels != meta.end() && labels->is_object()) {
    for (const auto& [k, v] : labels->items()) {
      for (const auto& m : IsQualifiedName(k)) errors->push_back(Invalid(path + ".labels", k, m));
      std::string value = v.is_string() ? v.get<std::string>() : std::string();
      for (const auto& m : IsValidLabelValue(value)) {
        errors->push_back(Invalid(path + ".labels", value, m));
      }
    }
  }
  auto annotations = meta.find("annotations");
  if (annotations != meta.end() && annotations->is_object()) {
    size_t total = 0;
    for (const auto& [k, v] : annotations->items()) {
      std::string lower = k;
      std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
      for (const auto& m : IsQualifiedName(lower)) {
        errors->push_back(Invalid(path + ".annotations", k, m));
      }
      total += k.size() + (v.is_string() ? v.get_ref<const std::string&>().size() : 0);
    }
    if (total > 256 * 1024) {
      errors->push_back(TooLong(path + ".annotations", "", 256 * 1024));
    }
  }
  auto owners = meta.find("ownerReferences");
  if (owners != meta.end() && owners->is_array()) {
    ValidateOwnerReferences(*owners, path + ".ownerReferences", errors);
  }
  auto finalizers = meta.find("finalizers");
  if (finalizers != meta.end() && finalizers->is_array()) {
    for (const auto& f : *finalizers) {
      std::string value = f.is_string() ? f.get<std::string>() : std::string();
      for (const auto& m : IsQualifiedName(value)) {
        errors->push_back(Invalid(path + ".finalizers", value, m));
      }
    }
  }
}

void ValidateObjectMetaUpdate(const Json& new_meta, const Json& old_meta,
                              std::vector<FieldError>* errors) {
  if (!old_meta.contains("deletionTimestamp")) return;
  auto list = [](const Json& meta) {
    std::vector<std::string> out;
    auto it = meta.find("finalizers");
    if (it != meta.end() && it->is_array()) {
      for (const auto& f : *it) {
        if (f.is_string()) out.push_back(f.get<std::string>());
      }
    }
    return out;
  };
  std::vector<std::string> old_list = list(old_meta);
  for (const auto& f : list(new_meta)) {
    if (std::find(old_list.begin(), old_list.end(), f) == old_list.end()) {
      errors->push_back(Forbidden("metadata.finalizers",
                                  "no new finalizers can be added if the object is being deleted, "
                                  "found new finalizers []string{" +
                                      Json(f).dump() + "}"));
      return;
    }
  }
}

}  // namespace syncbus::kubesim
