// FieldSet: a set of field paths in the managedFields "FieldsV1" shape — a tree whose edges are
// path elements spelled as fieldsV1 keys ("f:name", "k:{\"name\":\"a\"}", "v:\"x\"", "i:0") and
// whose nodes may themselves be members (written as "." when they also have children).
// Value type; thread-compatible.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/json.h"

namespace syncbus::kubesim {

class FieldSet {
 public:
  bool empty() const { return !member_ && children_.empty(); }
  bool member() const { return member_; }
  void set_member(bool m) { member_ = m; }
  const std::map<std::string, FieldSet>& children() const { return children_; }

  // The child node for path element `pe`, created when absent.
  FieldSet& Child(const std::string& pe) { return children_[pe]; }
  const FieldSet* Find(const std::string& pe) const;
  void Insert(const std::vector<std::string>& path);
  void Erase(const std::string& pe) { children_.erase(pe); }

  void Union(const FieldSet& other);
  // Exact-path set operations (a member stays unless the same path is a member of `other`).
  FieldSet Difference(const FieldSet& other) const;
  FieldSet Intersection(const FieldSet& other) const;

  // Every member path, depth first.
  void ForEachMember(const std::function<void(const std::vector<std::string>&)>& fn) const;

  // fieldsV1 JSON and back (unknown shapes are ignored).
  Json ToJson() const;
  static FieldSet FromJson(const Json& fields);

  bool operator==(const FieldSet& other) const = default;

 private:
  void ForEachMemberAt(std::vector<std::string>& prefix,
                       const std::function<void(const std::vector<std::string>&)>& fn) const;

  bool member_ = false;
  std::map<std::string, FieldSet> children_;
};

// Path elements.
std::string FieldElement(const std::string& name);  // "f:name"
std::string KeyElement(const Json& key_fields);     // "k:{...}" (sorted keys)
std::string ValueElement(const Json& value);        // "v:<json>"
std::string IndexElement(size_t index);             // "i:3"
// ".data.key", ".spec.containers[name=\"a\"].image", ".metadata.finalizers[=\"x\"]".
std::string PathString(const std::vector<std::string>& path);

}  // namespace syncbus::kubesim
