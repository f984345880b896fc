#include "tests/kubesim/schema.h"

#include <algorithm>
#include <cmath>

#include "common/base64.h"
#include "tests/kubesim/json_util.h"
#include "tests/kubesim/names.h"
#include "tests/kubesim/object_meta.h"

namespace syncbus::kubesim {
namespace {

std::string Child(const std::string& path, const std::string& name) {
  return path.empty() ? name : path + "." + name;
}

std::string Index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

bool IsIntegral(const Json& v) {
  if (v.is_number_integer()) return true;
  if (v.is_number_float()) {
    double d = v.get<double>();
    return std::isfinite(d) && std::floor(d) == d;
  }
  return false;
}

std::string FormatNumber(double d) {
  if (std::floor(d) == d && std::fabs(d) < 1e15) return std::to_string(static_cast<long long>(d));
  return Json(d).dump();
}

size_t RuneCount(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++n;
  }
  return n;
}

const char* TypeName(Schema::Type t) {
  switch (t) {
    case Schema::Type::kObject: return "object";
    case Schema::Type::kArray: return "array";
    case Schema::Type::kString: return "string";
    case Schema::Type::kInteger: return "integer";
    case Schema::Type::kNumber: return "number";
    case Schema::Type::kBoolean: return "boolean";
    case Schema::Type::kAny: return "";
  }
  return "";
}

bool MatchesType(Schema::Type t, const Json& v) {
  switch (t) {
    case Schema::Type::kAny: return true;
    case Schema::Type::kObject: return v.is_object();
    case Schema::Type::kArray: return v.is_array();
    case Schema::Type::kString: return v.is_string();
    case Schema::Type::kInteger: return IsIntegral(v);
    case Schema::Type::kNumber: return v.is_number();
    case Schema::Type::kBoolean: return v.is_boolean();
  }
  return false;
}

Result<std::optional<long long>> OptInt(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<long long>();
  if (!it->is_number_integer()) return InvalidArgument(std::string(key) + " must be an integer");
  return std::optional<long long>(it->get<long long>());
}

}  // namespace

const Schema& Schema::Unknown() {
  static const Schema* unknown = [] {
    auto* s = new Schema();
    s->preserve_unknown_ = true;
    return s;
  }();
  return *unknown;
}

Result<std::shared_ptr<const Schema>> Schema::Compile(const Json& openapi) {
  auto node = CompileNode(openapi, 0);
  if (!node.ok()) return node.status();
  return std::shared_ptr<const Schema>(std::move(node).value());
}

Result<std::unique_ptr<Schema>> Schema::CompileNode(const Json& j, int depth) {
  if (depth > 64) return InvalidArgument("schema nested too deeply");
  if (!j.is_object()) return InvalidArgument("schema must be an object");
  std::unique_ptr<Schema> s(new Schema());
  auto str = [&](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto flag = [&](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_boolean() && it->get<bool>();
  };
  std::string type = str("type");
  if (type.empty())
    s->type_ = Type::kAny;
  else if (type == "object")
    s->type_ = Type::kObject;
  else if (type == "array")
    s->type_ = Type::kArray;
  else if (type == "string")
    s->type_ = Type::kString;
  else if (type == "integer")
    s->type_ = Type::kInteger;
  else if (type == "number")
    s->type_ = Type::kNumber;
  else if (type == "boolean")
    s->type_ = Type::kBoolean;
  else
    return InvalidArgument("unsupported schema type " + type);
  s->nullable_ = flag("nullable");
  s->preserve_unknown_ = flag("x-kubernetes-preserve-unknown-fields");
  s->embedded_resource_ = flag("x-kubernetes-embedded-resource");
  s->int_or_string_ = flag("x-kubernetes-int-or-string");
  s->map_atomic_ = str("x-kubernetes-map-type") == "atomic";
  std::string list_type = str("x-kubernetes-list-type");
  if (list_type == "set")
    s->list_type_ = ListType::kSet;
  else if (list_type == "map")
    s->list_type_ = ListType::kMap;
  auto keys = j.find("x-kubernetes-list-map-keys");
  if (keys != j.end() && keys->is_array()) {
    for (const auto& k : *keys) {
      if (k.is_string()) s->list_map_keys_.push_back(k.get<std::string>());
    }
  }
  s->patch_strategy_ = str("x-kubernetes-patch-strategy");
  s->patch_merge_key_ = str("x-kubernetes-patch-merge-key");
  // A built-in list merged by key in strategic merge patch is associative for apply too.
  if (list_type.empty() && !s->patch_merge_key_.empty() &&
      s->patch_strategy_.find("merge") != std::string::npos) {
    s->list_type_ = ListType::kMap;
    s->list_map_keys_ = {s->patch_merge_key_};
  }
  auto props = j.find("properties");
  if (props != j.end() && props->is_object()) {
    for (const auto& [name, sub] : props->items()) {
      auto child = CompileNode(sub, depth + 1);
      if (!child.ok()) return child.status();
      s->properties_[name] = std::move(child).value();
    }
  }
  auto additional = j.find("additionalProperties");
  if (additional != j.end()) {
    if (additional->is_object()) {
      auto child = CompileNode(*additional, depth + 1);
      if (!child.ok()) return child.status();
      s->additional_ = std::move(child).value();
    } else if (additional->is_boolean() && additional->get<bool>()) {
      s->preserve_unknown_ = true;
    }
  }
  auto items = j.find("items");
  if (items != j.end() && items->is_object()) {
    auto child = CompileNode(*items, depth + 1);
    if (!child.ok()) return child.status();
    s->items_ = std::move(child).value();
  }
  auto required = j.find("required");
  if (required != j.end() && required->is_array()) {
    for (const auto& r : *required) {
      if (r.is_string()) s->required_.push_back(r.get<std::string>());
    }
  }
  auto enumeration = j.find("enum");
  if (enumeration != j.end() && enumeration->is_array()) {
    s->enum_.assign(enumeration->begin(), enumeration->end());
  }
  auto def = j.find("default");
  if (def != j.end()) s->default_ = *def;
  s->format_ = str("format");
  auto number = [&](const char* key) -> std::optional<double> {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
  };
  s->minimum_ = number("minimum");
  s->maximum_ = number("maximum");
  s->multiple_of_ = number("multipleOf");
  s->exclusive_minimum_ = flag("exclusiveMinimum");
  s->exclusive_maximum_ = flag("exclusiveMaximum");
  for (auto [key, field] :
       {std::pair{"minLength", &s->min_length_}, std::pair{"maxLength", &s->max_length_},
        std::pair{"minItems", &s->min_items_}, std::pair{"maxItems", &s->max_items_},
        std::pair{"minProperties", &s->min_properties_},
        std::pair{"maxProperties", &s->max_properties_}}) {
    auto v = OptInt(j, key);
    if (!v.ok()) return v.status();
    *field = *v;
  }
  s->unique_items_ = flag("uniqueItems");
  s->pattern_ = str("pattern");
  if (!s->pattern_.empty()) {
    try {
      s->pattern_re_ = std::make_shared<const std::regex>(s->pattern_, std::regex::ECMAScript);
    } catch (const std::regex_error&) {
      return InvalidArgument("unsupported pattern " + s->pattern_);
    }
  }
  for (auto [key, list] : {std::pair{"allOf", &s->all_of_}, std::pair{"anyOf", &s->any_of_},
                           std::pair{"oneOf", &s->one_of_}}) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_array()) continue;
    for (const auto& sub : *it) {
      auto child = CompileNode(sub, depth + 1);
      if (!child.ok()) return child.status();
      list->push_back(std::move(child).value());
    }
  }
  auto negated = j.find("not");
  if (negated != j.end() && negated->is_object()) {
    auto child = CompileNode(*negated, depth + 1);
    if (!child.ok()) return child.status();
    s->not_ = std::move(child).value();
  }
  return s;
}

const Schema& Schema::Field(const std::string& name, bool* declared) const {
  auto it = properties_.find(name);
  if (it != properties_.end()) {
    if (declared != nullptr) *declared = true;
    return *it->second;
  }
  if (declared != nullptr) *declared = false;
  if (additional_) return *additional_;
  return Unknown();
}

namespace {

void PruneAt(const Schema& s, Json& v, const std::string& path, bool root,
             std::vector<std::string>* pruned);

bool IsMetaField(const std::string& key) {
  return key == "apiVersion" || key == "kind" || key == "metadata";
}

}  // namespace

void Schema::Prune(Json& value, bool root, std::vector<std::string>* pruned) const {
  PruneAt(*this, value, "", root, pruned);
}

namespace {

void PruneAt(const Schema& s, Json& v, const std::string& path, bool root,
             std::vector<std::string>* pruned) {
  if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) PruneAt(s.Items(), v[i], Index(path, i), false, pruned);
    return;
  }
  if (!v.is_object()) return;
  bool resource = root || s.embedded_resource();
  if (s.embedded_resource() && !root) {
    auto meta = v.find("metadata");
    if (meta != v.end() && meta->is_object()) {
      NormalizeObjectMeta(*meta, false, Child(path, "metadata"), pruned);
    }
  }
  for (auto it = v.begin(); it != v.end();) {
    const std::string& key = it.key();
    if (resource && IsMetaField(key) &&
        ((key == "metadata" && it->is_object()) || (key != "metadata" && it->is_string()))) {
      ++it;
      continue;
    }
    bool declared = false;
    const Schema& child = s.Field(key, &declared);
    if (!declared && !s.has_additional()) {
      if (!s.preserve_unknown()) {
        if (pruned != nullptr) pruned->push_back(Child(path, key));
        it = v.erase(it);
        continue;
      }
      ++it;
      continue;
    }
    PruneAt(child, it.value(), Child(path, key), false, pruned);
    ++it;
  }
}

void DefaultAt(const Schema& s, Json& v);

}  // namespace

void Schema::Default(Json& value) const {
  DefaultAt(*this, value);
}

namespace {

bool HasDefault(const Schema& s, Json* out);

void DefaultAt(const Schema& s, Json& v) {
  if (v.is_array()) {
    const Schema& items = s.Items();
    for (auto& item : v) {
      Json def;
      if (item.is_null() && HasDefault(items, &def)) item = def;
      DefaultAt(items, item);
    }
    return;
  }
  if (!v.is_object()) return;
  for (const auto& [name, prop] : s.properties()) {
    Json def;
    bool has_default = HasDefault(*prop, &def);
    auto it = v.find(name);
    if (it == v.end()) {
      if (has_default) v[name] = def;
    } else if (it->is_null() && has_default && !prop->nullable()) {
      *it = def;
    }
  }
  for (auto it = v.begin(); it != v.end();) {
    bool declared = false;
    const Schema& child = s.Field(it.key(), &declared);
    if (it->is_null() && &child != &Schema::Unknown() && !child.nullable()) {
      Json def;
      if (!HasDefault(child, &def)) {
        it = v.erase(it);
        continue;
      }
    }
    DefaultAt(child, it.value());
    ++it;
  }
}

bool HasDefault(const Schema& s, Json* out) {
  return s.DefaultValue(out);
}

}  // namespace

void Schema::OmitEmpty(Json& value) const {
  if (value.is_array()) {
    const Schema& items = Items();
    for (auto& item : value) items.OmitEmpty(item);
    return;
  }
  if (!value.is_object() || (preserve_unknown_ && properties_.empty() && !additional_)) return;
  for (auto it = value.begin(); it != value.end();) {
    bool declared = false;
    const Schema& child = Field(it.key(), &declared);
    child.OmitEmpty(it.value());
    const Json& v = it.value();
    bool map_typed = child.additional_ != nullptr && child.properties_.empty();
    if (v.is_null() || (v.is_array() && v.empty()) || (v.is_object() && v.empty() && map_typed)) {
      it = value.erase(it);
    } else {
      ++it;
    }
  }
}

void Schema::Validate(const Json& value, const std::string& path,
                      std::vector<FieldError>* errors) const {
  if (value.is_null()) {
    if (nullable_ || type_ == Type::kAny) return;
    std::string name = path.empty() ? "body" : path;
    errors->push_back(TypeInvalid(
        path, "null", name + " in body must be of type " + TypeName(type_) + ": \"null\""));
    return;
  }
  if (int_or_string_) {
    if (!IsIntegral(value) && !value.is_string()) {
      errors->push_back(TypeInvalid(
          path, JsonTypeName(value),
          path + " in body must be of type integer,string: \"" + JsonTypeName(value) + "\""));
      return;
    }
  } else if (!MatchesType(type_, value)) {
    errors->push_back(TypeInvalid(path, JsonTypeName(value),
                                  path + " in body must be of type " + TypeName(type_) + ": \"" +
                                      JsonTypeName(value) + "\""));
    return;
  }
  if (!enum_.empty() && std::find(enum_.begin(), enum_.end(), value) == enum_.end()) {
    std::vector<std::string> supported;
    for (const auto& e : enum_)
      supported.push_back(e.is_string() ? e.get<std::string>() : e.dump());
    errors->push_back(NotSupported(path, value, supported));
  }
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    if (format_ == "date-time" && !IsDateTime(text)) {
      errors->push_back(
          TypeInvalid(path, value, path + " in body must be of type date-time: " + value.dump()));
    } else if (format_ == "date" && !IsDate(text)) {
      errors->push_back(
          TypeInvalid(path, value, path + " in body must be of type date: " + value.dump()));
    } else if (format_ == "byte") {
      if (!DecodeBase64(text, kGoStdBase64)) {
        errors->push_back(
            TypeInvalid(path, value, path + " in body must be of type byte: " + value.dump()));
      }
    }
    size_t runes = RuneCount(text);
    if (max_length_ && static_cast<long long>(runes) > *max_length_) {
      errors->push_back(TooLong(path, value, *max_length_));
    }
    if (min_length_ && static_cast<long long>(runes) < *min_length_) {
      errors->push_back(Invalid(
          path, value,
          path + " in body should be at least " + std::to_string(*min_length_) + " chars long"));
    }
    if (pattern_re_ && !std::regex_search(text, *pattern_re_)) {
      errors->push_back(Invalid(path, value, path + " in body should match '" + pattern_ + "'"));
    }
  }
  if (value.is_number()) {
    double d = value.get<double>();
    if (minimum_ && (exclusive_minimum_ ? d <= *minimum_ : d < *minimum_)) {
      errors->push_back(Invalid(path, value,
                                path + " in body should be greater than " +
                                    (exclusive_minimum_ ? "" : "or equal to ") +
                                    FormatNumber(*minimum_)));
    }
    if (maximum_ && (exclusive_maximum_ ? d >= *maximum_ : d > *maximum_)) {
      errors->push_back(Invalid(path, value,
                                path + " in body should be less than " +
                                    (exclusive_maximum_ ? "" : "or equal to ") +
                                    FormatNumber(*maximum_)));
    }
    if (multiple_of_ && *multiple_of_ != 0 && std::fmod(d, *multiple_of_) != 0) {
      errors->push_back(Invalid(
          path, value, path + " in body should be a multiple of " + FormatNumber(*multiple_of_)));
    }
  }
  if (value.is_array()) {
    long long n = static_cast<long long>(value.size());
    if (max_items_ && n > *max_items_) errors->push_back(TooMany(path, n, *max_items_));
    if (min_items_ && n < *min_items_) {
      errors->push_back(Invalid(
          path, n,
          path + " in body should have at least " + std::to_string(*min_items_) + " items"));
    }
    const Schema& items = Items();
    for (size_t i = 0; i < value.size(); ++i) items.Validate(value[i], Index(path, i), errors);
    if (unique_items_ || list_type_ == ListType::kSet) {
      for (size_t i = 0; i < value.size(); ++i) {
        for (size_t k = 0; k < i; ++k) {
          if (value[i] == value[k]) {
            errors->push_back(Duplicate(Index(path, i), value[i]));
            break;
          }
        }
      }
    } else if (list_type_ == ListType::kMap && !list_map_keys_.empty()) {
      std::vector<Json> seen;
      for (size_t i = 0; i < value.size(); ++i) {
        if (!value[i].is_object()) continue;
        Json key = Json::object();
        for (const auto& k : list_map_keys_) {
          auto it = value[i].find(k);
          if (it != value[i].end()) key[k] = *it;
        }
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
          errors->push_back(Duplicate(Index(path, i), key));
        } else {
          seen.push_back(std::move(key));
        }
      }
    }
  }
  if (value.is_object()) {
    long long n = static_cast<long long>(value.size());
    if (max_properties_ && n > *max_properties_) {
      errors->push_back(TooMany(path, n, *max_properties_));
    }
    if (min_properties_ && n < *min_properties_) {
      errors->push_back(Invalid(path, n,
                                path + " in body should have at least " +
                                    std::to_string(*min_properties_) + " properties"));
    }
    for (const auto& [key, child] : value.items()) {
      auto prop = properties_.find(key);
      if (prop != properties_.end()) {
        prop->second->Validate(child, Child(path, key), errors);
      } else if (additional_) {
        additional_->Validate(child, Child(path, key), errors);
      }
    }
    for (const auto& r : required_) {
      if (!value.contains(r)) errors->push_back(Required(Child(path, r)));
    }
    if (embedded_resource_) ValidateEmbedded(value, path, errors);
  }
  for (const auto& sub : all_of_) sub->Validate(value, path, errors);
  if (!any_of_.empty()) {
    bool any = false;
    for (const auto& sub : any_of_) {
      std::vector<FieldError> tmp;
      sub->Validate(value, path, &tmp);
      if (tmp.empty()) {
        any = true;
        break;
      }
    }
    if (!any) {
      errors->push_back(
          Invalid(path, value, path + " in body must validate at least one schema (anyOf)"));
    }
  }
  if (!one_of_.empty()) {
    int passing = 0;
    for (const auto& sub : one_of_) {
      std::vector<FieldError> tmp;
      sub->Validate(value, path, &tmp);
      if (tmp.empty()) ++passing;
    }
    if (passing != 1) {
      errors->push_back(
          Invalid(path, value, path + " in body must validate one and only one schema (oneOf)"));
    }
  }
  if (not_) {
    std::vector<FieldError> tmp;
    not_->Validate(value, path, &tmp);
    if (tmp.empty()) {
      errors->push_back(Invalid(path, value, path + " in body must not validate the schema (not)"));
    }
  }
}

// kube-apiserver's detail for an embedded resource without apiVersion or kind.
constexpr char kMustNotBeEmpty[] = "must not be empty";

void Schema::ValidateEmbedded(const Json& value, const std::string& path,
                              std::vector<FieldError>* errors) const {
  if (!value.contains("apiVersion"))
    errors->push_back(Required(Child(path, "apiVersion"), kMustNotBeEmpty));
  if (!value.contains("kind")) errors->push_back(Required(Child(path, "kind"), kMustNotBeEmpty));
  for (const auto& [key, v] : value.items()) {
    if (key == "apiVersion") {
      if (!v.is_string()) {
        errors->push_back(Invalid(Child(path, key), v, "must be a string"));
      } else if (v.get_ref<const std::string&>().empty()) {
        errors->push_back(Required(Child(path, key), kMustNotBeEmpty));
      } else if (std::count(v.get_ref<const std::string&>().begin(),
                            v.get_ref<const std::string&>().end(), '/') > 1) {
        errors->push_back(Invalid(Child(path, key), v,
                                  "unexpected GroupVersion string: " + v.get<std::string>()));
      }
    } else if (key == "kind") {
      if (!v.is_string()) {
        errors->push_back(Invalid(Child(path, key), v, "must be a string"));
      } else if (v.get_ref<const std::string&>().empty()) {
        errors->push_back(Required(Child(path, key), kMustNotBeEmpty));
      } else {
        std::string lower = v.get<std::string>();
        std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
        Messages errs = IsDns1035Label(lower);
        if (!errs.empty()) {
          std::string joined;
          for (const auto& e : errs) joined += (joined.empty() ? "" : ",") + e;
          errors->push_back(Invalid(Child(path, key), v,
                                    "may have mixed case, but should otherwise match: " + joined));
        }
      }
    } else if (key == "metadata") {
      Json meta = v;
      std::string err = NormalizeObjectMeta(meta, false, Child(path, key), nullptr);
      if (!err.empty()) {
        errors->push_back(Invalid(Child(path, key), v, err));
        continue;
      }
      if (!meta.contains("name") || meta["name"] == "") meta["name"] = "fakename";
      bool has_ns = meta.contains("namespace") && meta["namespace"] != "";
      ValidateObjectMeta(meta, has_ns, NameRule::kPathSegment, Child(path, key), errors);
    }
  }
}

std::string Schema::DecodeCheck(const Json& value, const std::string& path) const {
  if (value.is_null() || type_ == Type::kAny || int_or_string_) {
    if (int_or_string_ && !value.is_null() && !IsIntegral(value) && !value.is_string()) {
      return std::string("json: cannot unmarshal ") + GoJsonTypeName(value) +
             " into Go struct field " + path + " of type intstr.IntOrString";
    }
    if (type_ == Type::kAny && !value.is_null() && (value.is_object() || value.is_array())) {
      // fall through to check known children
    } else {
      return "";
    }
  }
  if (!MatchesType(type_, value) && type_ != Type::kAny) {
    const char* go_type = type_ == Type::kInteger   ? "int64"
                          : type_ == Type::kNumber  ? "float64"
                          : type_ == Type::kBoolean ? "bool"
                          : type_ == Type::kString  ? "string"
                          : type_ == Type::kArray   ? "[]interface {}"
                                                    : "map[string]interface {}";
    return std::string("json: cannot unmarshal ") + GoJsonTypeName(value) +
           (value.is_number() ? " " + value.dump() : std::string()) + " into Go struct field " +
           path + " of type " + go_type;
  }
  if (value.is_array()) {
    const Schema& items = Items();
    for (const auto& item : value) {
      std::string err = items.DecodeCheck(item, path);
      if (!err.empty()) return err;
    }
  } else if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      bool declared = false;
      const Schema& sub = Field(key, &declared);
      if (!declared && !additional_) continue;
      std::string err = sub.DecodeCheck(child, path + "." + key);
      if (!err.empty()) return err;
    }
  }
  if (value.is_string() && format_ == "date-time" && !IsDateTime(value.get<std::string>())) {
    return "parsing time " + value.dump() + " as \"2006-01-02T15:04:05Z07:00\": cannot parse " +
           value.dump() + " as \"2006\"";
  }
  return "";
}

}  // namespace syncbus::kubesim
