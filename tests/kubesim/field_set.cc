#include "tests/kubesim/field_set.h"

namespace syncbus::kubesim {

const FieldSet* FieldSet::Find(const std::string& pe) const {
  auto it = children_.find(pe);
  return it == children_.end() ? nullptr : &it->second;
}

void FieldSet::Insert(const std::vector<std::string>& path) {
  FieldSet* node = this;
  for (const auto& pe : path) node = &node->children_[pe];
  node->member_ = true;
}

void FieldSet::Union(const FieldSet& other) {
  member_ = member_ || other.member_;
  for (const auto& [pe, child] : other.children_) children_[pe].Union(child);
}

FieldSet FieldSet::Difference(const FieldSet& other) const {
  FieldSet out;
  out.member_ = member_ && !other.member_;
  for (const auto& [pe, child] : children_) {
    const FieldSet* o = other.Find(pe);
    FieldSet diff = o == nullptr ? child : child.Difference(*o);
    if (!diff.empty()) out.children_.emplace(pe, std::move(diff));
  }
  return out;
}

FieldSet FieldSet::Intersection(const FieldSet& other) const {
  FieldSet out;
  out.member_ = member_ && other.member_;
  for (const auto& [pe, child] : children_) {
    const FieldSet* o = other.Find(pe);
    if (o == nullptr) continue;
    FieldSet both = child.Intersection(*o);
    if (!both.empty()) out.children_.emplace(pe, std::move(both));
  }
  return out;
}

void FieldSet::ForEachMember(const std::function<void(const std::vector<std::string>&)>& fn) const {
  std::vector<std::string> prefix;
  ForEachMemberAt(prefix, fn);
}

void FieldSet::ForEachMemberAt(
    std::vector<std::string>& prefix,
    const std::function<void(const std::vector<std::string>&)>& fn) const {
  if (member_) fn(prefix);
  for (const auto& [pe, child] : children_) {
    prefix.push_back(pe);
    child.ForEachMemberAt(prefix, fn);
    prefix.pop_back();
  }
}

Json FieldSet::ToJson() const {
  Json out = Json::object();
  if (member_ && !children_.empty()) out["."] = Json::object();
  for (const auto& [pe, child] : children_) out[pe] = child.ToJson();
  return out;
}

FieldSet FieldSet::FromJson(const Json& fields) {
  FieldSet out;
  if (!fields.is_object()) return out;
  for (const auto& [key, value] : fields.items()) {
    if (key == ".") {
      out.member_ = true;
      continue;
    }
    FieldSet child = FromJson(value);
    if (value.is_object() && value.empty()) child.member_ = true;
    out.children_.emplace(key, std::move(child));
  }
  return out;
}

std::string FieldElement(const std::string& name) {
  return "f:" + name;
}
std::string KeyElement(const Json& key_fields) {
  return "k:" + key_fields.dump();
}
std::string ValueElement(const Json& value) {
  return "v:" + value.dump();
}
std::string IndexElement(size_t index) {
  return "i:" + std::to_string(index);
}

std::string PathString(const std::vector<std::string>& path) {
  std::string out;
  for (const auto& pe : path) {
    if (pe.size() < 2) continue;
    std::string body = pe.substr(2);
    switch (pe[0]) {
      case 'f': out += "." + body; break;
      case 'k': {
        Json key = Json::parse(body, nullptr, false);
        std::string inner;
        if (key.is_object()) {
          for (const auto& [k, v] : key.items()) {
            inner += (inner.empty() ? "" : ",") + k + "=" + v.dump();
          }
        }
        out += "[" + inner + "]";
        break;
      }
      case 'v': out += "[=" + body + "]"; break;
      case 'i': out += "[" + body + "]"; break;
      default: break;
    }
  }
  return out;
}

}  // namespace syncbus::kubesim
