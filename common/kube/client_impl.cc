#include "common/kube/client_impl.h"

#include <cctype>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <future>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <sys/stat.h>

#include "common/base64.h"
#include "common/kube/api_error.h"
#include "common/kube/list_splitter.h"

namespace syncbus::kube {

const char* WatchEventTypeName(WatchEventType t) {
  switch (t) {
    case WatchEventType::kAdded: return "ADDED";
    case WatchEventType::kModified: return "MODIFIED";
    case WatchEventType::kDeleted: return "DELETED";
    case WatchEventType::kBookmark: return "BOOKMARK";
    case WatchEventType::kError: return "ERROR";
  }
  return "UNKNOWN";
}

const char* PatchContentType(PatchType t) {
  switch (t) {
    case PatchType::kJson: return "application/json-patch+json";
    case PatchType::kMerge: return "application/merge-patch+json";
    case PatchType::kStrategicMerge: return "application/strategic-merge-patch+json";
  }
  return "application/merge-patch+json";
}

namespace {

constexpr size_t kMaxWatchLine = 64 << 20;
constexpr size_t kMaxErrorBody = 64 << 10;

// Keeps what fits of an error response's body, up to kMaxErrorBody.
void AppendErrorBody(std::string& body, std::string_view chunk) {
  body.append(chunk.substr(0, kMaxErrorBody - std::min(kMaxErrorBody, body.size())));
}

std::string PercentEncode(std::string_view in) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(in.size());
  for (unsigned char c : in) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

// An Impersonate-Extra-<key> header name: the key's bytes that are not token characters of a
// header name (and '%') percent-encoded, as client-go escapes them.
std::string HeaderKeyEscape(std::string_view key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  static constexpr std::string_view kTokenPunctuation = "!#$&'*+-.^_`|~";
  std::string out;
  for (unsigned char c : key) {
    if (std::isalnum(c) || kTokenPunctuation.find(static_cast<char>(c)) != std::string_view::npos) {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

// A kubeconfig proxy-url as libcurl takes it: client-go's socks5 proxies resolve host names on
// the proxy, which is libcurl's socks5h.
std::string ProxyForCurl(const std::string& proxy_url) {
  if (proxy_url.starts_with("socks5://")) return "socks5h://" + proxy_url.substr(9);
  return proxy_url;
}

std::string TrimTrailingSlash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

Result<WatchEvent> ParseWatchLine(std::string_view line) {
  Json event = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  auto malformed = [&] {
    return Internal("watch: malformed event: " + std::string(line.substr(0, 200)));
  };
  if (!event.is_object() || !event.contains("type") || !event["type"].is_string() ||
      !event.contains("object") || !event["object"].is_object()) {
    return malformed();
  }
  const std::string& type = event["type"].get_ref<const std::string&>();
  WatchEvent out{WatchEventType::kAdded, std::move(event["object"])};
  if (type == "ADDED") {
    out.type = WatchEventType::kAdded;
  } else if (type == "MODIFIED") {
    out.type = WatchEventType::kModified;
  } else if (type == "DELETED") {
    out.type = WatchEventType::kDeleted;
  } else if (type == "BOOKMARK") {
    out.type = WatchEventType::kBookmark;
  } else if (type == "ERROR") {
    return ApiErrorFromStatus(out.object).Annotate("watch");
  } else {
    return malformed();
  }
  return out;
}

// The query of a write that is (or is not) a dry run.
Query DryRunQuery(bool dry_run) {
  return dry_run ? Query{{"dryRun", "All"}} : Query{};
}

// Adds the selectors a list filters by.
void AddSelectors(Query& query, const ListOptions& options) {
  if (!options.label_selector.empty()) query.emplace_back("labelSelector", options.label_selector);
  if (!options.field_selector.empty()) query.emplace_back("fieldSelector", options.field_selector);
}

void SetAccept(http::Request& request, const char* accept) {
  for (auto& [name, value] : request.headers) {
    if (name == "Accept") value = accept;
  }
}

// Interprets a transport result: 2xx with a JSON body, or the mapped API error.
Result<Json> ToJson(Result<http::Response> result) {
  if (!result.ok()) return result.status();
  const http::Response& response = *result;
  if (response.status < 200 || response.status > 299) {
    return ApiError(response.status, response.body, response.headers);
  }
  if (response.body.empty()) return Json::object();
  Json body = Json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    return Internal("invalid JSON in HTTP " + std::to_string(response.status) + " response");
  }
  return body;
}

template <typename T>
Result<T> Await(const std::function<void(std::function<void(Result<T>)>)>& start) {
  auto promise = std::make_shared<std::promise<Result<T>>>();
  std::future<Result<T>> future = promise->get_future();
  start([promise](Result<T> result) { promise->set_value(std::move(result)); });
  return future.get();
}

// What a watch's transport callbacks feed and Next() drains.
struct WatchState {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<WatchEvent> events;
  std::optional<Status> end;  // terminal status, delivered after the queued events
  int http_status = 0;
  http::Headers headers;
  std::string error_body;
  WatchDecoder decoder;

  explicit WatchState(bool metadata_only) : decoder(metadata_only) {}
  void EndWith(Status status) {
    if (!end) end = std::move(status);
  }
};

// Deadlines a watch is held to, so that a server (or a proxy in front of it) that accepted the
// request and then went silent cannot stall a reflector forever: a real apiserver sends its
// response headers at once and closes the watch at timeoutSeconds.
struct WatchDeadlines {
  std::chrono::milliseconds answer_within{0};  // response headers; 0 = no limit
  std::chrono::milliseconds close_within{0};   // the whole watch; 0 = no limit
};

class WatchStreamImpl final : public WatchStream {
 public:
  WatchStreamImpl(std::shared_ptr<WatchState> state, WatchDeadlines deadlines)
      : state_(std::move(state)),
        deadlines_(deadlines),
        opened_(std::chrono::steady_clock::now()) {}
  ~WatchStreamImpl() override { Cancel(); }
  void Attach(std::unique_ptr<http::StreamHandle> handle) { handle_ = std::move(handle); }

  Result<std::optional<WatchEvent>> Next(std::chrono::milliseconds timeout) override {
    std::unique_lock lock(state_->mu);
    auto ready = [&] { return !state_->events.empty() || state_->end.has_value(); };
    auto wake = std::chrono::steady_clock::now() + timeout;
    std::optional<std::chrono::steady_clock::time_point> deadline = NextDeadline();
    if (deadline && *deadline < wake) wake = *deadline;
    state_->cv.wait_until(lock, wake, ready);
    if (!state_->events.empty()) {
      WatchEvent event = std::move(state_->events.front());
      state_->events.pop_front();
      return std::optional<WatchEvent>(std::move(event));
    }
    if (state_->end) return *state_->end;
    deadline = NextDeadline();  // the headers may have come meanwhile
    if (deadline && std::chrono::steady_clock::now() >= *deadline) {
      state_->EndWith(Status(Code::kTimeout, Overdue()));
      Status end = *state_->end;
      lock.unlock();
      if (handle_ != nullptr) handle_->Cancel();
      return end;
    }
    return std::optional<WatchEvent>();
  }

  void Cancel() override {
    {
      std::lock_guard lock(state_->mu);
      state_->events.clear();
      state_->EndWith(Status(Code::kCancelled, "watch cancelled"));
      state_->cv.notify_all();
    }
    if (handle_ != nullptr) handle_->Cancel();
  }

 private:
  // The deadline still ahead of this watch (state_->mu held).
  std::optional<std::chrono::steady_clock::time_point> NextDeadline() const {
    if (state_->http_status == 0 && deadlines_.answer_within.count() > 0) {
      return opened_ + deadlines_.answer_within;
    }
    if (deadlines_.close_within.count() > 0) return opened_ + deadlines_.close_within;
    return std::nullopt;
  }
  std::string Overdue() const {
    auto seconds = [](std::chrono::milliseconds d) {
      return fmt::format("{:g}", std::chrono::duration<double>(d).count());
    };
    if (state_->http_status == 0) {
      return "watch: no response from the server within " + seconds(deadlines_.answer_within) +
             " s";
    }
    return "watch: still open " + seconds(deadlines_.close_within) +
           " s after it started, past its timeoutSeconds: the server or a proxy stopped sending";
  }

  std::shared_ptr<WatchState> state_;
  const WatchDeadlines deadlines_;
  const std::chrono::steady_clock::time_point opened_;
  std::unique_ptr<http::StreamHandle> handle_;
};

}  // namespace

namespace {

// An item of a list of `collection` as it stands alone: reduced to its metadata when `options`
// ask for that, otherwise with the apiVersion and kind a list's items omit.
Json ListItem(const ObjectRef& collection, const ListOptions& options, Json item) {
  if (options.metadata_only) return MetadataOnly(std::move(item));
  if (!item.contains("apiVersion")) item["apiVersion"] = collection.resource.ApiVersion();
  if (!item.contains("kind")) item["kind"] = collection.resource.kind;
  return item;
}

}  // namespace

Json MetadataOnly(Json object) {
  if (object.is_object() && object.value("kind", "") == "PartialObjectMetadata") return object;
  Json metadata = object.is_object() && object.contains("metadata") ? std::move(object["metadata"])
                                                                    : Json::object();
  return {{"apiVersion", "meta.k8s.io/v1"},
          {"kind", "PartialObjectMetadata"},
          {"metadata", std::move(metadata)}};
}

void WatchDecoder::Feed(std::string_view chunk, std::vector<Result<WatchEvent>>& out) {
  if (failed_) return;
  size_t scanned = partial_.size();
  partial_.append(chunk);
  size_t start = 0;
  for (size_t newline = partial_.find('\n', scanned); newline != std::string::npos;
       newline = partial_.find('\n', start)) {
    std::string_view line(partial_.data() + start, newline - start);
    start = newline + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    Result<WatchEvent> event = ParseWatchLine(line);
    if (event.ok() && metadata_only_) event->object = MetadataOnly(std::move(event->object));
    bool ok = event.ok();
    out.push_back(std::move(event));
    if (!ok) {
      failed_ = true;
      partial_.clear();
      return;
    }
  }
  partial_.erase(0, start);
  if (partial_.size() > kMaxWatchLine) {
    failed_ = true;
    partial_.clear();
    out.emplace_back(
        Internal("watch: event larger than " + std::to_string(kMaxWatchLine) + " bytes"));
  }
}

Duration TokenBucket::Reserve(SteadyTime now) {
  double elapsed = std::chrono::duration<double>(now - last_).count();
  if (elapsed > 0) {
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    last_ = now;
  }
  tokens_ -= 1;
  if (tokens_ >= 0) return Duration::zero();
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(-tokens_ / qps_));
}

// The bearer token: fixed, or re-read from token_file whenever the file changes.
struct ClientImpl::TokenSource {
  std::mutex mu;
  std::string file;
  std::string token;
  struct stat seen {};
  bool loaded = false;

  std::string Current() {
    std::lock_guard lock(mu);
    if (file.empty()) return token;
    struct stat now {};
    if (stat(file.c_str(), &now) != 0) return token;  // keep the last good token
    if (loaded && now.st_ino == seen.st_ino && now.st_size == seen.st_size &&
        now.st_mtim.tv_sec == seen.st_mtim.tv_sec && now.st_mtim.tv_nsec == seen.st_mtim.tv_nsec) {
      return token;
    }
    std::ifstream in(file, std::ios::binary);
    if (!in) return token;
    std::ostringstream content;
    content << in.rdbuf();
    std::string fresh = content.str();
    while (!fresh.empty() && std::isspace(static_cast<unsigned char>(fresh.back())))
      fresh.pop_back();
    if (!fresh.empty()) token = std::move(fresh);
    seen = now;
    loaded = true;
    return token;
  }
};

// Holds requests back until the token bucket allows them; sends them from its own thread.
class ClientImpl::Pacer {
 public:
  explicit Pacer(double qps)
      : bucket_(qps, std::max(1.0, std::ceil(qps)), std::chrono::steady_clock::now()) {}
  ~Pacer() {
    std::deque<Item> pending;
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      pending.swap(queue_);
      cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
    for (Item& item : pending) item.cancel();
  }

  // Runs `send` now if a token is free and nothing waits, else later from the pacing thread;
  // runs `cancel` instead if the pacer is destroyed first.
  void Submit(std::function<void()> send, std::function<void()> cancel) {
    std::unique_lock lock(mu_);
    SteadyTime now = std::chrono::steady_clock::now();
    Duration delay = bucket_.Reserve(now);
    if (delay <= Duration::zero() && queue_.empty()) {
      lock.unlock();
      send();
      return;
    }
    queue_.push_back({now + delay, std::move(send), std::move(cancel)});
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
    cv_.notify_all();
  }

  // Takes a token for a blocking caller; returns how long it must wait.
  Duration Reserve() {
    std::lock_guard lock(mu_);
    return bucket_.Reserve(std::chrono::steady_clock::now());
  }

 private:
  struct Item {
    SteadyTime due;
    std::function<void()> send;
    std::function<void()> cancel;
  };

  void Run() {
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      SteadyTime due = queue_.front().due;
      if (cv_.wait_until(lock, due, [this] { return stop_; })) return;
      Item item = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      item.send();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  TokenBucket bucket_;
  std::deque<Item> queue_;
  bool stop_ = false;
  std::thread thread_;
};

std::shared_ptr<ClientImpl> ClientImpl::WithRequestTimeout(
    std::chrono::milliseconds request_timeout, const Clock& clock) const {
  ClusterConfig config = config_;
  config.request_timeout = request_timeout;
  return std::make_shared<ClientImpl>(std::move(config), transport_, clock);
}

ClientImpl::ClientImpl(ClusterConfig config, std::shared_ptr<http::Transport> transport,
                       const Clock& clock)
    : config_(std::move(config)),
      base_url_(TrimTrailingSlash(config_.server)),
      transport_(std::move(transport)),
      token_(std::make_unique<TokenSource>()) {
  token_->file = config_.token_file;
  token_->token = config_.bearer_token;
  if (config_.bearer_token.empty() && config_.token_file.empty()) {
    if (!config_.username.empty() || !config_.password.empty()) {
      fixed_headers_.emplace_back(
          "Authorization", "Basic " + EncodeBase64(config_.username + ":" + config_.password));
    } else if (config_.exec != nullptr) {
      exec_ = std::make_shared<ExecCredentialPlugin>(config_.exec, config_.tls, clock);
    }
  }
  const Impersonation& as = config_.impersonate;
  if (!as.empty()) {
    fixed_headers_.emplace_back("Impersonate-User", as.user);
    if (!as.uid.empty()) fixed_headers_.emplace_back("Impersonate-Uid", as.uid);
    for (const std::string& group : as.groups) {
      fixed_headers_.emplace_back("Impersonate-Group", group);
    }
    for (const auto& [key, values] : as.extra) {
      for (const std::string& value : values) {
        fixed_headers_.emplace_back("Impersonate-Extra-" + HeaderKeyEscape(key), value);
      }
    }
  }
  if (config_.qps > 0) pacer_ = std::make_unique<Pacer>(config_.qps);
}

ClientImpl::~ClientImpl() = default;

std::string ClientImpl::Url(const std::string& path, const Query& query) const {
  std::string url = base_url_ + path;
  char separator = '?';
  for (const auto& [key, value] : query) {
    url += separator;
    url += PercentEncode(key);
    url += '=';
    url += PercentEncode(value);
    separator = '&';
  }
  return url;
}

Result<ClientImpl::Prepared> ClientImpl::NewRequest(std::string method, std::string url,
                                                    std::string content_type,
                                                    std::string body) const {
  Prepared prepared;
  http::Request& request = prepared.request;
  request.method = std::move(method);
  request.url = std::move(url);
  request.headers.emplace_back("Accept", "application/json");
  request.headers.emplace_back("User-Agent", config_.user_agent);
  request.tls = config_.tls;
  if (std::string token = token_->Current(); !token.empty()) {
    request.headers.emplace_back("Authorization", "Bearer " + token);
  } else if (exec_ != nullptr) {
    Result<std::shared_ptr<const ExecCredentialPlugin::Credential>> credential = exec_->Get();
    if (!credential.ok()) return credential.status().Annotate("getting credentials");
    if (!(*credential)->token.empty()) {
      request.headers.emplace_back("Authorization", "Bearer " + (*credential)->token);
    }
    if ((*credential)->tls != nullptr) request.tls = (*credential)->tls;
    prepared.credential = std::move(*credential);
  }
  request.headers.insert(request.headers.end(), fixed_headers_.begin(), fixed_headers_.end());
  if (!content_type.empty()) request.headers.emplace_back("Content-Type", std::move(content_type));
  request.body = std::move(body);
  request.timeout = config_.request_timeout;
  request.proxy = ProxyForCurl(config_.proxy_url);
  request.connect_address = config_.connect_address;
  return prepared;
}

void ClientImpl::CallJson(Result<Prepared> prepared, Callback<Json> done, http::SendGuard guard) {
  if (!prepared.ok()) {
    done(prepared.status());
    return;
  }
  prepared->request.send_guard = std::move(guard);
  auto shared_done = std::make_shared<Callback<Json>>(std::move(done));
  // The plugin outlives the client for requests still in flight.
  auto send = [transport = transport_, request = std::move(prepared->request), shared_done,
               exec = exec_, credential = std::move(prepared->credential)]() mutable {
    transport->Send(
        std::move(request), [shared_done, exec, credential](Result<http::Response> result) {
          if (exec != nullptr && credential != nullptr && result.ok() && result->status == 401) {
            exec->Rejected(credential);
          }
          (*shared_done)(ToJson(std::move(result)));
        });
  };
  if (pacer_ == nullptr) {
    send();
    return;
  }
  pacer_->Submit(std::move(send),
                 [shared_done] { (*shared_done)(Status(Code::kCancelled, "client shut down")); });
}

void ClientImpl::GetAsync(const ObjectRef& ref, Callback<Json> done) {
  CallJson(NewRequest("GET", Url(ref.Path()), {}, {}), std::move(done));
}

void ClientImpl::CreateAsync(const ObjectRef& collection, const Json& object, Callback<Json> done,
                             http::SendGuard guard, const WriteOptions& options) {
  ObjectRef target{collection.resource, collection.ns, {}, {}};
  CallJson(NewRequest("POST", Url(target.Path(), DryRunQuery(options.dry_run)), "application/json",
                      object.dump()),
           std::move(done), std::move(guard));
}

void ClientImpl::UpdateAsync(const ObjectRef& ref, const Json& object, Callback<Json> done,
                             http::SendGuard guard) {
  CallJson(NewRequest("PUT", Url(ref.Path()), "application/json", object.dump()), std::move(done),
           std::move(guard));
}

void ClientImpl::ApplyAsync(const ObjectRef& ref, const Json& object, const ApplyOptions& options,
                            Callback<Json> done, http::SendGuard guard) {
  Query query{{"fieldManager", options.field_manager}};
  if (options.force) query.emplace_back("force", "true");
  if (options.dry_run) query.emplace_back("dryRun", "All");
  // JSON is YAML: the apply body is the object as JSON.
  CallJson(
      NewRequest("PATCH", Url(ref.Path(), query), "application/apply-patch+yaml", object.dump()),
      std::move(done), std::move(guard));
}

void ClientImpl::PatchAsync(const ObjectRef& ref, PatchType type, std::string body,
                            Callback<Json> done, http::SendGuard guard,
                            const WriteOptions& options) {
  CallJson(NewRequest("PATCH", Url(ref.Path(), DryRunQuery(options.dry_run)),
                      PatchContentType(type), std::move(body)),
           std::move(done), std::move(guard));
}

void ClientImpl::DeleteAsync(const ObjectRef& ref, const DeleteOptions& options,
                             StatusCallback done, http::SendGuard guard) {
  std::string body;
  if (!options.precondition_uid.empty() || !options.precondition_resource_version.empty() ||
      !options.propagation_policy.empty()) {
    Json delete_options = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
    if (!options.precondition_uid.empty()) {
      delete_options["preconditions"]["uid"] = options.precondition_uid;
    }
    if (!options.precondition_resource_version.empty()) {
      delete_options["preconditions"]["resourceVersion"] = options.precondition_resource_version;
    }
    if (!options.propagation_policy.empty()) {
      delete_options["propagationPolicy"] = options.propagation_policy;
    }
    body = delete_options.dump();
  }
  std::string content_type = body.empty() ? "" : "application/json";
  CallJson(
      NewRequest("DELETE", Url(ref.Path(), DryRunQuery(options.dry_run)), std::move(content_type),
                 std::move(body)),
      [done = std::move(done)](const Result<Json>& result) { done(result.status()); },
      std::move(guard));
}

Result<Json> ClientImpl::Get(const ObjectRef& object) {
  return Await<Json>([&](Callback<Json> done) { GetAsync(object, std::move(done)); });
}

Result<Json> ClientImpl::Create(const ObjectRef& collection, const Json& object,
                                const WriteOptions& options) {
  return Await<Json>([&](Callback<Json> done) {
    CreateAsync(collection, object, std::move(done), nullptr, options);
  });
}

Result<Json> ClientImpl::Update(const ObjectRef& ref, const Json& object) {
  return Await<Json>([&](Callback<Json> done) { UpdateAsync(ref, object, std::move(done)); });
}

Result<Json> ClientImpl::Apply(const ObjectRef& ref, const Json& object,
                               const ApplyOptions& options) {
  return Await<Json>(
      [&](Callback<Json> done) { ApplyAsync(ref, object, options, std::move(done)); });
}

Result<Json> ClientImpl::Patch(const ObjectRef& ref, PatchType type, const std::string& body,
                               const WriteOptions& options) {
  return Await<Json>(
      [&](Callback<Json> done) { PatchAsync(ref, type, body, std::move(done), nullptr, options); });
}

Status ClientImpl::Delete(const ObjectRef& ref, const DeleteOptions& options) {
  Result<Json> result = Await<Json>([&](Callback<Json> done) {
    DeleteAsync(ref, options, [done = std::move(done)](Status status) {
      if (status.ok()) {
        done(Json::object());
      } else {
        done(std::move(status));
      }
    });
  });
  return result.status();
}

Result<Json> ClientImpl::GetPath(const std::string& path) {
  return Await<Json>([&](Callback<Json> done) {
    CallJson(NewRequest("GET", Url(path), {}, {}), std::move(done));
  });
}

Result<ObjectList> ClientImpl::List(const ObjectRef& collection, const ListOptions& options) {
  if (!options.resource_version.empty()) return ListFromCache(collection, options);
  ObjectRef target{collection.resource, collection.ns, {}, {}};
  ObjectList list;
  std::string continue_token = options.continue_token;
  bool first = true;
  do {
    Query query;
    if (options.limit > 0) query.emplace_back("limit", std::to_string(options.limit));
    AddSelectors(query, options);
    if (!continue_token.empty()) query.emplace_back("continue", continue_token);
    Result<Prepared> request = NewRequest("GET", Url(target.Path(), query), {}, {});
    if (request.ok() && options.metadata_only) SetAccept(request->request, kAcceptMetadataList);
    Result<Json> page =
        Await<Json>([&](Callback<Json> done) { CallJson(std::move(request), std::move(done)); });
    if (!page.ok()) return page.status().Annotate("listing " + target.Describe());
    Json metadata = page->value("metadata", Json::object());
    if (first) list.resource_version = metadata.value("resourceVersion", "");
    first = false;
    continue_token = metadata.value("continue", "");
    std::vector<Json> items;
    if (page->contains("items") && (*page)["items"].is_array()) {
      items.reserve((*page)["items"].size());
      for (Json& item : (*page)["items"]) {
        items.push_back(ListItem(collection, options, std::move(item)));
      }
    }
    *page = Json();  // the rest of the page: its items were moved out
    if (options.on_page) options.on_page(items);
    for (Json& item : items) list.items.push_back(std::move(item));
    if (options.progress != nullptr) {
      if (options.progress->resource_version.empty())
        options.progress->resource_version = list.resource_version;
      options.progress->next_continue = continue_token;
      ++options.progress->pages;
    }
  } while (!continue_token.empty());
  return list;
}

Result<ObjectList> ClientImpl::ListFromCache(const ObjectRef& collection,
                                             const ListOptions& options) {
  if (pacer_ != nullptr) std::this_thread::sleep_for(pacer_->Reserve());
  ObjectRef target{collection.resource, collection.ns, {}, {}};
  Query query{{"resourceVersion", options.resource_version}};
  AddSelectors(query, options);
  Result<Prepared> prepared = NewRequest("GET", Url(target.Path(), query), {}, {});
  if (!prepared.ok()) return prepared.status().Annotate("listing " + target.Describe());
  if (options.metadata_only) SetAccept(prepared->request, kAcceptMetadataList);

  ObjectList list;
  std::vector<Json> batch;
  const size_t batch_size = options.limit > 0 ? static_cast<size_t>(options.limit) : 500;
  int pages = 0;
  auto flush = [&] {  // hands `batch` over as a page
    if (options.on_page) options.on_page(batch);
    for (Json& item : batch) list.items.push_back(std::move(item));
    batch.clear();
    ++pages;
  };
  ListSplitter splitter(
      [&](std::string_view text) {
        Json item = Json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (item.is_discarded() || !item.is_object()) {
          return Status(Code::kInternal, "an item of the list is not a JSON object");
        }
        batch.push_back(ListItem(collection, options, std::move(item)));
        if (batch.size() >= batch_size) flush();
        return Status::Ok();
      },
      [&](std::string_view text) {
        Json metadata = Json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (metadata.is_object()) list.resource_version = metadata.value("resourceVersion", "");
        return Status::Ok();
      });
  int http_status = 0;
  http::Headers headers;
  std::string error_body;
  Status split;
  http::Transport::StreamCallbacks callbacks;
  callbacks.on_headers = [&](int status, const http::Headers& h) {
    http_status = status;
    headers = h;
    if (status == 401 && exec_ != nullptr && prepared->credential != nullptr)
      exec_->Rejected(prepared->credential);
  };
  callbacks.on_data = [&](std::string_view chunk) {
    if (http_status != 200) {
      AppendErrorBody(error_body, chunk);
    } else if (split.ok()) {
      split = splitter.Feed(chunk);  // after an error the rest is read and dropped
    }
  };
  Status fetched = transport_->Fetch(std::move(prepared->request), callbacks);
  if (!fetched.ok()) return fetched.Annotate("listing " + target.Describe());
  if (http_status != 200) {
    return ApiError(http_status, error_body, headers).Annotate("listing " + target.Describe());
  }
  if (split.ok()) split = splitter.Finish();
  if (!split.ok()) return split.Annotate("listing " + target.Describe());
  if (!batch.empty() || pages == 0) flush();
  if (options.progress != nullptr) {  // nothing to resume: the next try starts over
    options.progress->resource_version = list.resource_version;
    options.progress->next_continue.clear();
    options.progress->pages += pages;
  }
  return list;
}

Result<std::unique_ptr<WatchStream>> ClientImpl::Watch(const ObjectRef& collection,
                                                       const WatchOptions& options) {
  if (pacer_ != nullptr) std::this_thread::sleep_for(pacer_->Reserve());
  ObjectRef target{collection.resource, collection.ns, {}, {}};
  Query query{{"watch", "1"}};
  if (!options.resource_version.empty())
    query.emplace_back("resourceVersion", options.resource_version);
  if (options.allow_bookmarks) query.emplace_back("allowWatchBookmarks", "true");
  if (options.timeout_seconds > 0)
    query.emplace_back("timeoutSeconds", std::to_string(options.timeout_seconds));
  if (!options.label_selector.empty()) query.emplace_back("labelSelector", options.label_selector);
  Result<Prepared> prepared = NewRequest("GET", Url(target.Path(), query), {}, {});
  if (!prepared.ok()) return prepared.status().Annotate("watch");
  http::Request request = std::move(prepared->request);
  if (options.metadata_only) SetAccept(request, kAcceptMetadata);
  request.timeout = std::chrono::milliseconds(0);

  auto state = std::make_shared<WatchState>(options.metadata_only);
  http::Transport::StreamCallbacks callbacks;
  callbacks.on_headers = [state, exec = exec_, credential = std::move(prepared->credential)](
                             int status, const http::Headers& headers) {
    if (status == 401 && exec != nullptr && credential != nullptr) exec->Rejected(credential);
    std::lock_guard lock(state->mu);
    state->http_status = status;
    state->headers = headers;
  };
  callbacks.on_data = [state](std::string_view chunk) {
    std::lock_guard lock(state->mu);
    if (state->end) return;
    if (state->http_status != 200) {
      AppendErrorBody(state->error_body, chunk);
      return;
    }
    std::vector<Result<WatchEvent>> decoded;
    state->decoder.Feed(chunk, decoded);
    for (Result<WatchEvent>& event : decoded) {
      if (event.ok()) {
        state->events.push_back(std::move(event).value());
      } else {
        state->EndWith(event.status());
      }
    }
    if (!decoded.empty()) state->cv.notify_all();
  };
  callbacks.on_done = [state](Status status) {
    std::lock_guard lock(state->mu);
    if (state->http_status != 0 && state->http_status != 200) {
      state->EndWith(
          ApiError(state->http_status, state->error_body, state->headers).Annotate("watch"));
    } else if (status.ok()) {
      state->EndWith(Unavailable("watch closed"));
    } else {
      state->EndWith(std::move(status));
    }
    state->cv.notify_all();
  };
  WatchDeadlines deadlines;
  deadlines.answer_within = config_.request_timeout;
  if (options.timeout_seconds > 0 && config_.request_timeout.count() > 0) {
    deadlines.close_within =
        std::chrono::seconds(options.timeout_seconds) + config_.request_timeout;
  }
  auto stream = std::make_unique<WatchStreamImpl>(state, deadlines);
  stream->Attach(transport_->Stream(std::move(request), std::move(callbacks)));
  return std::unique_ptr<WatchStream>(std::move(stream));
}

}  // namespace syncbus::kube
