#include "tests/kubesim/write_path.h"

#include <algorithm>
#include <cctype>
#include <random>

#include "common/hive/label_selector.h"
#include "common/yaml_json.h"
#include "tests/kubesim/apply.h"
#include "tests/kubesim/json_util.h"
#include "tests/kubesim/patch.h"
#include "tests/kubesim/responses.h"

namespace syncbus::kubesim {

struct WritePath::Options {
  bool dry_run = false;
  bool strict = false;
  std::string manager;
};

namespace {

constexpr char kJsonPatch[] = "application/json-patch+json";
constexpr char kMergePatch[] = "application/merge-patch+json";
constexpr char kStrategicPatch[] = "application/strategic-merge-patch+json";
constexpr char kApplyPatch[] = "application/apply-patch+yaml";

std::mt19937_64& Rng() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng;
}

std::string RandomSuffix() {
  static const char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  std::string out;
  for (int i = 0; i < 5; ++i) out += kAlphabet[Rng()() % (sizeof(kAlphabet) - 1)];
  return out;
}

std::string MediaType(const ApiRequest& r) {
  std::string type = http::FindHeader(r.headers, "Content-Type").value_or("");
  type = type.substr(0, type.find(';'));
  while (!type.empty() && std::isspace(static_cast<unsigned char>(type.back()))) type.pop_back();
  while (!type.empty() && std::isspace(static_cast<unsigned char>(type.front()))) type.erase(0, 1);
  std::transform(type.begin(), type.end(), type.begin(), ::tolower);
  return type;
}

// The journal's verb for a write request.
const char* JournalVerb(const ApiRequest& r) {
  if (r.method == "POST") return "create";
  if (r.method == "PUT") return "update";
  if (r.method == "DELETE") return "delete";
  return MediaType(r) == kApplyPatch ? "apply" : "patch";
}

std::string MetaString(const Json& object, const char* key) {
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return "";
  auto it = meta->find(key);
  return it != meta->end() && it->is_string() ? it->get<std::string>() : "";
}

Json& Meta(Json& object) {
  Json& meta = object["metadata"];
  if (!meta.is_object()) meta = Json::object();
  return meta;
}

bool IsNumber(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

StatusError CannotHandle(const ResourceType& type, const std::string& detail) {
  return BadRequest(type.kind + " in version " + Json(type.version).dump() +
                    " cannot be handled as a " + type.kind + ": " + detail);
}

// Type metadata, metadata normalisation, pruning and the decoding type check.
Outcome<Json> Decode(const ResourceType& type, Json object, bool strict,
                     std::vector<std::string>* warnings) {
  if (!object.is_object()) return BadRequest("the body of the request must be a JSON object");
  std::string body_text;
  auto require = [&](const char* key, const char* what) -> std::optional<StatusError> {
    auto it = object.find(key);
    if (it != object.end() && it->is_string() && !it->get<std::string>().empty()) return {};
    if (!type.custom) {
      object[key] = std::string(key) == "kind" ? type.kind : type.api_version;
      return {};
    }
    return BadRequest(std::string("Object '") + what + "' is missing in '" + object.dump() + "'");
  };
  if (auto e = require("kind", "Kind")) return *e;
  if (auto e = require("apiVersion", "apiVersion")) return *e;
  if (object["apiVersion"] != type.api_version) {
    return BadRequest("the API version in the data (" + object["apiVersion"].get<std::string>() +
                      ") does not match the expected API version (" + type.api_version + ")");
  }
  if (object["kind"] != type.kind) {
    return BadRequest("the kind in the data (" + object["kind"].get<std::string>() +
                      ") does not match the expected kind (" + type.kind + ")");
  }
  std::vector<std::string> pruned;
  Json& meta = Meta(object);
  std::string err = NormalizeObjectMeta(meta, type.custom, "metadata", &pruned);
  if (!err.empty()) return CannotHandle(type, err);
  type.schema->Prune(object, true, &pruned);
  if (!pruned.empty()) {
    if (strict) {
      std::string list;
      for (const auto& p : pruned)
        list += (list.empty() ? "" : ", ") + std::string("unknown field ") + Json(p).dump();
      return BadRequest("strict decoding error: " + list);
    }
    for (const auto& p : pruned) warnings->push_back("unknown field " + Json(p).dump());
  }
  if (!type.custom) {
    std::string mismatch = type.schema->DecodeCheck(object, type.kind);
    if (!mismatch.empty()) return CannotHandle(type, mismatch);
  }
  return object;
}

void ApplyDefaults(const ResourceType& type, Json& object, const Json* old) {
  if (type.custom) {
    type.schema->Default(object);
  } else if (type.behavior != nullptr && type.behavior->set_defaults != nullptr) {
    type.behavior->set_defaults(object, old);
  }
}

// Conversion-time rewrites, then what the Go types would not serialise (empty maps and lists
// of built-in types and of every object's metadata).
std::optional<StatusError> Normalize(const ResourceType& type, Json& object) {
  if (!type.custom && type.behavior != nullptr && type.behavior->normalize != nullptr) {
    std::string err = type.behavior->normalize(object);
    if (!err.empty()) return CannotHandle(type, err);
  }
  if (type.custom) {
    type.schema->Field("metadata").OmitEmpty(object["metadata"]);
  } else {
    type.schema->OmitEmpty(object);
  }
  return {};
}

std::vector<FieldError> Validate(const ResourceType& type, const Json& object, const Json* old) {
  std::vector<FieldError> errors;
  ValidateObjectMeta(object["metadata"], type.namespaced, type.name_rule, "metadata", &errors);
  if (old != nullptr) ValidateObjectMetaUpdate(object["metadata"], (*old)["metadata"], &errors);
  if (type.custom) {
    type.schema->Validate(object, "", &errors);
  } else if (type.behavior != nullptr && type.behavior->validate != nullptr) {
    type.behavior->validate(object, old, &errors);
  }
  if (!type.custom && type.plural == "customresourcedefinitions" && errors.empty()) {
    auto compiled = CompileCrd(object);
    if (!compiled.ok()) {
      for (const auto& c : compiled.error().causes) {
        errors.push_back(Invalid(c.field, nullptr, c.message));
      }
    }
  }
  return errors;
}

// metadata.generation: 1 on create, +1 when anything outside metadata (and status, for types
// with a status subresource) changed.
void SetGeneration(const ResourceType& type, Json& next, const Json* old) {
  Json& meta = Meta(next);
  if (!type.tracks_generation) {
    meta.erase("generation");
    return;
  }
  if (old == nullptr) {
    meta["generation"] = 1;
    return;
  }
  long long generation = 0;
  auto old_meta = old->find("metadata");
  if (old_meta != old->end() && old_meta->contains("generation") &&
      (*old_meta)["generation"].is_number_integer()) {
    generation = (*old_meta)["generation"].get<long long>();
  }
  bool changed = false;
  auto differs = [&](const Json& a, const Json& b) {
    for (const auto& [key, value] : a.items()) {
      if (key == "metadata" || (key == "status" && type.status_subresource)) continue;
      auto it = b.find(key);
      if (it == b.end() || *it != value) return true;
    }
    return false;
  };
  changed = differs(next, *old) || differs(*old, next);
  meta["generation"] = changed ? generation + 1 : generation;
}

FieldManagerScope Scope(const ResourceType& type, const std::string& subresource,
                        const std::string& now) {
  FieldManagerScope scope;
  scope.schema = type.schema.get();
  scope.api_version = type.api_version;
  scope.subresource = subresource;
  scope.status_subresource = type.status_subresource;
  scope.now = now;
  return scope;
}

void WriteManagedFields(Json& object, const std::vector<ManagedEntry>& entries) {
  Json& meta = Meta(object);
  if (entries.empty()) {
    meta.erase("managedFields");
  } else {
    meta["managedFields"] = EncodeManagedFields(entries);
  }
}

Json ZeroObject(const ResourceType& type) {
  Json zero = type.zero_object;
  zero["apiVersion"] = type.api_version;
  zero["kind"] = type.kind;
  return zero;
}

StatusError NamespaceTerminating(const WriteRequest& r, const std::string& name) {
  StatusError e = Forbidden403(Qualified(r.type->plural, r.type->group) + " " + Json(name).dump() +
                               " is forbidden: unable to create new content "
                               "in namespace " +
                               r.ns + " because it is being terminated");
  e.name = name;
  e.group = r.type->group;
  e.kind = r.type->plural;
  e.causes.push_back(
      {"NamespaceTerminating", "namespace " + r.ns + " is being terminated", "metadata.namespace"});
  return e;
}

StatusError PatchOptionsInvalid(FieldError error) {
  return InvalidError("PatchOptions", "meta.k8s.io", "", {std::move(error)});
}

}  // namespace

WritePath::WritePath(ResourceRegistry* registry, ObjectStore* store, const Clock* clock,
                     std::string server_name)
    : registry_(registry), store_(store), clock_(clock), server_name_(std::move(server_name)) {}

std::string WritePath::Now() const {
  return FormatTime(clock_->WallNow());
}

ObjectStore::OnCommit WritePath::Journaling(const WriteRequest& r, int code) const {
  if (r.journal == nullptr) return nullptr;
  JournalEntry entry;
  entry.cluster = server_name_;
  entry.verb = JournalVerb(*r.http);
  entry.type = r.type;
  entry.subresource = r.subresource;
  entry.code = code;
  entry.user_agent = http::FindHeader(r.http->headers, "User-Agent").value_or("");
  // The store calls this at most once, under its lock: little more than a move into the buffer.
  return [journal = r.journal, clock = clock_,
          entry = std::move(entry)](const ObjectPtr& object) mutable {
    entry.time = clock->WallNow();
    entry.object = object;
    journal->Append(std::move(entry));
  };
}

Outcome<WritePath::Options> WritePath::ParseOptions(const WriteRequest& r) const {
  Options opts;
  auto dry = r.query->Get("dryRun");
  if (dry && !dry->empty()) {
    if (*dry != "All") {
      return InvalidError("CreateOptions", "meta.k8s.io", "",
                          {NotSupported("dryRun", *dry, {"All"})});
    }
    opts.dry_run = true;
  }
  std::string validation = r.query->Get("fieldValidation").value_or("");
  if (validation == "Strict") {
    opts.strict = true;
  } else if (!validation.empty() && validation != "Warn" && validation != "Ignore") {
    return BadRequest("fieldValidation parameter unsupported: " + validation);
  }
  auto manager = r.query->Get("fieldManager");
  if (manager) {
    opts.manager = *manager;
    if (opts.manager.size() > 128) {
      return InvalidError("CreateOptions", "meta.k8s.io", "",
                          {TooLong("fieldManager", opts.manager, 128)});
    }
  } else {
    std::string agent = http::FindHeader(r.http->headers, "User-Agent").value_or("");
    opts.manager = agent.substr(0, agent.find('/'));
  }
  return opts;
}

Outcome<Json> WritePath::DecodeBody(const WriteRequest& r) const {
  std::string media = MediaType(*r.http);
  Json body;
  if (media.empty() || media == "application/json" || media == "*/*") {
    body = Json::parse(r.http->body, nullptr, false);
    if (body.is_discarded()) {
      return BadRequest("couldn't get version/kind; json parse error: invalid JSON in the body");
    }
  } else if (media == "application/yaml") {
    auto parsed = YamlToJson(r.http->body);
    if (!parsed.ok()) return BadRequest(parsed.status().message());
    body = std::move(parsed).value();
  } else {
    return UnsupportedMediaType(
        {"application/json", "application/yaml", "application/vnd.kubernetes.protobuf"});
  }
  if (!body.is_object()) return BadRequest("the body of the request must be a JSON object");
  return body;
}

Outcome<Json> WritePath::CreateCandidate(const WriteRequest& r, Json object, const Options& opts,
                                         std::vector<std::string>* warnings) const {
  auto decoded = Decode(*r.type, std::move(object), opts.strict, warnings);
  if (!decoded.ok()) return decoded;
  Json& obj = *decoded;
  Json& meta = Meta(obj);
  if (r.type->namespaced) {
    std::string ns = MetaString(obj, "namespace");
    if (ns.empty()) {
      meta["namespace"] = r.ns;
    } else if (ns != r.ns) {
      return BadRequest(
          "the namespace of the provided object does not match the namespace sent "
          "on the request");
    }
  } else {
    meta.erase("namespace");
  }
  std::string rv = MetaString(obj, "resourceVersion");
  if (IsNumber(rv) && rv != "0") {
    StatusError e;
    e.code = 500;
    e.message = "resourceVersion should not be set on objects to be created";
    return e;
  }
  meta.erase("resourceVersion");
  return decoded;
}

Outcome<WritePath::CreateResult> WritePath::CommitCreate(
    const WriteRequest& r, const Json& object, const std::string& manager, bool dry_run,
    const std::vector<ManagedEntry>* apply_entries) {
  const ResourceType& type = *r.type;
  for (int attempt = 0;; ++attempt) {
    Json next = object;
    Json& meta = Meta(next);
    bool generated = false;
    if (MetaString(next, "name").empty() && !MetaString(next, "generateName").empty()) {
      meta["name"] = MetaString(next, "generateName") + RandomSuffix();
      generated = true;
    }
    std::string now = Now();
    meta["uid"] = NewUid();
    meta["creationTimestamp"] = now;
    for (const char* key : {"deletionTimestamp", "deletionGracePeriodSeconds", "selfLink",
                            "managedFields", "generation"}) {
      meta.erase(key);
    }
    if (type.status_subresource) next.erase("status");
    ApplyDefaults(type, next, nullptr);
    if (auto e = Normalize(type, next)) return *e;
    std::vector<ManagedEntry> entries;
    if (apply_entries != nullptr) {
      entries = *apply_entries;
    } else {
      RecordUpdate(&entries, ZeroObject(type), next, manager, Scope(type, "", now));
    }
    if (type.behavior != nullptr && type.behavior->prepare_for_create != nullptr) {
      type.behavior->prepare_for_create(next);
    }
    SetGeneration(type, next, nullptr);
    std::vector<FieldError> errors = Validate(type, next, nullptr);
    if (!errors.empty()) {
      return InvalidError(type.kind, type.group, MetaString(next, "name"), errors);
    }
    WriteManagedFields(next, entries);
    CreateResult result;
    PreparedObject prepared = Prepare(type, next);
    ObjectStore::Committed c;
    if (dry_run) {
      // Refused as the create would be (no namespace, already there); nothing stored.
      c.code = store_->CheckCreate(r.type, prepared);
      if (c.code == ObjectStore::Code::kOk) {
        result.body = next.dump();
        return result;
      }
    } else {
      c = store_->Create(r.type, prepared, Journaling(r, 201));
    }
    switch (c.code) {
      case ObjectStore::Code::kOk:
        AfterCommit(r.type, c);
        result.object = c.object;
        result.body = FullJson(type, *c.object);
        return result;
      case ObjectStore::Code::kExists:
        if (generated && attempt < 8) continue;
        result.exists = true;
        result.error = AlreadyExistsError(type.plural, type.group, MetaString(next, "name"));
        return result;
      case ObjectStore::Code::kNoNamespace:
        return NotFoundError("namespaces", "", prepared.index.ns);
      case ObjectStore::Code::kNamespaceTerminating:
        return NamespaceTerminating(r, MetaString(next, "name"));
      case ObjectStore::Code::kStale: continue;
    }
  }
}

ApiResponse WritePath::Create(const WriteRequest& r) {
  auto opts = ParseOptions(r);
  if (!opts.ok()) return ErrorResponse(opts.error());
  auto body = DecodeBody(r);
  if (!body.ok()) return ErrorResponse(body.error());
  std::vector<std::string> warnings;
  auto candidate = CreateCandidate(r, std::move(body).value(), *opts, &warnings);
  if (!candidate.ok()) return ErrorResponse(candidate.error());
  auto created = CommitCreate(r, *candidate, opts->manager, opts->dry_run, nullptr);
  if (!created.ok()) return ErrorResponse(created.error());
  if (created->error) return ErrorResponse(*created->error);
  return JsonResponse(201, std::move(created->body), warnings);
}

Outcome<WritePath::UpdateResult> WritePath::UpdateFrom(
    const WriteRequest& r, const ObjectPtr& current, const Json& old, const Json& candidate,
    const std::string& manager, const std::vector<ManagedEntry>* apply_entries, bool dry_run) {
  const ResourceType& type = *r.type;
  std::string rv = MetaString(candidate, "resourceVersion");
  if (!rv.empty() && rv != std::to_string(current->rv)) {
    return ModifiedConflict(type.plural, type.group, r.name);
  }
  std::string uid = MetaString(candidate, "uid");
  if (!uid.empty() && uid != current->index.uid) {
    return ConflictError(type.plural, type.group, r.name,
                         "Precondition failed: UID in precondition: " + uid +
                             ", UID in object meta: " + current->index.uid);
  }
  Json base = old;
  Meta(base).erase("resourceVersion");
  Json next;
  if (r.subresource == "status") {
    next = base;
    auto status = candidate.find("status");
    if (status != candidate.end()) {
      next["status"] = *status;
    } else {
      next.erase("status");
    }
  } else if (r.subresource == "finalize") {
    next = base;
    // spec.finalizers is omitempty: an empty list is not stored.
    auto spec = candidate.find("spec");
    if (spec != candidate.end() && spec->is_object() && spec->contains("finalizers") &&
        !(*spec)["finalizers"].empty()) {
      next["spec"]["finalizers"] = (*spec)["finalizers"];
    } else if (next.contains("spec")) {
      next["spec"].erase("finalizers");
    }
  } else {
    next = candidate;
    Json& meta = Meta(next);
    const Json& old_meta = base["metadata"];
    for (const char* key :
         {"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
          "generation", "managedFields", "namespace", "name"}) {
      auto it = old_meta.find(key);
      if (it != old_meta.end()) {
        meta[key] = *it;
      } else {
        meta.erase(key);
      }
    }
    meta.erase("resourceVersion");
    meta.erase("selfLink");
    if (type.status_subresource) {
      auto status = base.find("status");
      if (status != base.end()) {
        next["status"] = *status;
      } else {
        next.erase("status");
      }
    }
  }
  if (r.subresource != "finalize") ApplyDefaults(type, next, &base);
  if (auto e = Normalize(type, next)) return *e;
  std::vector<ManagedEntry> entries;
  if (apply_entries != nullptr) {
    entries = *apply_entries;
  } else {
    entries = ParseManagedFields(base);
    // A write of the main resource that carries managedFields sets them (an empty list leaves
    // them alone; entries owning nothing are dropped), as kube-apiserver's field manager does.
    if (r.subresource.empty()) {
      std::vector<ManagedEntry> given = ParseManagedFields(candidate);
      given.erase(std::remove_if(given.begin(), given.end(),
                                 [](const ManagedEntry& e) { return e.fields.empty(); }),
                  given.end());
      if (!given.empty()) entries = std::move(given);
    }
    RecordUpdate(&entries, base, next, manager, Scope(type, r.subresource, Now()));
  }
  SetGeneration(type, next, &base);
  std::vector<FieldError> errors = Validate(type, next, &base);
  if (!errors.empty()) return InvalidError(type.kind, type.group, r.name, errors);
  WriteManagedFields(next, entries);
  UpdateResult result;
  if (next == base) {
    result.body = FullJson(type, *current);
    return result;
  }
  if (dry_run) {
    Meta(next)["resourceVersion"] = std::to_string(current->rv);
    result.body = next.dump();
    return result;
  }
  ObjectStore::Committed c =
      store_->Update(r.type, current, Prepare(type, next), Journaling(r, 200));
  result.code = c.code;
  if (c.code == ObjectStore::Code::kOk) {
    AfterCommit(r.type, c);
    result.body = FullJson(type, *c.object);
  }
  return result;
}

namespace {

// The name and namespace of a PUT/PATCH/apply body must be those of the URL.
std::optional<StatusError> CheckIdentity(const WriteRequest& r, Json& object) {
  Json& meta = Meta(object);
  std::string name = MetaString(object, "name");
  if (name != r.name) {
    return BadRequest("the name of the object (" + name + ") does not match the name on the URL (" +
                      r.name + ")");
  }
  if (!r.type->namespaced) {
    meta.erase("namespace");
    return {};
  }
  std::string ns = MetaString(object, "namespace");
  if (ns.empty()) {
    meta["namespace"] = r.ns;
  } else if (ns != r.ns) {
    return BadRequest("the namespace of the provided object (" + ns +
                      ") does not match the namespace sent on the request (" + r.ns + ")");
  }
  return {};
}

}  // namespace

ApiResponse WritePath::Update(const WriteRequest& r) {
  auto opts = ParseOptions(r);
  if (!opts.ok()) return ErrorResponse(opts.error());
  auto body = DecodeBody(r);
  if (!body.ok()) return ErrorResponse(body.error());
  std::vector<std::string> warnings;
  auto candidate = Decode(*r.type, std::move(body).value(), opts->strict, &warnings);
  if (!candidate.ok()) return ErrorResponse(candidate.error());
  if (auto e = CheckIdentity(r, *candidate)) return ErrorResponse(*e);
  while (true) {
    ObjectPtr current = store_->Get(*r.type, r.ns, r.name);
    if (!current) return ErrorResponse(NotFoundError(r.type->plural, r.type->group, r.name));
    if (r.type->custom && MetaString(*candidate, "resourceVersion").empty()) {
      // Custom resources allow no unconditional update (built-in kinds do), status included.
      StatusError e =
          InvalidError(r.type->plural, r.type->group, r.name,
                       {Invalid("metadata.resourceVersion", 0, "must be specified for an update")});
      // Go prints the uint64 zero as 0x0.
      const std::string plain = "Invalid value: 0:", go = "Invalid value: 0x0:";
      e.message.replace(e.message.find(plain), plain.size(), go);
      e.causes[0].message.replace(e.causes[0].message.find(plain), plain.size(), go);
      return ErrorResponse(e);
    }
    Json old = ParseStored(*r.type, *current);
    auto updated = UpdateFrom(r, current, old, *candidate, opts->manager, nullptr, opts->dry_run);
    if (!updated.ok()) return ErrorResponse(updated.error());
    if (updated->code == ObjectStore::Code::kStale) continue;
    return JsonResponse(200, std::move(updated->body), warnings);
  }
}

ApiResponse WritePath::Patch(const WriteRequest& r) {
  std::string media = MediaType(*r.http);
  std::vector<std::string> accepted = {kJsonPatch, kMergePatch, kApplyPatch};
  if (!r.type->custom) accepted.insert(accepted.begin() + 2, kStrategicPatch);
  if (std::find(accepted.begin(), accepted.end(), media) == accepted.end()) {
    return ErrorResponse(UnsupportedMediaType(accepted));
  }
  auto opts = ParseOptions(r);
  if (!opts.ok()) return ErrorResponse(opts.error());
  if (media == kApplyPatch) return Apply(r, *opts);
  if (r.query->Get("force")) {
    return ErrorResponse(
        PatchOptionsInvalid(Forbidden("force", "may not be specified for non-apply patch")));
  }
  std::vector<std::string> warnings;
  while (true) {
    warnings.clear();
    ObjectPtr current = store_->Get(*r.type, r.ns, r.name);
    if (!current) return ErrorResponse(NotFoundError(r.type->plural, r.type->group, r.name));
    Json old = ParseStored(*r.type, *current);
    Outcome<Json> patched = media == kJsonPatch ? ApplyJsonPatch(old, r.http->body)
                            : media == kMergePatch
                                ? ApplyMergePatch(old, r.http->body)
                                : ApplyStrategicMergePatch(old, r.http->body, *r.type->schema);
    if (!patched.ok()) return ErrorResponse(patched.error());
    auto candidate = Decode(*r.type, std::move(patched).value(), opts->strict, &warnings);
    if (!candidate.ok()) return ErrorResponse(candidate.error());
    if (auto e = CheckIdentity(r, *candidate)) return ErrorResponse(*e);
    auto updated = UpdateFrom(r, current, old, *candidate, opts->manager, nullptr, opts->dry_run);
    if (!updated.ok()) return ErrorResponse(updated.error());
    if (updated->code == ObjectStore::Code::kStale) continue;
    return JsonResponse(200, std::move(updated->body), warnings);
  }
}

ApiResponse WritePath::Apply(const WriteRequest& r, const Options& opts) {
  const ResourceType& type = *r.type;
  if (!r.query->Get("fieldManager") || opts.manager.empty()) {
    return ErrorResponse(
        PatchOptionsInvalid(Required("fieldManager", "is required for apply patch")));
  }
  auto parsed = YamlToJson(r.http->body);
  if (!parsed.ok()) return ErrorResponse(BadRequest(parsed.status().message()));
  if (!parsed->is_object()) {
    return ErrorResponse(
        BadRequest("error decoding patch: the applied configuration must be an "
                   "object"));
  }
  for (const char* key : {"apiVersion", "kind"}) {
    auto it = parsed->find(key);
    if (it == parsed->end() || !it->is_string() || it->get<std::string>().empty()) {
      return ErrorResponse(BadRequest(std::string("Object '") + (key[0] == 'k' ? "Kind" : key) +
                                      "' is missing in '" + parsed->dump() + "'"));
    }
  }
  std::vector<std::string> warnings;
  auto config = Decode(type, std::move(parsed).value(), opts.strict, &warnings);
  if (!config.ok()) return ErrorResponse(config.error());
  if (auto e = CheckIdentity(r, *config)) return ErrorResponse(*e);
  bool force = r.query->Flag("force");
  while (true) {
    ObjectPtr current = store_->Get(type, r.ns, r.name);
    if (!current) {
      if (!r.subresource.empty()) {
        return ErrorResponse(NotFoundError(type.plural, type.group, r.name));
      }
      std::string rv = MetaString(*config, "resourceVersion");
      if (IsNumber(rv) && rv != "0") {
        StatusError e;
        e.code = 500;
        e.message = "resourceVersion should not be set on objects to be created";
        return ErrorResponse(e);
      }
      std::vector<ManagedEntry> entries;
      auto merged = ApplyConfig(&entries, ZeroObject(type), *config, opts.manager, force,
                                Scope(type, "", Now()));
      if (!merged.ok()) return ErrorResponse(merged.error());
      Meta(*merged).erase("resourceVersion");
      auto created = CommitCreate(r, *merged, opts.manager, opts.dry_run, &entries);
      if (!created.ok()) return ErrorResponse(created.error());
      if (created->exists) continue;
      if (created->error) return ErrorResponse(*created->error);
      return JsonResponse(201, std::move(created->body), warnings);
    }
    Json old = ParseStored(type, *current);
    std::string rv = MetaString(*config, "resourceVersion");
    if (!rv.empty() && rv != std::to_string(current->rv)) {
      return ErrorResponse(ModifiedConflict(type.plural, type.group, r.name));
    }
    std::vector<ManagedEntry> entries = ParseManagedFields(old);
    auto merged =
        ApplyConfig(&entries, old, *config, opts.manager, force, Scope(type, r.subresource, Now()));
    if (!merged.ok()) return ErrorResponse(merged.error());
    auto updated = UpdateFrom(r, current, old, *merged, opts.manager, &entries, opts.dry_run);
    if (!updated.ok()) return ErrorResponse(updated.error());
    if (updated->code == ObjectStore::Code::kStale) continue;
    return JsonResponse(200, std::move(updated->body), warnings);
  }
}

namespace {

struct DeleteOptions {
  std::string uid, resource_version;
  Propagation policy = Propagation::kBackground;
  bool dry_run = false;
};

Outcome<DeleteOptions> ParseDeleteOptions(const WriteRequest& r) {
  DeleteOptions out;
  std::string policy = r.query->Get("propagationPolicy").value_or("");
  bool orphan = r.query->Flag("orphanDependents");
  std::string dry = r.query->Get("dryRun").value_or("");
  if (!r.http->body.empty()) {
    Json body = Json::parse(r.http->body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      return BadRequest("the body of a DELETE must be a DeleteOptions object");
    }
    auto pre = body.find("preconditions");
    if (pre != body.end() && pre->is_object()) {
      out.uid = pre->value("uid", "");
      out.resource_version = pre->value("resourceVersion", "");
    }
    if (body.contains("propagationPolicy") && body["propagationPolicy"].is_string()) {
      policy = body["propagationPolicy"].get<std::string>();
    }
    if (body.contains("orphanDependents") && body["orphanDependents"].is_boolean()) {
      orphan = body["orphanDependents"].get<bool>();
    }
    auto dry_list = body.find("dryRun");
    if (dry_list != body.end() && dry_list->is_array() && !dry_list->empty() &&
        (*dry_list)[0].is_string()) {
      dry = (*dry_list)[0].get<std::string>();
    }
  }
  if (!dry.empty()) {
    if (dry != "All") {
      return InvalidError("DeleteOptions", "meta.k8s.io", "",
                          {NotSupported("dryRun", dry, {"All"})});
    }
    out.dry_run = true;
  }
  if (policy == "Orphan" || (policy.empty() && orphan)) {
    out.policy = Propagation::kOrphan;
  } else if (policy == "Foreground") {
    out.policy = Propagation::kForeground;
  } else if (!policy.empty() && policy != "Background") {
    return InvalidError(
        "DeleteOptions", "meta.k8s.io", "",
        {NotSupported("propagationPolicy", policy, {"Foreground", "Background", "Orphan"})});
  }
  return out;
}

}  // namespace

namespace {

bool ListHas(const Json& webhook_rule, const char* key, const std::string& value) {
  auto it = webhook_rule.find(key);
  if (it == webhook_rule.end() || !it->is_array()) return false;
  return std::any_of(it->begin(), it->end(),
                     [&](const Json& v) { return v.is_string() && (v == "*" || v == value); });
}

bool SelectorMatches(const Json& webhook, const char* key, const Json& labels) {
  auto it = webhook.find(key);
  if (it == webhook.end() || !it->is_object()) return true;
  auto selector = hive::LabelSelector::FromJson(*it);
  if (!selector.ok()) return false;
  hive::Labels l;
  if (labels.is_object()) {
    for (const auto& [k, v] : labels.items()) {
      if (v.is_string()) l[k] = v.get<std::string>();
    }
  }
  return selector->Matches(l);
}

}  // namespace

std::optional<StatusError> WritePath::RejectedByWebhook(const std::string& operation,
                                                        const ResourceType& type,
                                                        const std::string& ns,
                                                        const Json& object) const {
  TypePtr configurations =
      registry_->Find("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations");
  if (!configurations) return {};
  auto page = store_->List(
      configurations, "", [](const StoredObject&) { return true; }, 0, "", 0);
  if (!page.ok()) return {};
  Json ns_labels = Json::object();
  if (!ns.empty()) {
    if (ObjectPtr n = store_->Get(*registry_->Namespaces(), "", ns)) {
      Json parsed = ParseStored(*registry_->Namespaces(), *n);
      ns_labels = parsed["metadata"].value("labels", Json::object());
    }
  }
  const Json labels = object.contains("metadata")
                          ? object["metadata"].value("labels", Json::object())
                          : Json::object();
  for (const ObjectPtr& stored : page->items) {
    Json configuration = ParseStored(*configurations, *stored);
    for (const Json& webhook : configuration.value("webhooks", Json::array())) {
      bool rule = false;
      for (const Json& r : webhook.value("rules", Json::array())) {
        rule = rule ||
               (ListHas(r, "operations", operation) && ListHas(r, "apiGroups", type.group) &&
                ListHas(r, "apiVersions", type.version) && ListHas(r, "resources", type.plural));
      }
      if (!rule || !SelectorMatches(webhook, "objectSelector", labels) ||
          !SelectorMatches(webhook, "namespaceSelector", ns_labels)) {
        continue;
      }
      if (webhook.value("failurePolicy", "Fail") == "Ignore") continue;
      const std::string url =
          webhook.contains("clientConfig") ? webhook["clientConfig"].value("url", "") : "";
      size_t authority = url.find("://");
      authority = authority == std::string::npos ? 0 : authority + 3;
      std::string host = url.substr(authority, url.find_first_of("/?", authority) - authority);
      if (host.find(':') == std::string::npos) host += ":443";
      const std::string inner = "failed calling webhook \"" + webhook.value("name", "") +
                                "\": failed to call webhook: Post \"" + url +
                                "?timeout=" + std::to_string(webhook.value("timeoutSeconds", 10)) +
                                "s\": dial tcp " + host + ": connect: connection refused";
      StatusError e;
      e.code = 500;
      e.reason = "InternalError";
      e.message = "Internal error occurred: " + inner;
      e.causes.push_back({"", inner, ""});
      return e;
    }
  }
  return {};
}

ApiResponse WritePath::Delete(const WriteRequest& r) {
  const ResourceType& type = *r.type;
  auto opts = ParseDeleteOptions(r);
  if (!opts.ok()) return ErrorResponse(opts.error());
  while (true) {
    ObjectPtr current = store_->Get(type, r.ns, r.name);
    if (!current) return ErrorResponse(NotFoundError(type.plural, type.group, r.name));
    if (!opts->uid.empty() && opts->uid != current->index.uid) {
      return ErrorResponse(ConflictError(type.plural, type.group, r.name,
                                         "Precondition failed: UID in precondition: " + opts->uid +
                                             ", UID in object meta: " + current->index.uid));
    }
    if (!opts->resource_version.empty() && opts->resource_version != std::to_string(current->rv)) {
      return ErrorResponse(ConflictError(
          type.plural, type.group, r.name,
          "Precondition failed: ResourceVersion in precondition: " + opts->resource_version +
              ", ResourceVersion in object meta: " + std::to_string(current->rv)));
    }
    if (auto refused = RejectedByWebhook("DELETE", type, r.ns, ParseStored(type, *current))) {
      return ErrorResponse(*refused);
    }
    if (opts->dry_run) {
      bool graceful =
          current->index.has_finalizers || r.type.get() == registry_->Namespaces().get();
      if (!graceful) {
        return type.return_deleted_object
                   ? JsonResponse(200, FullJson(type, *current))
                   : SuccessStatus(r.name, type.group, type.plural, current->index.uid);
      }
      Json obj = ParseStored(type, *current);
      if (!current->index.deleting) ObjectStore::MarkDeleting(type, obj, Now());
      return JsonResponse(200, obj.dump());
    }
    ObjectStore::Committed c = store_->Delete(r.type, current, opts->policy, Journaling(r, 200));
    if (c.code == ObjectStore::Code::kStale) continue;
    AfterCommit(r.type, c);
    if (c.removed && !type.return_deleted_object) {
      return SuccessStatus(r.name, type.group, type.plural, current->index.uid);
    }
    return JsonResponse(200, FullJson(type, *c.object));
  }
}

ApiResponse WritePath::DeleteCollection(const WriteRequest& r, const LabelSelector& labels,
                                        const FieldSelector& fields) {
  const ResourceType& type = *r.type;
  auto opts = ParseDeleteOptions(r);
  if (!opts.ok()) return ErrorResponse(opts.error());
  auto match = [&](const StoredObject& o) {
    return labels.Matches(o.index.labels) &&
           fields.Matches([&](const std::string& f) { return FieldValue(o, f); });
  };
  auto page = store_->List(r.type, r.ns, match, 0, "", 0);
  if (!page.ok()) return ErrorResponse(page.error());
  std::string items;
  for (const auto& obj : page->items) {
    std::string rendered;
    if (opts->dry_run) {
      rendered = FullJson(type, *obj);
    } else {
      ObjectStore::Committed c = store_->Delete(r.type, obj, opts->policy, Journaling(r, 200));
      if (c.code != ObjectStore::Code::kOk) continue;
      AfterCommit(r.type, c);
      rendered = FullJson(type, *c.object);
    }
    items += (items.empty() ? "" : ",") + rendered;
  }
  std::string body = "{\"apiVersion\":\"" + type.api_version + "\",\"items\":[" + items +
                     "],\"kind\":\"" + type.list_kind + "\",\"metadata\":{\"resourceVersion\":\"" +
                     std::to_string(store_->CurrentRv()) + "\"}}";
  return JsonResponse(200, std::move(body));
}

void WritePath::AfterCommit(const TypePtr& type, const ObjectStore::Committed& committed) {
  if (type.get() != registry_->CustomResourceDefinitions().get() || !committed.object) return;
  if (committed.removed) {
    for (const auto& t : registry_->RemoveCrd(committed.object->index.name)) store_->RemoveAll(t);
    return;
  }
  if (committed.object->index.deleting) return;
  Json crd = ParseStored(*type, *committed.object);
  Outcome<std::vector<TypePtr>> served = registry_->AddCrd(crd);
  if (!served.ok()) return;
  for (const TypePtr& t : *served) store_->StartWatchWindow(t);
  auto status = crd.find("status");
  if (status != crd.end() && status->is_object() && status->contains("conditions")) return;
  std::string now = Now();
  std::string storage;
  if (crd["spec"].contains("versions")) {
    for (const auto& v : crd["spec"]["versions"]) {
      if (v.value("storage", false)) storage = v.value("name", "");
    }
  }
  crd["status"] = {{"acceptedNames", crd["spec"].value("names", Json::object())},
                   {"conditions",
                    {{{"type", "NamesAccepted"},
                      {"status", "True"},
                      {"reason", "NoConflicts"},
                      {"message", "no conflicts found"},
                      {"lastTransitionTime", now}},
                     {{"type", "Established"},
                      {"status", "True"},
                      {"reason", "InitialNamesAccepted"},
                      {"message", "the initial names have been accepted"},
                      {"lastTransitionTime", now}}}},
                   {"storedVersions", Json::array({storage})}};
  Meta(crd).erase("resourceVersion");
  store_->Update(type, committed.object, Prepare(*type, crd));
}

Outcome<ObjectPtr> WritePath::CreateCrd(const Json& crd) {
  QueryParams query("");
  ApiRequest http;
  WriteRequest r;
  r.type = registry_->CustomResourceDefinitions();
  r.name = MetaString(crd, "name");
  r.http = &http;
  r.query = &query;
  Options opts;
  std::vector<std::string> warnings;
  auto candidate = CreateCandidate(r, crd, opts, &warnings);
  if (!candidate.ok()) return candidate.error();
  auto created = CommitCreate(r, *candidate, "syncbus-kubesim", false, nullptr);
  if (!created.ok()) return created.error();
  if (created->error) return *created->error;
  return created->object;
}

}  // namespace syncbus::kubesim
