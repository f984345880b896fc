#include "common/kube/client_impl.h"

#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <doctest/doctest.h>

#include "common/http/transport.h"
#include "tests/fakes/common/fake_clock.h"

namespace syncbus::kube {
namespace {

using std::chrono::milliseconds;

// A Transport that records requests and answers them inline from a script; streams are driven
// by the test.
class ScriptedTransport final : public http::Transport {
 public:
  using Responder = std::function<Result<http::Response>(const http::Request&)>;
  explicit ScriptedTransport(Responder responder = nullptr) : responder_(std::move(responder)) {}

  void Send(http::Request request, DoneCallback done) override {
    Result<http::Response> answer =
        responder_ ? responder_(request) : http::Response{200, {}, "{}"};
    {
      std::lock_guard lock(mu_);
      requests_.push_back(std::move(request));
    }
    done(std::move(answer));
  }

  std::unique_ptr<http::StreamHandle> Stream(http::Request request,
                                             StreamCallbacks callbacks) override {
    std::lock_guard lock(mu_);
    requests_.push_back(std::move(request));
    stream_ = std::make_shared<StreamState>();
    stream_->callbacks = std::move(callbacks);
    return std::make_unique<Handle>(stream_);
  }

  std::vector<http::Request> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }
  http::Request last() {
    std::lock_guard lock(mu_);
    return requests_.back();
  }

  // Drive the latest stream.
  void Headers(int status) {
    stream_->callbacks.on_headers(status, {{"Content-Type", "application/json"}});
  }
  void Data(const std::string& chunk) { stream_->callbacks.on_data(chunk); }
  void End(Status status) { stream_->Finish(std::move(status)); }
  bool cancelled() { return stream_->cancelled; }

 private:
  struct StreamState {
    StreamCallbacks callbacks;
    std::mutex mu;
    bool done = false;
    bool cancelled = false;
    void Finish(Status status) {
      std::lock_guard lock(mu);
      if (done) return;
      done = true;
      callbacks.on_done(std::move(status));
    }
  };
  class Handle final : public http::StreamHandle {
   public:
    explicit Handle(std::shared_ptr<StreamState> state) : state_(std::move(state)) {}
    ~Handle() override { Cancel(); }
    void Cancel() override {
      state_->cancelled = true;
      state_->Finish(Status(Code::kCancelled, "cancelled"));
    }

   private:
    std::shared_ptr<StreamState> state_;
  };

  Responder responder_;
  std::mutex mu_;
  std::vector<http::Request> requests_;
  std::shared_ptr<StreamState> stream_;
};

http::Response JsonResponse(int status, const Json& body) {
  return {status, {}, body.dump()};
}

ClusterConfig Config(std::string server = "https://hub.example:6443/k8s/clusters/c1/") {
  ClusterConfig config;
  config.server = std::move(server);
  config.bearer_token = "tok";
  config.user_agent = "syncbus-test";
  return config;
}

std::string Header(const http::Request& request, const char* name) {
  return http::FindHeader(request.headers, name).value_or("<none>");
}

TEST_CASE("client: URLs keep the server's path prefix and encode the query") {
  ClientImpl client(Config(), std::make_shared<ScriptedTransport>());
  CHECK(client.Url("/api/v1/namespaces/a/secrets/s") ==
        "https://hub.example:6443/k8s/clusters/c1/api/v1/namespaces/a/secrets/s");
  CHECK(client.Url("/apis", {{"labelSelector", "app in (a,b),env!=prod"}, {"limit", "5"}}) ==
        "https://hub.example:6443/k8s/clusters/c1/"
        "apis?labelSelector=app%20in%20%28a%2Cb%29%2Cenv%21%3Dprod&limit=5");
  ClientImpl plain(Config("http://127.0.0.1:8080"), std::make_shared<ScriptedTransport>());
  CHECK(plain.Url("/api") == "http://127.0.0.1:8080/api");
}

TEST_CASE("client: GET sends Accept, User-Agent, bearer token and the TLS options") {
  auto transport =
      std::make_shared<ScriptedTransport>([](const http::Request&) -> Result<http::Response> {
        return JsonResponse(200, {{"kind", "SyncSet"}, {"metadata", {{"name", "a"}}}});
      });
  ClusterConfig config = Config();
  config.request_timeout = milliseconds(1234);
  auto tls = std::make_shared<http::TlsOptions>();
  tls->ca_pem = "pem";
  config.tls = tls;
  ClientImpl client(config, transport);
  Result<Json> got = client.Get(Object(resources::kSyncSets, "ns", "a"));
  REQUIRE(got.ok());
  CHECK((*got)["metadata"]["name"] == "a");
  http::Request sent = transport->last();
  CHECK(sent.method == "GET");
  CHECK(sent.url ==
        "https://hub.example:6443/k8s/clusters/c1/apis/hive.openshift.io/v1/namespaces/ns/syncsets/"
        "a");
  CHECK(Header(sent, "Accept") == "application/json");
  CHECK(Header(sent, "User-Agent") == "syncbus-test");
  CHECK(Header(sent, "Authorization") == "Bearer tok");
  CHECK(Header(sent, "Content-Type") == "<none>");
  CHECK(sent.tls == tls);
  CHECK(sent.timeout == config.request_timeout);
}

TEST_CASE("client: content types and queries per verb") {
  auto transport = std::make_shared<ScriptedTransport>();
  ClientImpl client(Config("https://h"), transport);
  Json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata", {{"name", "x"}, {"namespace", "n"}}}};

  REQUIRE(client.Apply(Object(resources::kConfigMaps, "n", "x"), cm, {"hive-syncbus", true}).ok());
  http::Request apply = transport->last();
  CHECK(apply.method == "PATCH");
  CHECK(apply.url ==
        "https://h/api/v1/namespaces/n/configmaps/x?fieldManager=hive-syncbus&force=true");
  CHECK(Header(apply, "Content-Type") == "application/apply-patch+yaml");
  CHECK(Json::parse(apply.body) == cm);

  REQUIRE(client.Apply(Object(resources::kConfigMaps, "n", "x"), cm, {"m", false}).ok());
  CHECK(transport->last().url == "https://h/api/v1/namespaces/n/configmaps/x?fieldManager=m");

  REQUIRE(client.Create(Collection(resources::kConfigMaps, "n"), cm).ok());
  CHECK(transport->last().method == "POST");
  CHECK(transport->last().url == "https://h/api/v1/namespaces/n/configmaps");
  CHECK(Header(transport->last(), "Content-Type") == "application/json");

  REQUIRE(client.Update(StatusOf(resources::kClusterSyncs, "c", "c"), cm).ok());
  CHECK(transport->last().method == "PUT");
  CHECK(transport->last().url ==
        "https://h/apis/hiveinternal.openshift.io/v1alpha1/namespaces/c/clustersyncs/c/status");

  struct Case {
    PatchType type;
    const char* content_type;
  };
  for (Case c : {Case{PatchType::kJson, "application/json-patch+json"},
                 Case{PatchType::kMerge, "application/merge-patch+json"},
                 Case{PatchType::kStrategicMerge, "application/strategic-merge-patch+json"}}) {
    REQUIRE(client.Patch(Object(resources::kConfigMaps, "n", "x"), c.type, "{}").ok());
    CHECK(transport->last().method == "PATCH");
    CHECK(Header(transport->last(), "Content-Type") == c.content_type);
    CHECK(transport->last().body == "{}");
  }

  REQUIRE(client.GetPath("/apis/apps/v1").ok());
  CHECK(transport->last().url == "https://h/apis/apps/v1");
}

TEST_CASE("client: delete options and errors") {
  auto transport =
      std::make_shared<ScriptedTransport>([](const http::Request& r) -> Result<http::Response> {
        if (r.url.ends_with("/gone")) {
          return JsonResponse(404, {{"kind", "Status"},
                                    {"message", "configmaps \"gone\" not found"},
                                    {"reason", "NotFound"},
                                    {"code", 404}});
        }
        return JsonResponse(200, {{"kind", "Status"}, {"status", "Success"}});
      });
  ClientImpl client(Config("https://h"), transport);
  CHECK(client.Delete(Object(resources::kConfigMaps, "n", "x"), {}).ok());
  CHECK(transport->last().method == "DELETE");
  CHECK(transport->last().body.empty());

  DeleteOptions options;
  options.precondition_uid = "u-1";
  options.precondition_resource_version = "42";
  options.propagation_policy = "Background";
  CHECK(client.Delete(Object(resources::kConfigMaps, "n", "x"), options).ok());
  Json body = Json::parse(transport->last().body);
  CHECK(body["kind"] == "DeleteOptions");
  CHECK(body["preconditions"]["uid"] == "u-1");
  CHECK(body["preconditions"]["resourceVersion"] == "42");
  CHECK(body["propagationPolicy"] == "Background");
  CHECK(Header(transport->last(), "Content-Type") == "application/json");

  Status missing = client.Delete(Object(resources::kConfigMaps, "n", "gone"), {});
  CHECK(missing.code() == Code::kNotFound);
  CHECK(missing.http_status() == 404);
}

TEST_CASE("client: transport errors, bad JSON and conflicts surface as statuses") {
  int call = 0;
  auto transport =
      std::make_shared<ScriptedTransport>([&](const http::Request&) -> Result<http::Response> {
        switch (call++) {
          case 0: return Status(Code::kUnavailable, "connection refused");
          case 1: return http::Response{200, {}, "{not json"};
          default:
            return JsonResponse(409, {{"kind", "Status"},
                                      {"reason", "Conflict"},
                                      {"message", "modified"},
                                      {"code", 409}});
        }
      });
  ClientImpl client(Config("https://h"), transport);
  ObjectRef ref = Object(resources::kSecrets, "n", "s");
  CHECK(client.Get(ref).status().code() == Code::kUnavailable);
  CHECK(client.Get(ref).status().code() == Code::kInternal);
  Result<Json> conflict = client.Update(ref, Json::object());
  CHECK(conflict.status().code() == Code::kConflict);
  CHECK(conflict.status().message() == "modified");
}

TEST_CASE("client: List follows continue tokens and returns the first page's resourceVersion") {
  auto transport =
      std::make_shared<ScriptedTransport>([](const http::Request& r) -> Result<http::Response> {
        Json page = {{"kind", "SyncSetList"}, {"apiVersion", "hive.openshift.io/v1"}};
        if (r.url.find("continue=") == std::string::npos) {
          page["metadata"] = {{"resourceVersion", "100"}, {"continue", "tok/1"}};
          page["items"] =
              Json::array({{{"metadata", {{"name", "a"}}}}, {{"metadata", {{"name", "b"}}}}});
        } else if (r.url.find("continue=tok%2F1") != std::string::npos) {
          page["metadata"] = {{"resourceVersion", "100"}, {"continue", "tok2"}};
          page["items"] = Json::array({{{"metadata", {{"name", "c"}}}}});
        } else {
          page["metadata"] = {{"resourceVersion", "100"}};
          page["items"] = Json::array({{{"metadata", {{"name", "d"}}}}});
        }
        return JsonResponse(200, page);
      });
  ClientImpl client(Config("https://h/p"), transport);
  ListOptions options;
  options.limit = 2;
  options.label_selector = "a=b";
  Result<ObjectList> list = client.List(Collection(resources::kSyncSets, "ns"), options);
  REQUIRE(list.ok());
  CHECK(list->resource_version == "100");
  REQUIRE(list->items.size() == 4);
  CHECK(list->items[3]["metadata"]["name"] == "d");
  CHECK(list->items[0]["kind"] == "SyncSet");
  CHECK(list->items[0]["apiVersion"] == "hive.openshift.io/v1");
  std::vector<http::Request> sent = transport->requests();
  REQUIRE(sent.size() == 3);
  CHECK(sent[0].url ==
        "https://h/p/apis/hive.openshift.io/v1/namespaces/ns/syncsets?limit=2&labelSelector=a%3Db");
  CHECK(sent[1].url.ends_with("&continue=tok%2F1"));
  CHECK(sent[2].url.ends_with("&continue=tok2"));
}

TEST_CASE("client: an expired continue token is kGone") {
  int call = 0;
  auto transport =
      std::make_shared<ScriptedTransport>([&](const http::Request&) -> Result<http::Response> {
        if (call++ == 0) {
          return JsonResponse(200, {{"metadata", {{"resourceVersion", "5"}, {"continue", "c"}}},
                                    {"items", Json::array()}});
        }
        return JsonResponse(410, {{"kind", "Status"},
                                  {"reason", "Expired"},
                                  {"message", "continue token expired"},
                                  {"code", 410}});
      });
  ClientImpl client(Config("https://h"), transport);
  Result<ObjectList> list = client.List(Collection(resources::kConfigMaps), {});
  CHECK(list.status().code() == Code::kGone);
  CHECK(list.status().message().find("continue token expired") != std::string::npos);
}

TEST_CASE("client: the token file is re-read when it changes") {
  std::string dir = std::filesystem::temp_directory_path() / "kube-token-XXXXXX";
  REQUIRE(mkdtemp(dir.data()) != nullptr);
  std::string file = dir + "/token";
  std::ofstream(file) << "first\n";
  ClusterConfig config = Config("https://h");
  config.bearer_token = "stale";
  config.token_file = file;
  auto transport = std::make_shared<ScriptedTransport>();
  ClientImpl client(config, transport);
  REQUIRE(client.Get(Object(resources::kSecrets, "n", "s")).ok());
  CHECK(Header(transport->last(), "Authorization") == "Bearer first");
  std::ofstream(file) << "second-token\n";
  REQUIRE(client.Get(Object(resources::kSecrets, "n", "s")).ok());
  CHECK(Header(transport->last(), "Authorization") == "Bearer second-token");
  std::filesystem::remove_all(dir);
  // The last good token survives the file disappearing.
  REQUIRE(client.Get(Object(resources::kSecrets, "n", "s")).ok());
  CHECK(Header(transport->last(), "Authorization") == "Bearer second-token");
}

TEST_CASE("client: watch request and events split across chunks") {
  auto transport = std::make_shared<ScriptedTransport>();
  ClientImpl client(Config("https://h/prefix"), transport);
  WatchOptions options;
  options.resource_version = "100";
  options.timeout_seconds = 420;
  options.label_selector = "x=y";
  Result<std::unique_ptr<WatchStream>> stream =
      client.Watch(Collection(resources::kClusterDeployments), options);
  REQUIRE(stream.ok());
  http::Request sent = transport->last();
  CHECK(sent.url ==
        "https://h/prefix/apis/hive.openshift.io/v1/"
        "clusterdeployments?watch=1&resourceVersion=100&allowWatchBookmarks=true&timeoutSeconds="
        "420&labelSelector=x%3Dy");
  CHECK(sent.timeout == milliseconds(0));

  auto next = [&] { return (*stream)->Next(milliseconds(0)); };
  CHECK(next().ok());
  CHECK_FALSE(next()->has_value());
  transport->Headers(200);
  transport->Data(R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"101"}}})"
                  "\n"
                  R"({"type":"MODI)");
  transport->Data(R"(FIED","object":{"metadata":{"name":"a","resourceVersion":"102"}}})"
                  "\n");
  Result<std::optional<WatchEvent>> first = next();
  REQUIRE(first.ok());
  REQUIRE(first->has_value());
  CHECK((*first)->type == WatchEventType::kAdded);
  Result<std::optional<WatchEvent>> second = next();
  REQUIRE(second.ok());
  REQUIRE(second->has_value());
  CHECK((*second)->object["metadata"]["resourceVersion"] == "102");
  transport->End(Status::Ok());
  Result<std::optional<WatchEvent>> closed = next();
  CHECK(closed.status().code() == Code::kUnavailable);
  CHECK(closed.status().message() == "watch closed");
  CHECK(next().status().code() == Code::kUnavailable);  // stays ended
}

TEST_CASE("client: a metadata-only list asks for PartialObjectMetadataList and keeps no body") {
  const Json secret = {{"metadata", {{"name", "s"}, {"namespace", "ns"}, {"resourceVersion", "7"}}},
                       {"data", {{"token", "c2VjcmV0"}}},
                       {"type", "Opaque"}};
  bool partial = true;
  auto transport =
      std::make_shared<ScriptedTransport>([&](const http::Request&) -> Result<http::Response> {
        if (partial) {
          Json item = {{"kind", "PartialObjectMetadata"},
                       {"apiVersion", "meta.k8s.io/v1"},
                       {"metadata", secret["metadata"]}};
          return JsonResponse(200, {{"kind", "PartialObjectMetadataList"},
                                    {"apiVersion", "meta.k8s.io/v1"},
                                    {"metadata", {{"resourceVersion", "9"}}},
                                    {"items", {item}}});
        }
        // A server that does not offer the form answers with the objects themselves.
        return JsonResponse(200, {{"kind", "SecretList"},
                                  {"apiVersion", "v1"},
                                  {"metadata", {{"resourceVersion", "9"}}},
                                  {"items", {secret}}});
      });
  ClientImpl client(Config(), transport);
  ListOptions options;
  options.metadata_only = true;
  size_t on_page = 0;
  options.on_page = [&](std::vector<Json>& page) {
    for (const Json& item : page) CHECK_FALSE(item.contains("data"));
    on_page += page.size();
  };
  for (bool answer_partial : {true, false}) {
    partial = answer_partial;
    CAPTURE(answer_partial);
    Result<ObjectList> list = client.List(Collection(resources::kSecrets), options);
    REQUIRE(list.ok());
    CHECK(Header(transport->last(), "Accept") ==
          "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json");
    CHECK(list->resource_version == "9");
    REQUIRE(list->items.size() == 1);
    CHECK(list->items[0] == Json{{"apiVersion", "meta.k8s.io/v1"},
                                 {"kind", "PartialObjectMetadata"},
                                 {"metadata", secret["metadata"]}});
  }
  CHECK(on_page == 2);
  // Without the option, the objects are asked for as they are.
  REQUIRE(client.List(Collection(resources::kSecrets), {}).ok());
  CHECK(Header(transport->last(), "Accept") == "application/json");
}

TEST_CASE("client: a metadata-only watch asks for PartialObjectMetadata and keeps no body") {
  auto transport = std::make_shared<ScriptedTransport>();
  ClientImpl client(Config("https://h"), transport);
  WatchOptions options;
  options.metadata_only = true;
  Result<std::unique_ptr<WatchStream>> stream =
      client.Watch(Collection(resources::kSecrets), options);
  REQUIRE(stream.ok());
  CHECK(Header(transport->last(), "Accept") ==
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json");
  transport->Headers(200);
  // One event in the metadata form, one from a server that answered with the whole object.
  transport->Data(
      R"({"type":"ADDED","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a","resourceVersion":"5"}}})"
      "\n"
      R"({"type":"MODIFIED","object":{"kind":"Secret","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"6"},"data":{"k":"c2VjcmV0"}}})"
      "\n");
  for (const char* rv : {"5", "6"}) {
    Result<std::optional<WatchEvent>> event = (*stream)->Next(milliseconds(0));
    REQUIRE(event.ok());
    REQUIRE(event->has_value());
    CHECK((*event)->object == Json{{"apiVersion", "meta.k8s.io/v1"},
                                   {"kind", "PartialObjectMetadata"},
                                   {"metadata", {{"name", "a"}, {"resourceVersion", rv}}}});
  }
}

TEST_CASE("client: watch failures: non-200 answers, ERROR events, dropped connections") {
  auto transport = std::make_shared<ScriptedTransport>();
  ClientImpl client(Config("https://h"), transport);
  {
    auto stream = client.Watch(Collection(resources::kSyncSets), {});
    REQUIRE(stream.ok());
    transport->Headers(410);
    transport->Data(
        R"({"kind":"Status","message":"too old resource version","reason":"Expired","code":410})");
    transport->End(Status::Ok());
    Result<std::optional<WatchEvent>> next = (*stream)->Next(milliseconds(0));
    CHECK(next.status().code() == Code::kGone);
    CHECK(next.status().http_status() == 410);
  }
  {
    auto stream = client.Watch(Collection(resources::kSyncSets), {});
    transport->Headers(200);
    transport->Data(
        R"({"type":"ERROR","object":{"kind":"Status","message":"too old","reason":"Expired","code":410}})"
        "\n");
    CHECK((*stream)->Next(milliseconds(0)).status().code() == Code::kGone);
  }
  {
    auto stream = client.Watch(Collection(resources::kSyncSets), {});
    transport->Headers(403);
    transport->Data(R"({"kind":"Status","message":"forbidden","reason":"Forbidden","code":403})");
    transport->End(Status::Ok());
    CHECK((*stream)->Next(milliseconds(0)).status().code() == Code::kUnauthorized);
  }
  {
    auto stream = client.Watch(Collection(resources::kSyncSets), {});
    transport->Headers(200);
    transport->End(Status(Code::kUnavailable, "connection reset"));
    Result<std::optional<WatchEvent>> next = (*stream)->Next(milliseconds(0));
    CHECK(next.status().code() == Code::kUnavailable);
    CHECK(next.status().message() == "connection reset");
  }
}

TEST_CASE("client: cancelling a watch wakes a blocked Next and cancels the stream [concurrent]") {
  auto transport = std::make_shared<ScriptedTransport>();
  ClientImpl client(Config("https://h"), transport);
  auto stream = client.Watch(Collection(resources::kSyncSets), {});
  REQUIRE(stream.ok());
  transport->Headers(200);
  Status seen;
  std::thread reader([&] {
    Result<std::optional<WatchEvent>> next = (*stream)->Next(std::chrono::hours(1));
    seen = next.status();
  });
  (*stream)->Cancel();
  reader.join();
  CHECK(seen.code() == Code::kCancelled);
  CHECK(transport->cancelled());
}

TEST_CASE("client: async calls complete through the callback") {
  auto transport =
      std::make_shared<ScriptedTransport>([](const http::Request& r) -> Result<http::Response> {
        return JsonResponse(200, {{"method", r.method}});
      });
  ClientImpl client(Config("https://h"), transport);
  std::vector<std::string> methods;
  Status deleted(Code::kInternal, "not called");
  ObjectRef ref = Object(resources::kConfigMaps, "n", "x");
  client.GetAsync(ref, [&](Result<Json> r) { methods.push_back((*r)["method"]); });
  client.ApplyAsync(ref, Json::object(), {},
                    [&](Result<Json> r) { methods.push_back((*r)["method"]); });
  client.PatchAsync(ref, PatchType::kMerge, "{}",
                    [&](Result<Json> r) { methods.push_back((*r)["method"]); });
  client.CreateAsync(Collection(resources::kConfigMaps, "n"), Json::object(),
                     [&](Result<Json> r) { methods.push_back((*r)["method"]); });
  client.UpdateAsync(ref, Json::object(),
                     [&](Result<Json> r) { methods.push_back((*r)["method"]); });
  client.DeleteAsync(ref, {}, [&](Status s) { deleted = s; });
  CHECK(methods == std::vector<std::string>{"GET", "PATCH", "PATCH", "POST", "PUT"});
  CHECK(deleted.ok());
}

TEST_CASE(
    "client: QPS limit holds requests back, destroying the client cancels them [concurrent]") {
  auto transport = std::make_shared<ScriptedTransport>();
  ClusterConfig config = Config("https://h");
  config.qps = 0.001;  // one token, then one every 1000 s
  std::vector<Code> codes;
  std::mutex mu;
  {
    ClientImpl client(config, transport);
    for (int i = 0; i < 3; ++i) {
      client.GetAsync(Object(resources::kSecrets, "n", "s"), [&](Result<Json> r) {
        std::lock_guard lock(mu);
        codes.push_back(r.status().code());
      });
    }
    std::lock_guard lock(mu);
    CHECK(codes == std::vector<Code>{Code::kOk});
    CHECK(transport->requests().size() == 1);
  }
  CHECK(codes == std::vector<Code>{Code::kOk, Code::kCancelled, Code::kCancelled});
  CHECK(transport->requests().size() == 1);
}

TEST_CASE("client: basic authentication and impersonation headers") {
  ClusterConfig config = Config("https://h");
  config.bearer_token.clear();
  config.username = "admin";
  config.password = "p:w";
  config.impersonate.user = "alice";
  config.impersonate.uid = "42";
  config.impersonate.groups = {"admins", "system:authenticated"};
  config.impersonate.extra = {{"scopes.example.com/team name", {"a", "b"}}};
  auto transport = std::make_shared<ScriptedTransport>();
  ClientImpl client(config, transport);
  REQUIRE(client.Get(Object(resources::kSecrets, "n", "s")).ok());
  http::Request sent = transport->last();
  CHECK(Header(sent, "Authorization") == "Basic YWRtaW46cDp3");  // admin:p:w
  CHECK(Header(sent, "Impersonate-User") == "alice");
  CHECK(Header(sent, "Impersonate-Uid") == "42");
  std::vector<std::string> groups, extra;
  for (const auto& [name, value] : sent.headers) {
    if (name == "Impersonate-Group") groups.push_back(value);
    if (name == "Impersonate-Extra-scopes.example.com%2Fteam%20name") extra.push_back(value);
  }
  CHECK(groups == std::vector<std::string>{"admins", "system:authenticated"});
  CHECK(extra == std::vector<std::string>{"a", "b"});

  // A token wins over basic authentication.
  config.bearer_token = "tok";
  ClientImpl with_token(config, transport);
  REQUIRE(with_token.Get(Object(resources::kSecrets, "n", "s")).ok());
  CHECK(Header(transport->last(), "Authorization") == "Bearer tok");
}

TEST_CASE("client: the proxy URL goes with every request, socks5 resolving on the proxy") {
  auto transport = std::make_shared<ScriptedTransport>();
  ClusterConfig config = Config("https://h");
  config.proxy_url = "http://proxy:3128";
  REQUIRE(ClientImpl(config, transport).Get(Object(resources::kSecrets, "n", "s")).ok());
  CHECK(transport->last().proxy == "http://proxy:3128");
  config.proxy_url = "socks5://proxy:1080";
  ClientImpl socks(config, transport);
  REQUIRE(socks.Get(Object(resources::kSecrets, "n", "s")).ok());
  CHECK(transport->last().proxy == "socks5h://proxy:1080");
  REQUIRE(socks.Watch(Collection(resources::kSecrets), {}).ok());
  CHECK(transport->last().proxy == "socks5h://proxy:1080");
  config.proxy_url.clear();
  REQUIRE(ClientImpl(config, transport).Get(Object(resources::kSecrets, "n", "s")).ok());
  CHECK(transport->last().proxy.empty());
}

TEST_CASE("client: an exec plugin's token, run again after a 401") {
  std::string dir = std::filesystem::temp_directory_path() / "kube-exec-XXXXXX";
  REQUIRE(mkdtemp(dir.data()) != nullptr);
  std::string plugin = dir + "/plugin";
  // Prints token-1, token-2, ... one per run.
  std::ofstream(plugin) << "#!/bin/sh\necho run >> '" << dir << "/runs'\n"
                        << "n=$(wc -l < '" << dir << "/runs' | tr -d ' ')\n"
                        << "echo '{\"kind\":\"ExecCredential\",\"apiVersion\":"
                           "\"client.authentication.k8s.io/v1beta1\",\"status\":{\"token\":"
                           "\"token-'$n'\"}}'\n";
  std::filesystem::permissions(plugin, std::filesystem::perms::owner_all);
  auto exec = std::make_shared<ExecConfig>();
  exec->api_version = "client.authentication.k8s.io/v1beta1";
  exec->command = plugin;
  exec->interactive = ExecConfig::Interactive::kNever;
  ClusterConfig config = Config("https://h");
  config.bearer_token.clear();
  config.exec = exec;
  // The server takes token-2 only.
  auto transport = std::make_shared<ScriptedTransport>([](const http::Request& request) {
    if (Header(request, "Authorization") == "Bearer token-2") {
      return JsonResponse(200, Json::object());
    }
    return JsonResponse(401, {{"kind", "Status"}, {"code", 401}, {"reason", "Unauthorized"}});
  });
  FakeClock clock;
  ClientImpl client(config, transport, clock);
  ObjectRef secret = Object(resources::kSecrets, "n", "s");
  CHECK(client.Get(secret).status().code() == Code::kUnauthorized);
  CHECK(Header(transport->last(), "Authorization") == "Bearer token-1");
  REQUIRE(client.Get(secret).ok());
  CHECK(Header(transport->last(), "Authorization") == "Bearer token-2");
  REQUIRE(client.Get(secret).ok());  // cached: the plugin ran twice
  std::ifstream runs(dir + "/runs");
  int count = 0;
  for (std::string line; std::getline(runs, line);) ++count;
  CHECK(count == 2);

  // A plugin that cannot run fails the request with its error, before anything is sent.
  exec->command = dir + "/absent";
  size_t sent = transport->requests().size();
  ClientImpl broken(config, transport, clock);
  Result<Json> failed = broken.Get(secret);
  CHECK(failed.status().code() == Code::kUnauthorized);
  CHECK(failed.status().message().find("getting credentials: exec plugin: executable") !=
        std::string::npos);
  CHECK(broken.Watch(Collection(resources::kSecrets), {}).status().code() == Code::kUnauthorized);
  CHECK(transport->requests().size() == sent);
  std::filesystem::remove_all(dir);
}

TEST_CASE("token bucket: burst, then one token per 1/qps") {
  FakeClock clock;
  TokenBucket bucket(2.0, 2.0, clock.Now());
  CHECK(bucket.Reserve(clock.Now()) == Duration::zero());
  CHECK(bucket.Reserve(clock.Now()) == Duration::zero());
  CHECK(bucket.Reserve(clock.Now()) == milliseconds(500));
  CHECK(bucket.Reserve(clock.Now()) == milliseconds(1000));  // queued behind the previous one
  clock.Advance(std::chrono::seconds(10));
  CHECK(bucket.Reserve(clock.Now()) == Duration::zero());  // refilled, capped at the burst
  CHECK(bucket.Reserve(clock.Now()) == Duration::zero());
  CHECK(bucket.Reserve(clock.Now()) == milliseconds(500));
}

}  // namespace
}  // namespace syncbus::kube
