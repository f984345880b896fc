#include "tests/kubesim/apply.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace syncbus::kubesim {
namespace {

bool GranularObject(const Json& v, const Schema& s) {
  return v.is_object() && !s.map_atomic() &&
         (s.type() == Schema::Type::kObject || s.type() == Schema::Type::kAny);
}

bool GranularList(const Json& v, const Schema& s) {
  return v.is_array() && s.list_type() != Schema::ListType::kAtomic;
}

// The path element of `item` in a granular list.
std::string ItemElement(const Json& item, const Schema& list, size_t index) {
  if (list.list_type() == Schema::ListType::kSet) return ValueElement(item);
  if (item.is_object()) {
    Json key = Json::object();
    for (const auto& k : list.list_map_keys()) {
      auto it = item.find(k);
      Json fallback;
      if (it != item.end()) {
        key[k] = *it;
      } else if (list.Items().Field(k).DefaultValue(&fallback)) {
        key[k] = std::move(fallback);  // keys with defaults (protocol: TCP) count as set
      }
    }
    if (!key.empty()) return KeyElement(key);
  }
  return IndexElement(index);
}

void WalkFieldSet(const Json& v, const Schema& s, const FieldSet* ignore, FieldSet& node) {
  if (GranularObject(v, s)) {
    for (const auto& [key, child] : v.items()) {
      std::string pe = FieldElement(key);
      const FieldSet* ign = ignore != nullptr ? ignore->Find(pe) : nullptr;
      if (ign != nullptr && ign->member()) continue;
      bool declared = false;
      const Schema& sub = s.Field(key, &declared);
      FieldSet& c = node.Child(pe);
      WalkFieldSet(child, sub, ign, c);
      if (child.is_null() || (child.is_object() && child.empty()) || !declared) {
        c.set_member(true);
      }
      if (c.empty()) node.Erase(pe);
    }
    return;
  }
  if (GranularList(v, s)) {
    const Schema& items = s.Items();
    for (size_t i = 0; i < v.size(); ++i) {
      FieldSet& c = node.Child(ItemElement(v[i], s, i));
      WalkFieldSet(v[i], items, nullptr, c);
      c.set_member(true);
    }
    return;
  }
  node.set_member(true);
}

// Items of a granular list by path element (first occurrence wins).
std::vector<std::pair<std::string, const Json*>> ListElements(const Json& list, const Schema& s) {
  std::vector<std::pair<std::string, const Json*>> out;
  out.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) out.emplace_back(ItemElement(list[i], s, i), &list[i]);
  return out;
}

const Json* FindElement(const std::vector<std::pair<std::string, const Json*>>& elems,
                        const std::string& pe) {
  for (const auto& [e, v] : elems) {
    if (e == pe) return v;
  }
  return nullptr;
}

void Cmp(const Json* l, const Json* r, const Schema& s, const FieldSet* ignore,
         std::vector<std::string>& path, Comparison& out);

void CmpChildren(const Json* l, const Json* r, const Schema& s, const FieldSet* ignore,
                 std::vector<std::string>& path, Comparison& out) {
  const Json& any = l != nullptr ? *l : *r;
  if (any.is_object()) {
    std::set<std::string> keys;
    if (l != nullptr) {
      for (const auto& [k, v] : l->items()) keys.insert(k);
    }
    if (r != nullptr) {
      for (const auto& [k, v] : r->items()) keys.insert(k);
    }
    for (const auto& key : keys) {
      std::string pe = FieldElement(key);
      const FieldSet* ign = ignore != nullptr ? ignore->Find(pe) : nullptr;
      if (ign != nullptr && ign->member()) continue;
      const Json* lc = nullptr;
      const Json* rc = nullptr;
      if (l != nullptr) {
        auto it = l->find(key);
        if (it != l->end()) lc = &*it;
      }
      if (r != nullptr) {
        auto it = r->find(key);
        if (it != r->end()) rc = &*it;
      }
      path.push_back(pe);
      Cmp(lc, rc, s.Field(key), ign, path, out);
      path.pop_back();
    }
    return;
  }
  std::vector<std::pair<std::string, const Json*>> le, re;
  if (l != nullptr) le = ListElements(*l, s);
  if (r != nullptr) re = ListElements(*r, s);
  std::set<std::string> seen;
  auto visit = [&](const std::string& pe) {
    if (!seen.insert(pe).second) return;
    path.push_back(pe);
    Cmp(FindElement(le, pe), FindElement(re, pe), s.Items(), nullptr, path, out);
    path.pop_back();
  };
  for (const auto& [pe, v] : le) visit(pe);
  for (const auto& [pe, v] : re) visit(pe);
}

void Cmp(const Json* l, const Json* r, const Schema& s, const FieldSet* ignore,
         std::vector<std::string>& path, Comparison& out) {
  bool lg = l != nullptr && (GranularObject(*l, s) || GranularList(*l, s));
  bool rg = r != nullptr && (GranularObject(*r, s) || GranularList(*r, s));
  if (l != nullptr && r != nullptr) {
    if (lg && rg && l->is_object() == r->is_object()) {
      CmpChildren(l, r, s, ignore, path, out);
    } else if (*l != *r) {
      out.modified.Insert(path);
    }
    return;
  }
  if (r != nullptr) {
    out.added.Insert(path);
    if (rg) CmpChildren(nullptr, r, s, ignore, path, out);
  } else if (l != nullptr) {
    out.removed.Insert(path);
    if (lg) CmpChildren(l, nullptr, s, ignore, path, out);
  }
}

Json MergeAt(const Json& l, const Json& r, const Schema& s) {
  if (GranularObject(l, s) && GranularObject(r, s)) {
    Json out = l;
    for (const auto& [key, rv] : r.items()) {
      auto it = l.find(key);
      out[key] = it == l.end() ? rv : MergeAt(*it, rv, s.Field(key));
    }
    return out;
  }
  if (GranularList(l, s) && GranularList(r, s)) {
    auto le = ListElements(l, s);
    auto re = ListElements(r, s);
    const Schema& items = s.Items();
    Json out = Json::array();
    std::set<std::string> emitted;
    size_t li = 0;
    auto in_rhs = [&](const std::string& pe) { return FindElement(re, pe) != nullptr; };
    for (const auto& [pe, rv] : re) {
      if (!emitted.insert(pe).second) continue;
      size_t match = le.size();
      for (size_t j = 0; j < le.size(); ++j) {
        if (le[j].first == pe) {
          match = j;
          break;
        }
      }
      if (match < le.size() && match >= li) {
        for (; li < match; ++li) {
          if (!in_rhs(le[li].first) && emitted.insert(le[li].first).second) {
            out.push_back(*le[li].second);
          }
        }
        li = match + 1;
      }
      out.push_back(match < le.size() ? MergeAt(*le[match].second, *rv, items) : *rv);
    }
    for (; li < le.size(); ++li) {
      if (!in_rhs(le[li].first) && emitted.insert(le[li].first).second) {
        out.push_back(*le[li].second);
      }
    }
    return out;
  }
  return r;
}

// Removes from `v` the members of `last` that nobody in `owned` owns (at or below them).
void PruneUnowned(Json& v, const Schema& s, const FieldSet& last, const FieldSet* owned) {
  if (v.is_object()) {
    for (const auto& [pe, child_last] : last.children()) {
      if (pe.rfind("f:", 0) != 0) continue;
      std::string key = pe.substr(2);
      auto it = v.find(key);
      if (it == v.end()) continue;
      const FieldSet* o = owned != nullptr ? owned->Find(pe) : nullptr;
      if (child_last.member() && (o == nullptr || o->empty())) {
        v.erase(it);
      } else {
        PruneUnowned(*it, s.Field(key), child_last, o);
      }
    }
    return;
  }
  if (!v.is_array() || s.list_type() == Schema::ListType::kAtomic) return;
  std::vector<size_t> drop;
  for (size_t i = 0; i < v.size(); ++i) {
    std::string pe = ItemElement(v[i], s, i);
    const FieldSet* child_last = last.Find(pe);
    if (child_last == nullptr) continue;
    const FieldSet* o = owned != nullptr ? owned->Find(pe) : nullptr;
    if (child_last->member() && (o == nullptr || o->empty())) {
      drop.push_back(i);
    } else {
      PruneUnowned(v[i], s.Items(), *child_last, o);
    }
  }
  for (auto it = drop.rbegin(); it != drop.rend(); ++it) v.erase(*it);
}

const FieldSet& StripMeta() {
  static const FieldSet* set = [] {
    auto* s = new FieldSet();
    s->Insert({"f:apiVersion"});
    s->Insert({"f:kind"});
    for (const char* f : {"name", "namespace", "creationTimestamp", "selfLink", "uid", "generation",
                          "managedFields", "resourceVersion", "clusterName"}) {
      s->Insert({"f:metadata", FieldElement(f)});
    }
    return s;
  }();
  return *set;
}

FieldSet IgnoredFields(const FieldManagerScope& scope) {
  FieldSet ignore = StripMeta();
  if (scope.subresource == "status") {
    ignore.Insert({"f:spec"});
    ignore.Insert({"f:metadata"});
  } else if (scope.status_subresource) {
    ignore.Insert({"f:status"});
  }
  return ignore;
}

// stripMeta removes the exact path "metadata" too: nobody owns the metadata node itself.
void DropMetadataMember(FieldSet* set) {
  if (set->Find("f:metadata") == nullptr) return;
  FieldSet& meta = set->Child("f:metadata");
  meta.set_member(false);
  if (meta.empty()) set->Erase("f:metadata");
}

void DropEmpty(std::vector<ManagedEntry>* entries) {
  std::erase_if(*entries, [](const ManagedEntry& e) { return e.fields.empty(); });
}

std::string PrintManager(const ManagedEntry& e) {
  std::string out = Json(e.manager).dump();
  if (!e.subresource.empty()) out += " with subresource " + Json(e.subresource).dump();
  if (e.operation == "Update") {
    out += " using " + e.api_version;
    if (!e.time.empty()) out += " at " + e.time;
  }
  return out;
}

std::string ManagerIdentity(const ManagedEntry& e) {
  Json id = {{"manager", e.manager}, {"operation", e.operation}};
  if (e.operation == "Update") id["apiVersion"] = e.api_version;
  if (!e.subresource.empty()) id["subresource"] = e.subresource;
  return id.dump();
}

}  // namespace

FieldSet ToFieldSet(const Json& value, const Schema& schema, const FieldSet& ignore) {
  FieldSet out;
  WalkFieldSet(value, schema, &ignore, out);
  out.set_member(false);
  DropMetadataMember(&out);
  return out;
}

Comparison Compare(const Json& before, const Json& after, const Schema& schema,
                   const FieldSet& ignore) {
  Comparison out;
  std::vector<std::string> path;
  Cmp(&before, &after, schema, &ignore, path, out);
  DropMetadataMember(&out.added);
  DropMetadataMember(&out.removed);
  DropMetadataMember(&out.modified);
  return out;
}

Json Merge(const Json& live, const Json& config, const Schema& schema) {
  return MergeAt(live, config, schema);
}

std::vector<ManagedEntry> ParseManagedFields(const Json& object) {
  std::vector<ManagedEntry> out;
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return out;
  auto list = meta->find("managedFields");
  if (list == meta->end() || !list->is_array()) return out;
  for (const auto& e : *list) {
    if (!e.is_object()) continue;
    ManagedEntry entry;
    entry.manager = e.value("manager", "");
    entry.operation = e.value("operation", "");
    entry.api_version = e.value("apiVersion", "");
    entry.subresource = e.value("subresource", "");
    entry.time = e.value("time", "");
    auto fields = e.find("fieldsV1");
    if (fields != e.end()) entry.fields = FieldSet::FromJson(*fields);
    out.push_back(std::move(entry));
  }
  return out;
}

Json EncodeManagedFields(std::vector<ManagedEntry> entries) {
  std::sort(entries.begin(), entries.end(), [](const ManagedEntry& p, const ManagedEntry& q) {
    return std::tie(p.operation, p.time, p.manager, p.api_version, p.subresource) <
           std::tie(q.operation, q.time, q.manager, q.api_version, q.subresource);
  });
  Json out = Json::array();
  for (const auto& e : entries) {
    Json j = {{"manager", e.manager},
              {"operation", e.operation},
              {"apiVersion", e.api_version},
              {"fieldsType", "FieldsV1"},
              {"fieldsV1", e.fields.ToJson()}};
    if (!e.time.empty()) j["time"] = e.time;
    if (!e.subresource.empty()) j["subresource"] = e.subresource;
    out.push_back(std::move(j));
  }
  return out;
}

void RecordUpdate(std::vector<ManagedEntry>* entries, const Json& before, const Json& after,
                  const std::string& manager, const FieldManagerScope& scope) {
  FieldSet ignore = IgnoredFields(scope);
  Comparison cmp = Compare(before, after, *scope.schema, ignore);
  FieldSet changed = cmp.modified;
  changed.Union(cmp.added);
  for (auto& e : *entries) {
    e.fields = e.fields.Difference(changed).Difference(cmp.removed);
  }
  if (!changed.empty()) {
    auto it = std::find_if(entries->begin(), entries->end(), [&](const ManagedEntry& e) {
      return e.manager == manager && e.operation == "Update" &&
             e.api_version == scope.api_version && e.subresource == scope.subresource;
    });
    if (it == entries->end()) {
      entries->push_back(
          {manager, "Update", scope.api_version, scope.subresource, scope.now, std::move(changed)});
    } else {
      it->fields.Union(changed);
      it->time = scope.now;
    }
  }
  DropEmpty(entries);
}

Outcome<Json> ApplyConfig(std::vector<ManagedEntry>* entries, const Json& live, const Json& config,
                          const std::string& manager, bool force, const FieldManagerScope& scope) {
  const Schema& schema = *scope.schema;
  FieldSet ignore = IgnoredFields(scope);
  Json merged = Merge(live, config, schema);
  FieldSet applied = ToFieldSet(config, schema, ignore);

  auto self = std::find_if(entries->begin(), entries->end(), [&](const ManagedEntry& e) {
    return e.manager == manager && e.operation == "Apply" && e.subresource == scope.subresource;
  });
  FieldSet last = self == entries->end() ? FieldSet() : self->fields;
  if (!last.empty()) {
    FieldSet owned = applied;
    for (const auto& e : *entries) {
      if (&e != &*self) owned.Union(e.fields);
    }
    PruneUnowned(merged, schema, last, &owned);
  }

  Comparison cmp = Compare(live, merged, schema, ignore);
  FieldSet changed = cmp.modified;
  changed.Union(cmp.added);
  struct Conflict {
    const ManagedEntry* entry;
    std::vector<std::string> path;
  };
  std::map<std::string, std::vector<Conflict>> by_manager;
  size_t total = 0;
  for (const auto& e : *entries) {
    if (self != entries->end() && &e == &*self) continue;
    FieldSet clash = e.fields.Intersection(changed);
    clash.ForEachMember([&](const std::vector<std::string>& path) {
      by_manager[ManagerIdentity(e)].push_back({&e, path});
      ++total;
    });
  }
  if (total > 0 && !force) {
    StatusError err;
    err.code = 409;
    err.reason = "Conflict";
    std::vector<std::string> lines;
    for (const auto& [id, list] : by_manager) {
      for (const auto& c : list) {
        err.causes.push_back({"FieldManagerConflict", "conflict with " + PrintManager(*c.entry),
                              PathString(c.path)});
      }
    }
    if (total == 1) {
      const auto& c = by_manager.begin()->second.front();
      err.message = "Apply failed with 1 conflict: conflict with " + PrintManager(*c.entry) + ": " +
                    PathString(c.path);
    } else {
      std::string text;
      for (const auto& [id, list] : by_manager) {
        text += (text.empty() ? "" : "\n") + std::string("conflicts with ") +
                PrintManager(*list.front().entry) + ":";
        for (const auto& c : list) text += "\n- " + PathString(c.path);
      }
      err.message = "Apply failed with " + std::to_string(total) + " conflicts: " + text;
    }
    return err;
  }

  bool changed_object = !changed.empty() || !cmp.removed.empty();
  for (auto& e : *entries) {
    if (self != entries->end() && &e == &*self) continue;
    e.fields = e.fields.Difference(changed).Difference(cmp.removed);
  }
  if (self != entries->end()) {
    if (self->fields != applied || changed_object) self->time = scope.now;
    self->fields = std::move(applied);
    self->api_version = scope.api_version;
  } else {
    entries->push_back(
        {manager, "Apply", scope.api_version, scope.subresource, scope.now, std::move(applied)});
  }
  DropEmpty(entries);
  return merged;
}

}  // namespace syncbus::kubesim
