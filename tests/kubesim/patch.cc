#include "tests/kubesim/patch.h"

#include <algorithm>
#include <string>
#include <vector>

namespace syncbus::kubesim {
namespace {

StatusError PatchNotApplied(const std::string& detail) {
  StatusError e;
  e.code = 422;
  e.reason = "Invalid";
  e.message = "the server rejected our request due to an error in our request";
  e.causes.push_back({"UnexpectedServerResponse", detail, ""});
  return e;
}

Outcome<Json> ParsePatch(std::string_view text) {
  Json patch = Json::parse(text, nullptr, false);
  if (patch.is_discarded()) return BadRequest("invalid JSON in the patch body");
  return patch;
}

// --- RFC 6901 pointers -------------------------------------------------------------------------

bool SplitPointer(const std::string& pointer, std::vector<std::string>* parts) {
  parts->clear();
  if (pointer.empty()) return true;
  if (pointer[0] != '/') return false;
  std::string cur;
  for (size_t i = 1; i <= pointer.size(); ++i) {
    if (i == pointer.size() || pointer[i] == '/') {
      parts->push_back(cur);
      cur.clear();
    } else if (pointer[i] == '~' && i + 1 < pointer.size() &&
               (pointer[i + 1] == '0' || pointer[i + 1] == '1')) {
      cur += pointer[i + 1] == '0' ? '~' : '/';
      ++i;
    } else {
      cur += pointer[i];
    }
  }
  return true;
}

bool ArrayIndex(const std::string& token, size_t size, bool allow_end, size_t* out) {
  if (allow_end && token == "-") {
    *out = size;
    return true;
  }
  if (token.empty() || (token.size() > 1 && token[0] == '0')) return false;
  for (char c : token) {
    if (c < '0' || c > '9') return false;
  }
  *out = std::stoul(token);
  return allow_end ? *out <= size : *out < size;
}

// The container holding the last token of `parts`, or null.
Json* Parent(Json& doc, const std::vector<std::string>& parts) {
  Json* cur = &doc;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (cur->is_object()) {
      auto it = cur->find(parts[i]);
      if (it == cur->end()) return nullptr;
      cur = &*it;
    } else if (cur->is_array()) {
      size_t idx = 0;
      if (!ArrayIndex(parts[i], cur->size(), false, &idx)) return nullptr;
      cur = &(*cur)[idx];
    } else {
      return nullptr;
    }
  }
  return cur;
}

Json* Resolve(Json& doc, const std::vector<std::string>& parts) {
  if (parts.empty()) return &doc;
  Json* parent = Parent(doc, parts);
  if (parent == nullptr) return nullptr;
  if (parent->is_object()) {
    auto it = parent->find(parts.back());
    return it == parent->end() ? nullptr : &*it;
  }
  if (parent->is_array()) {
    size_t idx = 0;
    if (!ArrayIndex(parts.back(), parent->size(), false, &idx)) return nullptr;
    return &(*parent)[idx];
  }
  return nullptr;
}

bool AddAt(Json& doc, const std::vector<std::string>& parts, Json value) {
  if (parts.empty()) {
    doc = std::move(value);
    return true;
  }
  Json* parent = Parent(doc, parts);
  if (parent == nullptr) return false;
  if (parent->is_object()) {
    (*parent)[parts.back()] = std::move(value);
    return true;
  }
  if (parent->is_array()) {
    size_t idx = 0;
    if (!ArrayIndex(parts.back(), parent->size(), true, &idx)) return false;
    parent->insert(parent->begin() + static_cast<long>(idx), std::move(value));
    return true;
  }
  return false;
}

bool RemoveAt(Json& doc, const std::vector<std::string>& parts, Json* removed) {
  if (parts.empty()) return false;
  Json* parent = Parent(doc, parts);
  if (parent == nullptr) return false;
  if (parent->is_object()) {
    auto it = parent->find(parts.back());
    if (it == parent->end()) return false;
    if (removed != nullptr) *removed = std::move(*it);
    parent->erase(it);
    return true;
  }
  if (parent->is_array()) {
    size_t idx = 0;
    if (!ArrayIndex(parts.back(), parent->size(), false, &idx)) return false;
    if (removed != nullptr) *removed = std::move((*parent)[idx]);
    parent->erase(idx);
    return true;
  }
  return false;
}

std::string Missing(const std::string& op, const std::string& path) {
  return op + " operation does not apply: doc is missing path: " + Json(path).dump() +
         ": missing value";
}

// --- strategic merge patch ---------------------------------------------------------------------

constexpr char kPatch[] = "$patch";
constexpr char kRetainKeys[] = "$retainKeys";
constexpr char kDeleteFromPrimitiveList[] = "$deleteFromPrimitiveList/";
constexpr char kSetElementOrder[] = "$setElementOrder/";

Outcome<Json> StrategicMap(const Json& original, const Json& patch, const Schema& schema);

bool Strategy(const Schema& s, const char* what) {
  return s.patch_strategy().find(what) != std::string::npos;
}

Outcome<Json> StrategicList(const Json& original, const Json& patch, const Schema& schema) {
  // A {"$patch": "replace"} element replaces the whole list with the other elements.
  bool replace = false;
  Json items = Json::array();
  for (const auto& item : patch) {
    if (item.is_object() && item.contains(kPatch)) {
      std::string directive = item[kPatch].is_string() ? item[kPatch].get<std::string>() : "";
      if (directive == "replace" && item.size() == 1) {
        replace = true;
        continue;
      }
    }
    items.push_back(item);
  }
  if (replace) {
    Json out = Json::array();
    for (auto& item : items) {
      if (item.is_object()) item.erase(kPatch);
      out.push_back(item);
    }
    return out;
  }
  const std::string& key = schema.patch_merge_key();
  const Schema& item_schema = schema.Items();
  Json out = original.is_array() ? original : Json::array();
  if (key.empty()) {
    // Primitive list with the merge strategy: union, keeping the original order.
    for (const auto& item : items) {
      if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
    }
    return out;
  }
  for (const auto& item : items) {
    if (!item.is_object() || !item.contains(key)) {
      return BadRequest("map: " + item.dump() + " does not contain declared merge key: " + key);
    }
    auto match = std::find_if(out.begin(), out.end(), [&](const Json& o) {
      return o.is_object() && o.contains(key) && o[key] == item[key];
    });
    std::string directive =
        item.contains(kPatch) && item[kPatch].is_string() ? item[kPatch].get<std::string>() : "";
    if (directive == "delete") {
      if (match != out.end()) out.erase(match);
      continue;
    }
    if (match != out.end()) {
      auto merged = StrategicMap(*match, item, item_schema);
      if (!merged.ok()) return merged;
      *match = std::move(merged).value();
    } else {
      auto merged = StrategicMap(Json::object(), item, item_schema);
      if (!merged.ok()) return merged;
      out.push_back(std::move(merged).value());
    }
  }
  return out;
}

Outcome<Json> StrategicMap(const Json& original, const Json& patch, const Schema& schema) {
  std::string directive =
      patch.contains(kPatch) && patch[kPatch].is_string() ? patch[kPatch].get<std::string>() : "";
  if (directive == "delete") return Json(nullptr);
  if (directive == "replace") {
    Json out = patch;
    out.erase(kPatch);
    return out;
  }
  if (!directive.empty() && directive != "merge") {
    return BadRequest("Unknown patch type: " + directive);
  }
  Json out = original.is_object() ? original : Json::object();
  auto retain = patch.find(kRetainKeys);
  if (retain != patch.end() && retain->is_array()) {
    for (auto it = out.begin(); it != out.end();) {
      if (std::find(retain->begin(), retain->end(), Json(it.key())) == retain->end()) {
        it = out.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& [key, value] : patch.items()) {
    if (key == kPatch || key == kRetainKeys || key.rfind(kSetElementOrder, 0) == 0) continue;
    if (key.rfind(kDeleteFromPrimitiveList, 0) == 0) {
      std::string field = key.substr(sizeof(kDeleteFromPrimitiveList) - 1);
      auto list = out.find(field);
      if (list != out.end() && list->is_array() && value.is_array()) {
        Json kept = Json::array();
        for (const auto& v : *list) {
          if (std::find(value.begin(), value.end(), v) == value.end()) kept.push_back(v);
        }
        *list = std::move(kept);
      }
      continue;
    }
    if (value.is_null()) {
      out.erase(key);
      continue;
    }
    const Schema& child = schema.Field(key);
    auto existing = out.find(key);
    if (value.is_object() && !Strategy(child, "replace")) {
      auto merged = StrategicMap(existing != out.end() ? *existing : Json::object(), value, child);
      if (!merged.ok()) return merged;
      if (merged->is_null()) {
        out.erase(key);
      } else {
        out[key] = std::move(merged).value();
      }
    } else if (value.is_array() && Strategy(child, "merge")) {
      auto merged = StrategicList(existing != out.end() ? *existing : Json::array(), value, child);
      if (!merged.ok()) return merged;
      out[key] = std::move(merged).value();
    } else if (value.is_array()) {
      Json list = value;
      for (auto& item : list) {
        if (item.is_object()) item.erase(kPatch);
      }
      out[key] = std::move(list);
    } else {
      out[key] = value;
    }
  }
  return out;
}

}  // namespace

Json MergePatchValue(const Json& doc, const Json& patch) {
  if (!patch.is_object()) return patch;
  Json out = doc.is_object() ? doc : Json::object();
  for (const auto& [key, value] : patch.items()) {
    if (value.is_null()) {
      out.erase(key);
    } else {
      auto it = out.find(key);
      out[key] = MergePatchValue(it != out.end() ? *it : Json(nullptr), value);
    }
  }
  return out;
}

Outcome<Json> ApplyMergePatch(const Json& doc, std::string_view patch_text) {
  auto patch = ParsePatch(patch_text);
  if (!patch.ok()) return patch;
  if (!patch->is_object()) return BadRequest("Invalid JSON Patch");
  return MergePatchValue(doc, *patch);
}

Outcome<Json> ApplyJsonPatch(const Json& doc, std::string_view patch_text) {
  auto parsed = ParsePatch(patch_text);
  if (!parsed.ok()) return parsed;
  const Json& ops = *parsed;
  if (!ops.is_array()) {
    return BadRequest("json: cannot unmarshal object into Go value of type jsonpatch.Patch");
  }
  if (ops.size() > 10000) {
    StatusError e;
    e.code = 413;
    e.reason = "RequestEntityTooLarge";
    e.message = "The request is too large: the allowed maximum number of operations is 10000";
    return e;
  }
  Json out = doc;
  std::vector<std::string> path, from;
  for (const auto& op : ops) {
    if (!op.is_object()) return BadRequest("json: cannot unmarshal into jsonpatch.Operation");
    std::string kind = op.value("op", "");
    std::string path_text = op.contains("path") && op["path"].is_string()
                                ? op["path"].get<std::string>()
                                : std::string();
    if (!op.contains("path")) {
      return PatchNotApplied(kind + " operation does not apply: doc is missing path: \"\"");
    }
    if (!SplitPointer(path_text, &path)) {
      return PatchNotApplied("invalid JSON pointer " + Json(path_text).dump());
    }
    if (kind == "add") {
      if (!op.contains("value"))
        return PatchNotApplied("add operation does not apply: missing value");
      if (!AddAt(out, path, op["value"])) return PatchNotApplied(Missing("add", path_text));
    } else if (kind == "remove") {
      if (!RemoveAt(out, path, nullptr)) return PatchNotApplied(Missing("remove", path_text));
    } else if (kind == "replace") {
      Json* target = Resolve(out, path);
      if (target == nullptr) {
        return PatchNotApplied("replace operation does not apply: doc is missing key: " +
                               path_text + ": missing value");
      }
      if (!op.contains("value")) {
        return PatchNotApplied("replace operation does not apply: missing value");
      }
      *target = op["value"];
    } else if (kind == "move" || kind == "copy") {
      std::string from_text = op.value("from", "");
      if (!SplitPointer(from_text, &from)) {
        return PatchNotApplied("invalid JSON pointer " + Json(from_text).dump());
      }
      Json value;
      if (kind == "move") {
        if (!RemoveAt(out, from, &value)) return PatchNotApplied(Missing("move", from_text));
      } else {
        Json* source = Resolve(out, from);
        if (source == nullptr) return PatchNotApplied(Missing("copy", from_text));
        value = *source;
      }
      if (!AddAt(out, path, std::move(value))) return PatchNotApplied(Missing(kind, path_text));
    } else if (kind == "test") {
      Json* target = Resolve(out, path);
      Json expected = op.contains("value") ? op["value"] : Json(nullptr);
      if ((target == nullptr && !expected.is_null()) ||
          (target != nullptr && *target != expected)) {
        return PatchNotApplied("testing value " + path_text + " failed: test failed");
      }
    } else {
      return PatchNotApplied("Unexpected kind: " + kind);
    }
  }
  return out;
}

Outcome<Json> ApplyStrategicMergePatch(const Json& doc, std::string_view patch_text,
                                       const Schema& schema) {
  auto patch = ParsePatch(patch_text);
  if (!patch.ok()) return patch;
  if (!patch->is_object()) {
    return BadRequest("json: cannot unmarshal " +
                      std::string(patch->is_array() ? "array" : "value") +
                      " into Go value of type map[string]interface {}");
  }
  auto out = StrategicMap(doc, *patch, schema);
  if (!out.ok()) return out;
  if (out->is_null()) return Json::object();
  return out;
}

}  // namespace syncbus::kubesim
