// Schema: a compiled structural OpenAPI v3 schema (a CRD version's openAPIV3Schema, or the
// hand-written schema of a built-in type) with the apiserver's three passes over an object:
// pruning of unknown fields, defaulting, and validation into field errors. It also carries the
// list and map semantics that server-side apply and strategic merge patch need.
// Immutable after Compile; shared freely between threads and servers.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "tests/kubesim/status_error.h"

namespace syncbus::kubesim {

class Schema {
 public:
  enum class Type { kAny, kObject, kArray, kString, kInteger, kNumber, kBoolean };
  enum class ListType { kAtomic, kSet, kMap };

  // Compiles an openAPIV3Schema (also accepts the x-kubernetes-patch-* extensions of built-in
  // OpenAPI documents). Errors name the unsupported construct.
  static Result<std::shared_ptr<const Schema>> Compile(const Json& openapi);

  // The schema of a value nobody described: any JSON, objects granular, lists atomic.
  static const Schema& Unknown();

  Type type() const { return type_; }
  bool preserve_unknown() const { return preserve_unknown_; }
  bool embedded_resource() const { return embedded_resource_; }
  bool map_atomic() const { return map_atomic_; }
  ListType list_type() const { return list_type_; }
  const std::vector<std::string>& list_map_keys() const { return list_map_keys_; }
  const std::string& patch_strategy() const { return patch_strategy_; }
  const std::string& patch_merge_key() const { return patch_merge_key_; }
  // The schema of field `name` of an object: a declared property, the additionalProperties
  // schema, or Unknown() for preserved/unknown content. `declared` tells which.
  const Schema& Field(const std::string& name, bool* declared = nullptr) const;
  const Schema& Items() const { return items_ ? *items_ : Unknown(); }
  bool has_additional() const { return additional_ != nullptr; }
  bool nullable() const { return nullable_; }
  const std::map<std::string, std::unique_ptr<Schema>>& properties() const { return properties_; }
  // The schema's `default`, if any.
  bool DefaultValue(Json* out) const {
    if (!default_) return false;
    *out = *default_;
    return true;
  }

  // Drops fields the schema does not know, recording their paths ("spec.foo"). `root`: the
  // resource root, whose apiVersion/kind/metadata are always kept.
  void Prune(Json& value, bool root, std::vector<std::string>* pruned) const;
  // Applies `default`s to absent (or null) fields, and drops nulls of non-nullable fields that
  // have no default.
  void Default(Json& value) const;
  // Drops what a Go struct with `omitempty` would not serialise: nulls, empty lists, and empty
  // maps (fields typed as maps, not structs). Built-in types and ObjectMeta round-trip this way.
  void OmitEmpty(Json& value) const;
  // Appends the errors a kube-apiserver 1.26 reports for `value` (paths from `path`).
  void Validate(const Json& value, const std::string& path, std::vector<FieldError>* errors) const;
  // A JSON-decoding type check for built-in types: the first mismatch as
  // "cannot unmarshal <json type> into Go struct field <path> of type <type>", or "".
  std::string DecodeCheck(const Json& value, const std::string& path) const;

 private:
  Schema() = default;
  static Result<std::unique_ptr<Schema>> CompileNode(const Json& openapi, int depth);
  void ValidateEmbedded(const Json& value, const std::string& path,
                        std::vector<FieldError>* errors) const;

  Type type_ = Type::kAny;
  bool nullable_ = false;
  bool preserve_unknown_ = false;
  bool embedded_resource_ = false;
  bool int_or_string_ = false;
  bool map_atomic_ = false;
  ListType list_type_ = ListType::kAtomic;
  std::vector<std::string> list_map_keys_;
  std::string patch_strategy_;
  std::string patch_merge_key_;
  std::map<std::string, std::unique_ptr<Schema>> properties_;
  std::unique_ptr<Schema> additional_;
  std::unique_ptr<Schema> items_;
  std::vector<std::string> required_;
  std::vector<Json> enum_;
  std::optional<Json> default_;
  std::string format_;
  std::optional<double> minimum_, maximum_, multiple_of_;
  bool exclusive_minimum_ = false, exclusive_maximum_ = false;
  std::optional<long long> min_length_, max_length_, min_items_, max_items_;
  std::optional<long long> min_properties_, max_properties_;
  bool unique_items_ = false;
  std::string pattern_;
  std::shared_ptr<const std::regex> pattern_re_;
  std::vector<std::unique_ptr<Schema>> all_of_, any_of_, one_of_;
  std::unique_ptr<Schema> not_;
};

}  // namespace syncbus::kubesim
