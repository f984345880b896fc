#include "tests/kubesim/stored_object.h"

#include <algorithm>

namespace syncbus::kubesim {
namespace {

const Json* Find(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

std::string Str(const Json* v) {
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

// Field value of a dotted path ("status.phase", "type").
std::string DottedString(const Json& obj, const std::string& path) {
  const Json* cur = &obj;
  size_t start = 0;
  while (cur != nullptr && start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    cur = cur->is_object() ? Find(*cur, part.c_str()) : nullptr;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return Str(cur);
}

ObjectIndex BuildIndex(const ResourceType& type, const Json& object) {
  ObjectIndex idx;
  const Json* meta = Find(object, "metadata");
  static const Json kEmpty = Json::object();
  if (meta == nullptr || !meta->is_object()) meta = &kEmpty;
  idx.ns = Str(Find(*meta, "namespace"));
  idx.name = Str(Find(*meta, "name"));
  idx.uid = Str(Find(*meta, "uid"));
  idx.key = type.namespaced ? idx.ns + "/" + idx.name : idx.name;
  if (const Json* labels = Find(*meta, "labels"); labels != nullptr && labels->is_object()) {
    for (const auto& [k, v] : labels->items()) {
      idx.labels.emplace_back(k, v.is_string() ? v.get<std::string>() : std::string());
    }
    std::sort(idx.labels.begin(), idx.labels.end());
  }
  for (const auto& f : type.field_selectors) idx.fields.emplace_back(f, DottedString(object, f));
  if (const Json* owners = Find(*meta, "ownerReferences");
      owners != nullptr && owners->is_array()) {
    for (const auto& o : *owners) {
      if (o.is_object()) idx.owner_uids.push_back(Str(Find(o, "uid")));
    }
  }
  const Json* finalizers = Find(*meta, "finalizers");
  idx.has_finalizers = finalizers != nullptr && finalizers->is_array() && !finalizers->empty();
  idx.deleting = Find(*meta, "deletionTimestamp") != nullptr;
  return idx;
}

}  // namespace

ObjectPtr PreparedObject::Finish(uint64_t rv) const {
  auto out = std::make_shared<StoredObject>();
  std::string digits = std::to_string(rv);
  out->body.reserve(head.size() + digits.size() + tail.size());
  out->body.append(head).append(digits).append(tail);
  out->rv = rv;
  out->index = index;
  return out;
}

PreparedObject Prepare(const ResourceType& type, const Json& object) {
  PreparedObject p;
  p.index = BuildIndex(type, object);
  std::string& out = p.head;
  out.reserve(512);
  out += '{';
  bool first = true;
  bool placed = false;
  for (const auto& [key, value] : object.items()) {
    if (key == "apiVersion" || key == "kind") continue;
    std::string& dst = placed ? p.tail : p.head;
    if (!first) dst += ',';
    first = false;
    dst += Json(key).dump();
    dst += ':';
    if (key != "metadata" || !value.is_object()) {
      dst += value.dump();
      continue;
    }
    // metadata: insert "resourceVersion" at its sorted place and split there.
    out += '{';
    bool mfirst = true;
    for (const auto& [mkey, mvalue] : value.items()) {
      if (mkey == "resourceVersion") continue;
      if (!placed && mkey > "resourceVersion") {
        out += mfirst ? "" : ",";
        out += "\"resourceVersion\":\"";
        placed = true;
        p.tail += '"';
        mfirst = false;
      }
      std::string& mdst = placed ? p.tail : p.head;
      if (!mfirst) mdst += ',';
      mfirst = false;
      mdst += Json(mkey).dump();
      mdst += ':';
      mdst += mvalue.dump();
    }
    if (!placed) {
      out += mfirst ? "" : ",";
      out += "\"resourceVersion\":\"";
      placed = true;
      p.tail += '"';
    }
    p.tail += '}';
  }
  (placed ? p.tail : p.head) += '}';
  return p;
}

std::string FullJson(const ResourceType& type, const StoredObject& object) {
  std::string out;
  out.reserve(object.body.size() + type.api_version.size() + type.kind.size() + 32);
  out += "{\"apiVersion\":\"";
  out += type.api_version;
  out += "\",\"kind\":\"";
  out += type.kind;
  out += '"';
  if (object.body.size() > 2) {
    out += ',';
    out.append(object.body, 1, std::string::npos);
  } else {
    out += '}';
  }
  return out;
}

Json ParseStored(const ResourceType& type, const StoredObject& object) {
  Json out = Json::parse(object.body);
  out["apiVersion"] = type.api_version;
  out["kind"] = type.kind;
  return out;
}

ObjectPtr WithResourceVersion(const ResourceType& type, const StoredObject& object, uint64_t rv) {
  Json parsed = Json::parse(object.body);
  return Prepare(type, parsed).Finish(rv);
}

std::string FieldValue(const StoredObject& object, const std::string& field) {
  if (field == "metadata.name") return object.index.name;
  if (field == "metadata.namespace") return object.index.ns;
  for (const auto& [f, v] : object.index.fields) {
    if (f == field) return v;
  }
  return "";
}

}  // namespace syncbus::kubesim
