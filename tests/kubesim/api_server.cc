#include "tests/kubesim/api_server.h"

#include <atomic>
#include <stdexcept>

#include "tests/kubesim/continue_token.h"
#include "tests/kubesim/json_util.h"
#include "tests/kubesim/media_type.h"
#include "tests/kubesim/object_store.h"
#include "tests/kubesim/request_target.h"
#include "tests/kubesim/resource_registry.h"
#include "tests/kubesim/responses.h"
#include "tests/kubesim/watch_hub.h"
#include "tests/kubesim/write_path.h"

namespace syncbus::kubesim {
namespace {

constexpr auto kDefaultWatchTimeout = std::chrono::seconds(1800);

StatusError PathNotFound() {
  StatusError e;
  e.code = 404;
  e.reason = "NotFound";
  e.message = "the server could not find the requested resource";
  return e;
}

ApiResponse NotFoundPath() {
  return ErrorResponse(PathNotFound());
}

// A resourceVersion parameter as kube-apiserver's APIObjectVersioner parses it: "" is 0, anything
// else a base-10 uint64 by strconv.ParseUint's rules. Its failure is the storage layer's field
// error, which kube-apiserver passes on as a 500 without a reason.
Outcome<uint64_t> ParseResourceVersion(const std::string& text) {
  if (text.empty()) return uint64_t{0};
  uint64_t v = 0;
  const char* problem = nullptr;
  for (char c : text) {
    if (c < '0' || c > '9') {
      problem = "invalid syntax";
      break;
    }
    auto digit = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10) {
      problem = "value out of range";
      break;
    }
    v = v * 10 + digit;
  }
  if (problem == nullptr) return v;
  std::string quoted = GoQuote(text);
  return UnclassifiedError("resourceVersion: Invalid value: " + quoted +
                           ": strconv.ParseUint: parsing " + quoted + ": " + problem);
}

// etcd's answer to a read at a revision it has not reached, passed on by kube-apiserver.
StatusError FutureRevision() {
  return UnclassifiedError("etcdserver: mvcc: required revision is a future revision");
}

// kube-apiserver 1.26's ValidateListOptions: 422 Invalid on ListOptions.meta.k8s.io.
std::optional<StatusError> ValidateListOptions(const QueryParams& query, bool watch) {
  const std::string match = query.Get("resourceVersionMatch").value_or("");
  if (match.empty()) return std::nullopt;
  std::vector<FieldError> errors;
  if (watch) {
    errors.push_back(
        Forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden for watch"));
  } else {
    const std::string rv = query.Get("resourceVersion").value_or("");
    if (rv.empty()) {
      errors.push_back(Forbidden("resourceVersionMatch",
                                 "resourceVersionMatch is forbidden unless resourceVersion is "
                                 "provided"));
    }
    if (!query.Get("continue").value_or("").empty()) {
      errors.push_back(Forbidden("resourceVersionMatch",
                                 "resourceVersionMatch is forbidden when continue is provided"));
    }
    if (match != "Exact" && match != "NotOlderThan") {
      errors.push_back(NotSupported("resourceVersionMatch", match, {"Exact", "NotOlderThan", ""}));
    }
    if (match == "Exact" && rv == "0") {
      errors.push_back(Forbidden("resourceVersionMatch",
                                 "resourceVersionMatch \"exact\" is forbidden for resourceVersion "
                                 "\"0\""));
    }
  }
  if (errors.empty()) return std::nullopt;
  return InvalidError("ListOptions", "meta.k8s.io", "", errors);
}

// Whether kube-apiserver 1.26 serves a read from its watch cache rather than from etcd
// (Cacher.Get, Cacher.GetList's shouldDelegateList): a get with a resourceVersion; a list with
// one, unless it continues a paged list, is limited (with a resourceVersion other than "0") or
// asks for resourceVersionMatch=Exact.
bool ServedFromCache(const QueryParams& query, bool single_object) {
  const std::string rv = query.Get("resourceVersion").value_or("");
  if (rv.empty()) return false;
  if (single_object) return true;
  const std::string limit = query.Get("limit").value_or("");
  bool limited = !limit.empty() && limit != "0" && rv != "0";
  return !limited && query.Get("continue").value_or("").empty() &&
         query.Get("resourceVersionMatch").value_or("") != "Exact";
}

// A read from the watch cache at `rv_text`: the cache must have reached it. kube-apiserver
// waits up to 3 s for that (ApiServer::kFreshnessWait; the transport holds the request), then
// answers 504 with the cache's resourceVersion.
Outcome<uint64_t> CachedRead(WatchHub& hub, const ResourceType& type, const std::string& rv_text) {
  auto rv = ParseResourceVersion(rv_text);
  if (!rv.ok()) return rv;
  uint64_t cache_rv = hub.CacheRv(type.key);
  if (*rv > cache_rv) return TooLargeResourceVersion(*rv, cache_rv, 1);
  return rv;
}

bool ParseRv(const std::string& text, uint64_t* out) {
  if (text.empty()) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

std::vector<std::string> FieldLabels(const ResourceType& type) {
  std::vector<std::string> out = {"metadata.name"};
  if (type.namespaced) out.push_back("metadata.namespace");
  out.insert(out.end(), type.field_selectors.begin(), type.field_selectors.end());
  return out;
}

}  // namespace

struct ApiServer::State {
  explicit State(Options o)
      : options(std::move(o)),
        clock(options.clock != nullptr ? options.clock : &RealClock()),
        hub(*clock,
            options.watch_history == 0 ? WatchWindow{} : WatchWindow::Fixed(options.watch_history)),
        store(&hub, registry.Namespaces(), [this] { return FormatNow(); }),
        writes(&registry, &store, clock, options.name) {}

  std::string FormatNow() const;

  Options options;
  const Clock* clock;
  ResourceRegistry registry;
  WatchHub hub;
  ObjectStore store;
  WritePath writes;
  std::atomic<uint64_t> requests{0};
};

std::string ApiServer::State::FormatNow() const {
  return FormatTime(clock->WallNow());
}

ApiServer::ApiServer(Options options) : state_(std::make_unique<State>(std::move(options))) {
  for (const char* ns : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
    Call("POST", "/api/v1/namespaces",
         {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
  }
  for (const auto& path : state_->options.crd_files) {
    auto crd = LoadCrdFile(path);
    if (!crd.ok()) throw std::invalid_argument(crd.status().ToString());
    auto created = state_->writes.CreateCrd(*crd);
    if (!created.ok()) {
      throw std::invalid_argument(path + ": " + created.error().message);
    }
  }
}

ApiServer::~ApiServer() = default;

bool ApiServer::IsWatch(const ApiRequest& request) {
  return request.method == "GET" && QueryParams(request.query).Flag("watch");
}

ApiResponse ApiServer::Call(const std::string& method, const std::string& path, const Json& body,
                            const std::string& content_type, const std::string& query) {
  ApiRequest request;
  request.method = method;
  request.path = path;
  request.query = query;
  if (!body.is_null()) {
    request.body = body.dump();
    request.headers.emplace_back("Content-Type", content_type);
  }
  return Serve(request, nullptr);
}

namespace {

// Where a resource request goes, once its type is known.
struct Resolved {
  TypePtr type;
  RequestTarget target;
};

Outcome<Resolved> Resolve(const ResourceRegistry& registry, const RequestTarget& target) {
  StatusError not_found = PathNotFound();
  TypePtr type = registry.Find(target.group, target.version, target.plural);
  if (!type) return not_found;
  bool bad = (target.namespaced_path && !type->namespaced) ||
             (!target.namespaced_path && type->namespaced && !target.name.empty());
  if (!target.subresource.empty()) {
    bool known = (target.subresource == "status" && type->status_subresource) ||
                 (target.subresource == "finalize" && type->plural == "namespaces");
    if (!known || target.name.empty()) bad = true;
  }
  if (bad) return not_found;
  return Resolved{type, target};
}

// A page as a PartialObjectMetadataList, in kube-apiserver's field order; an empty one has
// "items":null.
ApiResponse MetadataListResponse(const ResponseForm& form, const ObjectStore::Page& page,
                                 uint64_t list_rv, bool unfiltered) {
  std::string body = "{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":\"";
  body += form.ApiVersion();
  body += "\",\"metadata\":{\"resourceVersion\":\"" + std::to_string(list_rv) + "\"";
  if (!page.last_key.empty()) {
    body +=
        ",\"continue\":\"" + EncodeContinue(static_cast<int64_t>(page.rv), page.last_key) + "\"";
    if (unfiltered) body += ",\"remainingItemCount\":" + std::to_string(page.remaining);
  }
  body += "},\"items\":";
  if (page.items.empty()) {
    body += "null";
  } else {
    char separator = '[';
    for (const auto& obj : page.items) {
      body += separator;
      separator = ',';
      body += MetadataJson(form, *obj);
    }
    body += ']';
  }
  body += '}';
  return JsonResponse(200, std::move(body));
}

ApiResponse ListObjects(const ObjectStore& store, WatchHub& hub, const TypePtr& type,
                        const std::string& ns, const QueryParams& query, const ResponseForm& form) {
  auto labels = LabelSelector::Parse(query.Get("labelSelector").value_or(""));
  if (!labels.ok()) return ErrorResponse(labels.error());
  auto fields = FieldSelector::Parse(query.Get("fieldSelector").value_or(""), FieldLabels(*type));
  if (!fields.ok()) return ErrorResponse(fields.error());
  size_t limit = 0;
  if (auto l = query.Get("limit"); l && !l->empty()) {
    uint64_t v = 0;
    if (!ParseRv(*l, &v)) return ErrorResponse(BadRequest("invalid limit: " + *l));
    limit = static_cast<size_t>(v);
  }
  if (auto invalid = ValidateListOptions(query, /*watch=*/false)) return ErrorResponse(*invalid);
  const std::string rv_text = query.Get("resourceVersion").value_or("");
  const std::string match_mode = query.Get("resourceVersionMatch").value_or("");
  const std::string cont = query.Get("continue").value_or("");
  uint64_t at_rv = 0;
  std::string after;
  uint64_t current = store.CurrentRv();
  bool from_cache = ServedFromCache(query, /*single_object=*/false);
  if (from_cache) {
    auto fresh = CachedRead(hub, *type, rv_text);
    if (!fresh.ok()) return ErrorResponse(fresh.error());
    limit = 0;  // the watch cache ignores limit
  } else if (!cont.empty()) {
    auto token = DecodeContinue(cont);
    if (!token.ok()) return ErrorResponse(token.error());
    if (!rv_text.empty() && rv_text != "0") {
      return ErrorResponse(
          BadRequest("specifying resource version is not allowed when using continue"));
    }
    // A token's resourceVersion below 0 continues at the latest state.
    at_rv = token->rv < 0 ? 0 : static_cast<uint64_t>(token->rv);
    after = token->start;
    if (at_rv > current) return ErrorResponse(FutureRevision());
  } else if (!rv_text.empty()) {
    auto requested = ParseResourceVersion(rv_text);
    if (!requested.ok()) {
      return ErrorResponse(BadRequest("invalid resource version: " + requested.error().message));
    }
    if (match_mode == "NotOlderThan") {
      if (*requested > current) {
        return ErrorResponse(TooLargeResourceVersion(*requested, current, 0));
      }
    } else if (*requested > 0) {
      // Exact, or a limited list's resourceVersion, which etcd reads at exactly that revision.
      if (*requested > current) return ErrorResponse(FutureRevision());
      if (*requested < hub.ListFloor(type->key)) {
        return ErrorResponse(Expired("The resourceVersion for the provided list is too old."));
      }
      at_rv = *requested;
    }
  }
  auto match = [&](const StoredObject& o) {
    return labels->Matches(o.index.labels) &&
           fields->Matches([&](const std::string& f) { return FieldValue(o, f); });
  };
  auto page = store.List(type, ns, match, limit, after, at_rv);
  if (!page.ok()) {
    StatusError e = page.error();
    e.list_continue = EncodeContinue(-1, after);
    return ErrorResponse(e);
  }
  if (auto mismatch = FormMismatch(form, *type, /*list=*/true)) return ErrorResponse(*mismatch);
  // The watch cache answers at its own resourceVersion, etcd at its latest revision.
  uint64_t list_rv = from_cache ? page->cache_rv : page->rv;
  if (form.metadata())
    return MetadataListResponse(form, *page, list_rv, labels->empty() && fields->empty());
  std::string body;
  body.reserve(256 + page->items.size() * 512);
  body += "{\"apiVersion\":\"";
  body += type->api_version;
  body += "\",\"items\":[";
  bool first = true;
  for (const auto& obj : page->items) {
    if (!first) body += ',';
    first = false;
    if (type->custom) {
      body += FullJson(*type, *obj);
    } else {
      body += obj->body;
    }
  }
  body += "],\"kind\":\"";
  body += type->list_kind;
  body += "\",\"metadata\":{";
  if (!page->last_key.empty()) {
    body +=
        "\"continue\":\"" + EncodeContinue(static_cast<int64_t>(page->rv), page->last_key) + "\",";
    if (labels->empty() && fields->empty()) {
      body += "\"remainingItemCount\":" + std::to_string(page->remaining) + ",";
    }
  }
  body += "\"resourceVersion\":\"" + std::to_string(list_rv) + "\"}}";
  return JsonResponse(200, std::move(body));
}

}  // namespace

ApiResponse ApiServer::Handle(const ApiRequest& request) {
  return Serve(request, state_->options.journal);
}

ApiResponse ApiServer::Serve(const ApiRequest& request, Journal* journal) {
  ++state_->requests;
  RequestTarget target = ParseTarget(request.path);
  ResourceRegistry& registry = state_->registry;
  bool get = request.method == "GET";
  switch (target.kind) {
    case RequestTarget::Kind::kUnknown: return NotFoundPath();
    case RequestTarget::Kind::kCoreVersions:
      if (!get) return ErrorResponse(MethodNotAllowed());
      return JsonResponse(200, registry.ApiVersions().dump());
    case RequestTarget::Kind::kGroupList:
      if (!get) return ErrorResponse(MethodNotAllowed());
      return JsonResponse(200, registry.ApiGroupList().dump());
    case RequestTarget::Kind::kGroup: {
      if (!get) return ErrorResponse(MethodNotAllowed());
      auto group = registry.ApiGroup(target.group);
      return group ? JsonResponse(200, group->dump()) : NotFoundPath();
    }
    case RequestTarget::Kind::kResourceList: {
      if (!get) return ErrorResponse(MethodNotAllowed());
      if (target.group.empty() && target.version != "v1") return NotFoundPath();
      auto list = registry.ResourceList(target.group, target.version);
      return list ? JsonResponse(200, list->dump()) : NotFoundPath();
    }
    case RequestTarget::Kind::kVersion: {
      Json version = {{"major", "1"},
                      {"minor", "26"},
                      {"gitVersion", "v1.26.15"},
                      {"gitCommit", "1649f592f1909b97aa3c2a0a8f968a3fd05a7b8b"},
                      {"gitTreeState", "clean"},
                      {"buildDate", "2024-03-14T00:54:27Z"},
                      {"goVersion", "go1.21.8"},
                      {"compiler", "gc"},
                      {"platform", "linux/amd64"}};
      return JsonResponse(200, version.dump());
    }
    case RequestTarget::Kind::kHealth: {
      ApiResponse ok;
      ok.status = 200;
      ok.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
      ok.body = "ok";
      return ok;
    }
    case RequestTarget::Kind::kResource: break;
  }
  auto resolved = Resolve(registry, target);
  if (!resolved.ok()) return ErrorResponse(resolved.error());
  const TypePtr& type = resolved->type;
  QueryParams query(request.query);
  WriteRequest write{type, target.ns, target.name, target.subresource, &request, &query, journal};
  const std::string& m = request.method;
  if (m == "GET") {
    if (query.Flag("watch")) {
      return ErrorResponse(BadRequest("watch requests are served as streams"));
    }
    auto form = NegotiateForm(request.headers);
    if (!form.ok()) return ErrorResponse(form.error());
    if (!target.name.empty()) {
      if (ServedFromCache(query, /*single_object=*/true)) {
        auto fresh = CachedRead(state_->hub, *type, query.Get("resourceVersion").value_or(""));
        if (!fresh.ok()) return ErrorResponse(fresh.error());
      }
      ObjectPtr obj = state_->store.Get(*type, target.ns, target.name);
      if (!obj) return ErrorResponse(NotFoundError(type->plural, type->group, target.name));
      if (auto mismatch = FormMismatch(*form, *type, /*list=*/false))
        return ErrorResponse(*mismatch);
      return JsonResponse(200,
                          form->metadata() ? MetadataJson(*form, *obj) : FullJson(*type, *obj));
    }
    return ListObjects(state_->store, state_->hub, type, target.ns, query, *form);
  }
  if (m == "POST") {
    if (!target.name.empty()) return ErrorResponse(MethodNotAllowed());
    if (type->namespaced && target.ns.empty()) return ErrorResponse(MethodNotAllowed());
    return state_->writes.Create(write);
  }
  if (m == "PUT") {
    if (target.name.empty()) return ErrorResponse(MethodNotAllowed());
    return state_->writes.Update(write);
  }
  if (m == "PATCH") {
    if (target.name.empty()) return ErrorResponse(MethodNotAllowed());
    if (target.subresource == "finalize") return ErrorResponse(MethodNotAllowed());
    return state_->writes.Patch(write);
  }
  if (m == "DELETE") {
    if (!target.subresource.empty()) return ErrorResponse(MethodNotAllowed());
    if (!target.name.empty()) return state_->writes.Delete(write);
    auto labels = LabelSelector::Parse(query.Get("labelSelector").value_or(""));
    if (!labels.ok()) return ErrorResponse(labels.error());
    auto fields = FieldSelector::Parse(query.Get("fieldSelector").value_or(""), FieldLabels(*type));
    if (!fields.ok()) return ErrorResponse(fields.error());
    return state_->writes.DeleteCollection(write, *labels, *fields);
  }
  return ErrorResponse(MethodNotAllowed());
}

std::variant<ApiResponse, uint64_t> ApiServer::StartWatch(const ApiRequest& request,
                                                          std::shared_ptr<WatchSink> sink) {
  ++state_->requests;
  RequestTarget target = ParseTarget(request.path);
  if (target.kind != RequestTarget::Kind::kResource) return NotFoundPath();
  if (request.method != "GET") return ErrorResponse(MethodNotAllowed());
  auto resolved = Resolve(state_->registry, target);
  if (!resolved.ok()) return ErrorResponse(resolved.error());
  const TypePtr& type = resolved->type;
  auto form = NegotiateForm(request.headers);
  if (!form.ok()) return ErrorResponse(form.error());
  QueryParams query(request.query);
  std::string field_text = query.Get("fieldSelector").value_or("");
  if (!target.name.empty()) {
    field_text += (field_text.empty() ? "" : ",") + std::string("metadata.name=") + target.name;
  }
  auto labels = LabelSelector::Parse(query.Get("labelSelector").value_or(""));
  if (!labels.ok()) return ErrorResponse(labels.error());
  auto fields = FieldSelector::Parse(field_text, FieldLabels(*type));
  if (!fields.ok()) return ErrorResponse(fields.error());
  WatchHub::Spec spec;
  spec.type = type;
  spec.ns = target.ns;
  spec.labels = std::move(labels).value();
  spec.fields = std::move(fields).value();
  spec.bookmarks = query.Flag("allowWatchBookmarks");
  spec.form = *form;
  auto timeout = std::chrono::seconds(kDefaultWatchTimeout);
  if (auto t = query.Get("timeoutSeconds"); t && !t->empty()) {
    uint64_t seconds = 0;
    if (!ParseRv(*t, &seconds)) return ErrorResponse(BadRequest("invalid timeoutSeconds: " + *t));
    timeout = std::chrono::seconds(seconds);
  }
  spec.deadline = state_->clock->Now() + timeout;
  if (auto invalid = ValidateListOptions(query, /*watch=*/true)) return ErrorResponse(*invalid);
  // From a resourceVersion the server has not reached, the watch waits for it.
  auto rv = ParseResourceVersion(query.Get("resourceVersion").value_or(""));
  if (!rv.ok()) return ErrorResponse(rv.error());
  std::optional<uint64_t> from;
  if (*rv != 0) from = *rv;
  return state_->store.StartWatch(std::move(spec), std::move(sink), from);
}

bool ApiServer::MustWait(const ApiRequest& request) {
  RequestTarget target = ParseTarget(request.path);
  if (request.method != "GET" || target.kind != RequestTarget::Kind::kResource) return false;
  QueryParams query(request.query);
  if (query.Flag("watch") || !ServedFromCache(query, !target.name.empty())) return false;
  auto resolved = Resolve(state_->registry, target);
  if (!resolved.ok()) return false;
  auto rv = ParseResourceVersion(query.Get("resourceVersion").value_or(""));
  return rv.ok() && *rv > state_->hub.CacheRv(resolved->type->key);
}

void ApiServer::StopWatch(uint64_t watch_id) {
  state_->hub.Stop(watch_id);
}

void ApiServer::SendBookmarks() {
  state_->hub.RequestBookmarks();
}

void ApiServer::ExpireHistory() {
  state_->store.ExpireHistory();
}

void ApiServer::CloseAllWatches() {
  state_->hub.CloseAll();
}

ApiServer::Stats ApiServer::stats() const {
  Stats s;
  s.requests = state_->requests.load();
  s.objects = state_->store.Count();
  s.open_watches = state_->hub.open();
  return s;
}

}  // namespace syncbus::kubesim
