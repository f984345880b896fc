// Tests for the simulator's routing, dispatch and control API, for SimServer over a real loopback
// socket (libcurl clients: GET, LIST, WATCH, faults, latency, disconnects), and for the
// in-process transport (raw and through kube::ClientImpl). Names ending in [concurrent] exercise
// cross-thread paths (run them under TSan too).
#include "tests/kubesim/sim_server.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <curl/curl.h>
#include <doctest/doctest.h>

#include "common/base64.h"
#include "common/http/curl_transport.h"
#include "common/kube/client_impl.h"
#include "tests/fakes/common/http/in_process_transport.h"
#include "tests/kubesim/sim_router.h"
#include "tests/support/self_signed_cert.h"
#include "tests/unit/kubesim/api_test_util.h"

namespace syncbus::kubesim {
namespace {

using namespace std::chrono_literals;

// Safety deadline for waits on things that should happen promptly.
constexpr auto kDeadline = 10s;

// Polls `condition` until it holds or kDeadline passes (for state observed over HTTP).
template <typename F>
bool Eventually(F condition) {
  auto end = std::chrono::steady_clock::now() + kDeadline;
  while (std::chrono::steady_clock::now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return condition();
}

// ---------------------------------------------------------------------------------------------
// libcurl clients

void InitCurl() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct CurlHandle {
  CurlHandle() {
    InitCurl();
    easy = curl_easy_init();
  }
  ~CurlHandle() {
    if (list != nullptr) curl_slist_free_all(list);
    curl_easy_cleanup(easy);
  }
  CURL* easy;
  curl_slist* list = nullptr;
};

size_t AppendBody(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

size_t AppendHeader(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

struct CurlResult {
  CURLcode code = CURLE_OK;
  long status = 0;
  std::string body;
  std::string headers;
  std::chrono::milliseconds elapsed{0};
  Json json() const { return Json::parse(body, nullptr, false); }
};

void Configure(CurlHandle& h, const std::string& method, const std::string& url,
               const std::string& body, const std::vector<std::string>& headers, long timeout_ms) {
  curl_easy_setopt(h.easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h.easy, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(h.easy, CURLOPT_NOSIGNAL, 1L);
  if (!body.empty() || method == "POST" || method == "PUT") {
    curl_easy_setopt(h.easy, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(h.easy, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  for (const std::string& header : headers) h.list = curl_slist_append(h.list, header.c_str());
  if (h.list != nullptr) curl_easy_setopt(h.easy, CURLOPT_HTTPHEADER, h.list);
  if (timeout_ms > 0) curl_easy_setopt(h.easy, CURLOPT_TIMEOUT_MS, timeout_ms);
}

CurlResult Curl(const std::string& method, const std::string& url, const std::string& body = {},
                std::vector<std::string> headers = {}, long timeout_ms = 10000) {
  CurlHandle h;
  CurlResult result;
  if (!body.empty()) headers.push_back("Content-Type: application/json");
  Configure(h, method, url, body, headers, timeout_ms);
  curl_easy_setopt(h.easy, CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(h.easy, CURLOPT_WRITEDATA, &result.body);
  curl_easy_setopt(h.easy, CURLOPT_HEADERFUNCTION, AppendHeader);
  curl_easy_setopt(h.easy, CURLOPT_HEADERDATA, &result.headers);
  auto start = std::chrono::steady_clock::now();
  result.code = curl_easy_perform(h.easy);
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  curl_easy_getinfo(h.easy, CURLINFO_RESPONSE_CODE, &result.status);
  return result;
}

// A watch read on its own thread; the body grows as chunks arrive.
class CurlWatch {
 public:
  explicit CurlWatch(const std::string& url) {
    thread_ = std::thread([this, url] {
      CurlHandle h;
      Configure(h, "GET", url, {}, {}, 0);
      curl_easy_setopt(h.easy, CURLOPT_WRITEFUNCTION, &CurlWatch::OnData);
      curl_easy_setopt(h.easy, CURLOPT_WRITEDATA, this);
      curl_easy_setopt(h.easy, CURLOPT_HEADERFUNCTION, AppendHeader);
      curl_easy_setopt(h.easy, CURLOPT_HEADERDATA, &headers_);
      curl_easy_setopt(h.easy, CURLOPT_NOPROGRESS, 0L);
      curl_easy_setopt(h.easy, CURLOPT_XFERINFOFUNCTION, &CurlWatch::OnProgress);
      curl_easy_setopt(h.easy, CURLOPT_XFERINFODATA, this);
      CURLcode code = curl_easy_perform(h.easy);
      long status = 0;
      curl_easy_getinfo(h.easy, CURLINFO_RESPONSE_CODE, &status);
      std::lock_guard lock(mu_);
      code_ = code;
      status_ = status;
      done_ = true;
      cv_.notify_all();
    });
  }
  ~CurlWatch() { Close(); }

  // Waits until the body contains `text`.
  bool WaitForText(const std::string& text) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kDeadline, [&] { return body_.find(text) != std::string::npos; });
  }
  // Waits for the server to end the response; its curl result.
  std::optional<CURLcode> WaitForEnd() {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, kDeadline, [&] { return done_; })) return std::nullopt;
    return code_;
  }
  // Hangs up (as a client cancelling its watch does).
  void Close() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::string body() {
    std::lock_guard lock(mu_);
    return body_;
  }
  long status() {
    std::lock_guard lock(mu_);
    return status_;
  }

 private:
  static size_t OnData(char* data, size_t size, size_t n, void* self) {
    auto* w = static_cast<CurlWatch*>(self);
    std::lock_guard lock(w->mu_);
    w->body_.append(data, size * n);
    w->cv_.notify_all();
    return size * n;
  }
  static int OnProgress(void* self, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    return static_cast<CurlWatch*>(self)->stop_.load() ? 1 : 0;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::string body_;
  std::string headers_;
  bool done_ = false;
  CURLcode code_ = CURLE_OK;
  long status_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::unique_ptr<SimServer> StartSim(FleetSpec fleet, std::string token = {}, int threads = 2) {
  SimServer::Options options;
  options.threads = threads;
  options.simulation.fleet = fleet;
  options.simulation.token = std::move(token);
  auto sim = SimServer::Start(options);
  REQUIRE_MESSAGE(sim.ok(), sim.status().ToString());
  return std::move(sim).value();
}

Json Stats(SimServer& sim) {
  return Curl("GET", sim.base_url() + "/_sim/stats").json();
}

// ---------------------------------------------------------------------------------------------
// Routing and dispatch

TEST_CASE("RouteRequest separates the hub and target clusters and the control API") {
  Route hub = RouteRequest("/api/v1/namespaces/default/configmaps");
  CHECK(hub.kind == Route::Kind::kApi);
  CHECK(hub.cluster.empty());
  CHECK(hub.path == "/api/v1/namespaces/default/configmaps");

  Route target = RouteRequest("/clusters/cluster-0001/apis/apps/v1/deployments");
  CHECK(target.kind == Route::Kind::kApi);
  CHECK(target.cluster == "cluster-0001");
  CHECK(target.path == "/apis/apps/v1/deployments");

  Route bare = RouteRequest("/clusters/cluster-0001");
  CHECK(bare.cluster == "cluster-0001");
  CHECK(bare.path == "/");

  Route control = RouteRequest("/_sim/clusters/cluster-0001/close-watches");
  CHECK(control.kind == Route::Kind::kControl);
  CHECK(control.path == "/clusters/cluster-0001/close-watches");
  CHECK(RouteRequest("/_sim").kind == Route::Kind::kControl);

  // Look-alikes are hub paths.
  CHECK(RouteRequest("/_simulator/x").kind == Route::Kind::kApi);
  CHECK(RouteRequest("/clusters/").cluster.empty());
  CHECK(RouteRequest("/clustersx/a").cluster.empty());
  CHECK(RouteRequest("/").path == "/");
  CHECK(ClusterPathPrefix("c1") == "/clusters/c1");
  CHECK(ClusterPathPrefix("").empty());
}

http::ServerRequest Get(std::string path, std::string query = {}) {
  http::ServerRequest r;
  r.method = "GET";
  r.path = std::move(path);
  r.query = std::move(query);
  return r;
}

using testing::MakeSimulation;

TEST_CASE("Simulation dispatch routes to the right API server and counts requests") {
  auto sim = MakeSimulation({.clusters = 2});
  Plan hub = sim->Dispatch(Get("/api/v1/namespaces/default"));
  CHECK(hub.kind == Plan::Kind::kApi);
  CHECK(hub.api == &sim->hub());
  CHECK(hub.api_request.path == "/api/v1/namespaces/default");
  Plan target = sim->Dispatch(Get("/clusters/cluster-0001/api/v1/namespaces/default"));
  CHECK(target.api == sim->cluster("cluster-0001"));
  CHECK(target.api_request.path == "/api/v1/namespaces/default");
  CHECK(target.api->Handle(target.api_request).status == 200);

  Json stats = sim->Stats();
  CHECK(stats["clusters"]["cluster-0001"]["requests"] == 1);
  CHECK(stats["clusters"]["cluster-0001"]["inFlight"] == 1);  // `target` still holds it
  target.in_flight.reset();
  CHECK(sim->Stats()["clusters"]["cluster-0001"]["inFlight"] == 0);
  CHECK(sim->Stats()["total"]["requests"] == 2);

  Plan unknown = sim->Dispatch(Get("/clusters/nope/api/v1/namespaces"));
  CHECK(unknown.kind == Plan::Kind::kRespond);
  CHECK(unknown.response.status == 404);
  Json status = Json::parse(unknown.response.body);
  CHECK(status["kind"] == "Status");
  CHECK(status["reason"] == "NotFound");

  Plan watch = sim->Dispatch(Get("/api/v1/namespaces", "watch=1&timeoutSeconds=7"));
  CHECK(watch.kind == Plan::Kind::kWatch);
  CHECK(watch.watch_timeout == std::optional<std::chrono::seconds>(7s));
}

TEST_CASE("Simulation counts requests by verb and resource, the hub apart from the targets") {
  auto sim = MakeSimulation({.clusters = 2});
  auto send = [&](const char* method, std::string path, std::string query = {},
                  std::string type = {}) {
    http::ServerRequest r = Get(std::move(path), std::move(query));
    r.method = method;
    if (!type.empty()) r.headers = {{"Content-Type", type}};
    sim->Dispatch(r);
  };
  const std::string cs = "/apis/hiveinternal.openshift.io/v1alpha1/namespaces/ns1/clustersyncs";
  send("GET", "/apis/hive.openshift.io/v1/namespaces/ns1/syncsets");
  send("GET", "/apis/hive.openshift.io/v1/selectorsyncsets");
  send("GET", "/apis/hive.openshift.io/v1/selectorsyncsets", "watch=true&allowWatchBookmarks=true");
  send("GET", "/api/v1/namespaces/ns1/secrets/kubeconfig");
  send("POST", cs);
  send("PUT", cs + "/c1/status");
  send("PATCH", "/apis/coordination.k8s.io/v1/namespaces/ns1/leases/c1", "",
       "application/apply-patch+yaml");
  send("PATCH", cs + "/c1", "", "application/merge-patch+json");
  send("DELETE", cs + "/c1");
  send("DELETE", cs);
  send("GET", "/apis");  // discovery: not counted
  REQUIRE(sim->cluster_names().size() == 2);
  for (const auto& name : sim->cluster_names()) {
    send("PATCH", "/clusters/" + name + "/api/v1/namespaces/default/configmaps/a", "",
         "application/apply-patch+yaml");
  }

  Json stats = sim->Stats();
  Json hub = stats["hubRequests"];
  INFO(hub.dump(2));
  CHECK(hub["list"]["syncsets"] == 1);
  CHECK(hub["list"]["selectorsyncsets"] == 1);
  CHECK(hub["watch"]["selectorsyncsets"] == 1);
  CHECK(hub["get"]["secrets"] == 1);
  CHECK(hub["create"]["clustersyncs"] == 1);
  CHECK(hub["update"]["clustersyncs/status"] == 1);
  CHECK(hub["apply"]["leases"] == 1);
  CHECK(hub["patch"]["clustersyncs"] == 1);
  CHECK(hub["delete"]["clustersyncs"] == 1);
  CHECK(hub["deletecollection"]["clustersyncs"] == 1);
  size_t verbs = 0;
  for (const auto& [verb, resources] : hub.items()) verbs += resources.size();
  CHECK(verbs == 10);
  CHECK(stats["targetRequests"]["apply"]["configmaps"] == 2);
  CHECK_FALSE(stats["targetRequests"].contains("list"));
}

TEST_CASE("Simulation checks the bearer token when one is set") {
  auto sim = MakeSimulation({.clusters = 1}, "t0ken");
  Plan anonymous = sim->Dispatch(Get("/api/v1/namespaces"));
  CHECK(anonymous.response.status == 401);
  CHECK(Json::parse(anonymous.response.body)["reason"] == "Unauthorized");
  http::ServerRequest wrong = Get("/clusters/cluster-0000/api/v1/namespaces");
  wrong.headers = {{"Authorization", "Bearer nope"}};
  CHECK(sim->Dispatch(wrong).response.status == 401);
  http::ServerRequest right = wrong;
  right.headers = {{"authorization", "Bearer t0ken"}};
  CHECK(sim->Dispatch(right).kind == Plan::Kind::kApi);
  // The control API needs no token.
  CHECK(sim->Dispatch(Get("/_sim/stats")).response.status == 200);
}

TEST_CASE("Simulation control API manages faults and watches") {
  auto sim = MakeSimulation({.clusters = 2});
  http::ServerRequest put;
  put.method = "PUT";
  put.path = "/_sim/faults";
  put.body = R"({"clusters": ["cluster-0001"], "dropRate": 1})";
  Plan applied = sim->Dispatch(put);
  REQUIRE(applied.response.status == 200);
  CHECK(Json::parse(applied.response.body)["clusters"]["cluster-0001"]["dropRate"] == 1);
  CHECK(sim->Dispatch(Get("/clusters/cluster-0001/api/v1/namespaces")).kind == Plan::Kind::kDrop);
  CHECK(sim->Dispatch(Get("/clusters/cluster-0000/api/v1/namespaces")).kind == Plan::Kind::kApi);

  put.body = R"({"clusters": ["hub"], "throttleRate": 1, "retryAfterSeconds": 4})";
  REQUIRE(sim->Dispatch(put).response.status == 200);
  Plan throttled = sim->Dispatch(Get("/api/v1/namespaces"));
  CHECK(throttled.response.status == 429);
  CHECK(http::FindHeader(throttled.response.headers, "Retry-After") ==
        std::optional<std::string>("4"));
  CHECK(Json::parse(throttled.response.body)["details"]["retryAfterSeconds"] == 4);

  put.body = R"({"clusters": ["missing"], "errorRate": 1})";
  CHECK(sim->Dispatch(put).response.status == 404);
  put.body = R"({"errorRate": 3})";
  CHECK(sim->Dispatch(put).response.status == 400);
  put.body = "not json";
  CHECK(sim->Dispatch(put).response.status == 400);

  Json clusters = Json::parse(sim->Dispatch(Get("/_sim/clusters")).response.body);
  CHECK(clusters["clusters"] == Json::array({"cluster-0000", "cluster-0001"}));

  http::ServerRequest post;
  post.method = "POST";
  for (const char* path : {"/_sim/hub/expire-history", "/_sim/hub/close-watches",
                           "/_sim/clusters/cluster-0000/expire-history",
                           "/_sim/clusters/cluster-0000/close-watches", "/_sim/hub/bookmarks"}) {
    CAPTURE(path);
    post.path = path;
    CHECK(sim->Dispatch(post).response.status == 200);
    CHECK(sim->Dispatch(Get(path)).response.status == 405);
  }
  post.path = "/_sim/clusters/nope/close-watches";
  CHECK(sim->Dispatch(post).response.status == 404);
  CHECK(sim->Dispatch(Get("/_sim/unknown")).response.status == 404);
  CHECK(sim->Dispatch(Get("/_sim/clusters/cluster-0001/stats")).response.status == 200);
}

TEST_CASE("Simulation plans carry kube-apiserver's headers, a fresh Audit-Id each") {
  auto sim = MakeSimulation({.clusters = 1}, "t0ken");
  Plan refused = sim->Dispatch(Get("/api/v1/namespaces"));
  http::ServerRequest request = Get("/clusters/cluster-0000/api/v1/namespaces");
  request.headers = {{"Authorization", "Bearer t0ken"}};
  Plan first = sim->Dispatch(request);
  Plan second = sim->Dispatch(request);
  for (const Plan* plan : {&refused, &first, &second}) {
    CHECK(http::FindHeader(plan->headers, "Cache-Control") == "no-cache, private");
    CHECK(http::FindHeader(plan->headers, "Audit-Id").value_or("").size() == 36);
  }
  CHECK(http::FindHeader(first.headers, "Audit-Id") !=
        http::FindHeader(second.headers, "Audit-Id"));
  ApiResponse answer = first.WithHeaders(first.api->Handle(first.api_request));
  CHECK(http::FindHeader(answer.headers, "Content-Type") == "application/json");
  CHECK(http::FindHeader(answer.headers, "Audit-Id") ==
        http::FindHeader(first.headers, "Audit-Id"));
  CHECK(http::FindHeader(first.StreamHeaders(), "Cache-Control") == "no-cache, private");
  CHECK(sim->Dispatch(Get("/_sim/stats")).headers.empty());
}

// ---------------------------------------------------------------------------------------------
// SimServer over a real socket

TEST_CASE("SimServer holds a list from a future resourceVersion until it is reached [concurrent]") {
  auto sim = StartSim({.clusters = 1});
  std::string configmaps = sim->base_url() + "/api/v1/namespaces/default/configmaps";
  CurlResult list = Curl("GET", configmaps);
  REQUIRE(list.status == 200);
  uint64_t next = std::stoull(list.json()["metadata"]["resourceVersion"].get<std::string>()) + 1;
  auto start = std::chrono::steady_clock::now();
  std::future<CurlResult> held = std::async(std::launch::async, [&] {
    return Curl("GET", configmaps + "?resourceVersion=" + std::to_string(next));
  });
  std::this_thread::sleep_for(300ms);
  std::string cm = R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"late"}})";
  REQUIRE(Curl("POST", configmaps, cm).status == 201);
  CurlResult answer = held.get();
  CHECK(answer.status == 200);
  CHECK(answer.json()["items"].back()["metadata"]["name"] == "late");
  CHECK(std::chrono::steady_clock::now() - start < ApiServer::kFreshnessWait);
}

TEST_CASE("SimServer serves GET and LIST on the hub and the targets over HTTP") {
  auto sim = StartSim({.clusters = 3, .syncsets = 1, .selector_syncsets = 2, .resources = 2});
  std::string base = sim->base_url();
  CurlResult ns = Curl("GET", base + "/api/v1/namespaces/cluster-0001");
  REQUIRE(ns.code == CURLE_OK);
  CHECK(ns.status == 200);
  CHECK(ns.json()["metadata"]["name"] == "cluster-0001");
  CHECK(ns.headers.find("Content-Type: application/json") != std::string::npos);
  // As kube-apiserver's filters: every API answer says not to cache it and has an Audit-Id.
  CHECK(ns.headers.find("Cache-Control: no-cache, private") != std::string::npos);
  CHECK(ns.headers.find("Audit-Id: ") != std::string::npos);

  CurlResult cds = Curl("GET", base + "/apis/hive.openshift.io/v1/clusterdeployments?limit=2");
  REQUIRE(cds.status == 200);
  CHECK(cds.json()["items"].size() == 2);
  CHECK_FALSE(cds.json()["metadata"]["continue"].get<std::string>().empty());

  CurlResult target = Curl("GET", base + "/clusters/cluster-0002/api/v1/namespaces");
  REQUIRE(target.status == 200);
  CHECK(target.json()["items"].size() >= 3);

  // Writes on a target stay on that target.
  std::string cm =
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"b"}})";
  CHECK(Curl("POST", base + "/clusters/cluster-0002/api/v1/namespaces/default/configmaps", cm)
            .status == 201);
  CHECK(
      Curl("GET", base + "/clusters/cluster-0002/api/v1/namespaces/default/configmaps/x").status ==
      200);
  CHECK(
      Curl("GET", base + "/clusters/cluster-0001/api/v1/namespaces/default/configmaps/x").status ==
      404);
  CHECK(Curl("GET", base + "/api/v1/namespaces/default/configmaps/x").status == 404);

  CurlResult unknown = Curl("GET", base + "/clusters/cluster-9999/api/v1/namespaces");
  CHECK(unknown.status == 404);
  CHECK(unknown.json()["kind"] == "Status");

  Json stats = Stats(*sim);
  CHECK(stats["clusters"]["cluster-0002"]["requests"] == 3);
  CHECK(stats["clusters"]["hub"]["requests"] == 3);
  CHECK(stats["total"]["inFlight"] == 0);
  CHECK(stats["clusters"]["hub"]["objects"].get<int>() > 0);
}

TEST_CASE("SimServer hub kubeconfig and token check") {
  auto sim = StartSim({.clusters = 1}, "abc");
  CHECK(sim->HubKubeconfig().find("server: \"" + sim->base_url() + "\"") != std::string::npos);
  CHECK(sim->HubKubeconfig().find("token: \"abc\"") != std::string::npos);
  CurlResult anonymous = Curl("GET", sim->base_url() + "/api/v1/namespaces");
  CHECK(anonymous.status == 401);
  CHECK(anonymous.json()["reason"] == "Unauthorized");
  CHECK(Curl("GET", sim->base_url() + "/clusters/cluster-0000/api/v1/namespaces", {},
             {"Authorization: Bearer abc"})
            .status == 200);
}

TEST_CASE("SimServer streams a watch that ends after timeoutSeconds [concurrent]") {
  auto sim = StartSim({.clusters = 1, .selector_syncsets = 2, .resources = 1});
  CurlWatch watch(sim->base_url() +
                  "/apis/hive.openshift.io/v1/selectorsyncsets?watch=1&timeoutSeconds=1");
  // Without a resourceVersion the watch starts with the existing objects.
  REQUIRE(watch.WaitForText("fleet-sss-01"));
  Json sss = {{"apiVersion", "hive.openshift.io/v1"},
              {"kind", "SelectorSyncSet"},
              {"metadata", {{"name", "added-later"}}},
              {"spec", Json::object()}};
  REQUIRE(sim->simulation()
              .hub()
              .Call("POST", "/apis/hive.openshift.io/v1/selectorsyncsets", sss)
              .status == 201);
  REQUIRE(watch.WaitForText("added-later"));
  auto end = watch.WaitForEnd();
  REQUIRE(end.has_value());
  CHECK(*end == CURLE_OK);
  CHECK(watch.status() == 200);
  std::string body = watch.body();
  size_t lines = 0;
  for (size_t pos = 0; (pos = body.find('\n', pos)) != std::string::npos; ++pos) ++lines;
  CHECK(lines == 3);
  CHECK(body.find("\"type\":\"ADDED\"") != std::string::npos);
  CHECK(Eventually([&] { return Stats(*sim)["total"]["openWatches"] == 0; }));
}

TEST_CASE("SimServer stops a watch when the client hangs up [concurrent]") {
  auto sim = StartSim({.clusters = 2});
  {
    CurlWatch watch(sim->base_url() + "/clusters/cluster-0001/api/v1/namespaces?watch=1");
    REQUIRE(watch.WaitForText("kube-system"));
    CHECK(Stats(*sim)["clusters"]["cluster-0001"]["openWatches"] == 1);
    CHECK(Stats(*sim)["clusters"]["cluster-0001"]["inFlight"] == 0);  // watches are not in flight
  }
  CHECK(Eventually([&] { return Stats(*sim)["clusters"]["cluster-0001"]["openWatches"] == 0; }));
}

TEST_CASE("SimServer control API closes watches and expires history [concurrent]") {
  auto sim = StartSim({.clusters = 1});
  std::string base = sim->base_url();
  CurlResult list = Curl("GET", base + "/api/v1/namespaces");
  std::string rv = list.json()["metadata"]["resourceVersion"];
  CurlWatch watch(base + "/api/v1/namespaces?watch=1&resourceVersion=" + rv);
  REQUIRE(Eventually([&] { return Stats(*sim)["clusters"]["hub"]["openWatches"] == 1; }));
  CHECK(Curl("POST", base + "/_sim/hub/close-watches").status == 200);
  auto end = watch.WaitForEnd();
  REQUIRE(end.has_value());
  CHECK(*end == CURLE_OK);

  // After expire-history, resuming from the old resourceVersion gets a 410 ERROR event.
  std::string ns = R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"later"}})";
  REQUIRE(Curl("POST", base + "/api/v1/namespaces", ns).status == 201);
  CHECK(Curl("POST", base + "/_sim/hub/expire-history").status == 200);
  CurlWatch resumed(base + "/api/v1/namespaces?watch=1&resourceVersion=" + rv);
  REQUIRE(resumed.WaitForText("\"type\":\"ERROR\""));
  CHECK(resumed.body().find("410") != std::string::npos);
}

TEST_CASE("SimServer injects errors throttling drops and timeouts per cluster [concurrent]") {
  auto sim = StartSim({.clusters = 2});
  std::string base = sim->base_url();
  auto set_faults = [&](const std::string& body) {
    CurlResult r = Curl("PUT", base + "/_sim/faults", body);
    REQUIRE_MESSAGE(r.status == 200, r.body);
  };
  std::string target = base + "/clusters/cluster-0001/api/v1/namespaces";
  std::string healthy = base + "/clusters/cluster-0000/api/v1/namespaces";

  set_faults(R"({"clusters": ["cluster-0001"], "errorRate": 1})");
  CurlResult error = Curl("GET", target);
  CHECK((error.status == 500 || error.status == 503));
  CHECK(error.json()["kind"] == "Status");
  CHECK(Curl("GET", healthy).status == 200);

  set_faults(R"({"clusters": ["cluster-0001"], "throttleRate": 1, "retryAfterSeconds": 2})");
  CurlResult throttled = Curl("GET", target);
  CHECK(throttled.status == 429);
  CHECK(throttled.headers.find("Retry-After: 2") != std::string::npos);

  set_faults(R"({"clusters": ["cluster-0001"], "dropRate": 1})");
  CurlResult dropped = Curl("GET", target);
  CHECK(dropped.code != CURLE_OK);
  CHECK(dropped.status == 0);

  set_faults(R"({"clusters": ["cluster-0001"], "timeoutRate": 1})");
  CurlResult timed_out = Curl("GET", target, {}, {}, 300);
  CHECK(timed_out.code == CURLE_OPERATION_TIMEDOUT);
  // Once the client gave up the request is no longer in flight.
  CHECK(Eventually([&] { return Stats(*sim)["clusters"]["cluster-0001"]["inFlight"] == 0; }));
  CHECK(Stats(*sim)["clusters"]["cluster-0001"]["peakInFlight"].get<int>() >= 1);

  set_faults(R"({"clusters": ["*"]})");
  CHECK(Curl("GET", target).status == 200);
}

TEST_CASE("SimServer holds hundreds of slow requests without threads [concurrent]") {
  constexpr int kRequests = 400;
  auto sim = StartSim({.clusters = 1}, {}, /*threads=*/1);
  std::string base = sim->base_url();
  REQUIRE(
      Curl("PUT", base + "/_sim/faults", R"({"latency": {"p50Ms": 400, "p99Ms": 400}})").status ==
      200);
  CurlResult one = Curl("GET", base + "/api/v1/namespaces/default");
  CHECK(one.status == 200);
  CHECK(one.elapsed >= 390ms);

  InitCurl();
  CURLM* multi = curl_multi_init();
  std::vector<std::unique_ptr<CurlHandle>> handles;
  std::vector<std::string> bodies(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    auto h = std::make_unique<CurlHandle>();
    Configure(*h, "GET", base + "/clusters/cluster-0000/api/v1/namespaces/default", {}, {}, 20000);
    curl_easy_setopt(h->easy, CURLOPT_WRITEFUNCTION, AppendBody);
    curl_easy_setopt(h->easy, CURLOPT_WRITEDATA, &bodies[i]);
    curl_multi_add_handle(multi, h->easy);
    handles.push_back(std::move(h));
  }
  auto start = std::chrono::steady_clock::now();
  int running = 0;
  do {
    curl_multi_perform(multi, &running);
    if (running > 0) curl_multi_poll(multi, nullptr, 0, 100, nullptr);
  } while (running > 0 && std::chrono::steady_clock::now() - start < 30s);
  int ok = 0;
  for (auto& h : handles) {
    long status = 0;
    curl_easy_getinfo(h->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status == 200) ++ok;
    curl_multi_remove_handle(multi, h->easy);
  }
  curl_multi_cleanup(multi);
  CHECK(ok == kRequests);
  // They waited side by side, not one after another.
  CHECK(Stats(*sim)["clusters"]["cluster-0000"]["peakInFlight"].get<int>() >= kRequests / 2);
}

TEST_CASE(
    "SimServer over HTTPS serves the project's client through the fleet kubeconfigs [concurrent]") {
  syncbus::testing::SelfSignedCert cert("kubesim");
  REQUIRE(cert.ok);
  SimServer::Options options;
  options.tls_cert_file = cert.cert;
  options.tls_key_file = cert.key;
  options.simulation.token = "tls-token";
  options.simulation.fleet = {.clusters = 2, .syncsets = 1, .resources = 1};
  auto started = SimServer::Start(options);
  REQUIRE_MESSAGE(started.ok(), started.status().ToString());
  SimServer& sim = **started;
  CHECK(sim.base_url().rfind("https://127.0.0.1:", 0) == 0);

  auto hub_config = kube::ParseKubeconfig(sim.HubKubeconfig());
  REQUIRE_MESSAGE(hub_config.ok(), hub_config.status().ToString());
  auto curl = http::CurlTransport::Create({});
  REQUIRE(curl.ok());
  std::shared_ptr<http::Transport> transport = std::move(*curl);
  kube::ClientImpl hub(*hub_config, transport);
  auto cds = hub.List(kube::Collection(kube::resources::kClusterDeployments), {});
  REQUIRE_MESSAGE(cds.ok(), cds.status().ToString());
  CHECK(cds->items.size() == 2);

  // The admin kubeconfig from the fleet reaches its target over the same TLS port.
  auto secret = hub.Get(
      kube::Object(kube::resources::kSecrets, "cluster-0001", "cluster-0001-admin-kubeconfig"));
  REQUIRE(secret.ok());
  auto kubeconfig = DecodeBase64((*secret)["data"]["kubeconfig"].get<std::string>());
  REQUIRE(kubeconfig.has_value());
  auto target_config = kube::ParseKubeconfig(*kubeconfig);
  REQUIRE_MESSAGE(target_config.ok(), target_config.status().ToString());
  kube::ClientImpl target(*target_config, transport);
  kube::WatchOptions watch_options;
  watch_options.timeout_seconds = 30;
  auto watch =
      target.Watch(kube::Collection(kube::resources::kConfigMaps, "default"), watch_options);
  REQUIRE_MESSAGE(watch.ok(), watch.status().ToString());
  Json cm = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "over-tls"}}}};
  REQUIRE(target.Create(kube::Collection(kube::resources::kConfigMaps, "default"), cm).ok());
  bool seen = false;
  auto end = std::chrono::steady_clock::now() + kDeadline;
  while (!seen && std::chrono::steady_clock::now() < end) {
    auto event = (*watch)->Next(100ms);
    REQUIRE_MESSAGE(event.ok(), event.status().ToString());
    if (*event && (*event)->object["metadata"]["name"] == "over-tls") seen = true;
  }
  CHECK(seen);
  CHECK(sim.simulation()
            .cluster("cluster-0001")
            ->Call("GET", "/api/v1/namespaces/default/configmaps/over-tls")
            .status == 200);
}

// ---------------------------------------------------------------------------------------------
// In-process transport

std::unique_ptr<Simulation> GeneratedSimulation(FleetSpec fleet) {
  auto sim = MakeSimulation(fleet);
  auto generated = sim->GenerateFleet("http://kubesim.test");
  REQUIRE_MESSAGE(generated.ok(), generated.status().ToString());
  return sim;
}

using testing::SendAndWait;

http::Request Request(std::string url, std::string method = "GET") {
  http::Request r;
  r.method = std::move(method);
  r.url = std::move(url);
  return r;
}

TEST_CASE("InProcessTransport routes like the simulator and answers on its own thread") {
  auto sim = GeneratedSimulation({.clusters = 2, .syncsets = 1, .resources = 1});
  fakes::InProcessTransport transport(*sim);
  std::thread::id callback_thread;
  auto hub = SendAndWait(transport, Request("http://kubesim.test/api/v1/namespaces/cluster-0001"),
                         &callback_thread);
  REQUIRE(hub.ok());
  CHECK(hub->status == 200);
  CHECK(Json::parse(hub->body)["metadata"]["name"] == "cluster-0001");
  CHECK(callback_thread != std::this_thread::get_id());

  auto target = SendAndWait(
      transport,
      Request("http://kubesim.test/clusters/cluster-0001/api/v1/namespaces/kube-system"));
  REQUIRE(target.ok());
  CHECK(target->status == 200);
  auto unknown =
      SendAndWait(transport, Request("http://kubesim.test/clusters/zz/api/v1/namespaces"));
  REQUIRE(unknown.ok());
  CHECK(unknown->status == 404);
  auto control = SendAndWait(transport, Request("http://kubesim.test/_sim/stats"));
  REQUIRE(control.ok());
  CHECK(Json::parse(control->body)["clusters"]["cluster-0001"]["requests"] == 1);
}

TEST_CASE("InProcessTransport holds a read of a future resourceVersion, then answers 504") {
  auto sim = GeneratedSimulation({.clusters = 1});
  fakes::InProcessTransport transport(*sim);
  auto start = std::chrono::steady_clock::now();
  auto answer =
      SendAndWait(transport, Request("http://kubesim.test/api/v1/namespaces/default/configmaps/x"
                                     "?resourceVersion=99999999"));
  REQUIRE(answer.ok());
  CHECK(std::chrono::steady_clock::now() - start >= ApiServer::kFreshnessWait);
  CHECK(answer->status == 504);
  CHECK(http::FindHeader(answer->headers, "Retry-After") == "1");
  CHECK(http::FindHeader(answer->headers, "Cache-Control") == "no-cache, private");
}

TEST_CASE("InProcessTransport injects drops errors and client timeouts") {
  auto sim = GeneratedSimulation({.clusters = 1});
  fakes::InProcessTransport transport(*sim);
  std::string url = "http://kubesim.test/clusters/cluster-0000/api/v1/namespaces";
  REQUIRE(sim->faults().Set("cluster-0000", {.drop_rate = 1}).ok());
  auto dropped = SendAndWait(transport, Request(url));
  CHECK(dropped.status().code() == Code::kUnavailable);

  REQUIRE(sim->faults().Set("cluster-0000", {.error_rate = 1}).ok());
  auto error = SendAndWait(transport, Request(url));
  REQUIRE(error.ok());
  CHECK((error->status == 500 || error->status == 503));

  REQUIRE(sim->faults().Set("cluster-0000", {.timeout_rate = 1}).ok());
  http::Request slow = Request(url);
  slow.timeout = 50ms;
  auto timed_out = SendAndWait(transport, slow);
  CHECK(timed_out.status().code() == Code::kTimeout);

  // Latency longer than the client's timeout is a timeout too.
  REQUIRE(sim->faults().Set("cluster-0000", {.latency_p50_ms = 5000, .latency_p99_ms = 5000}).ok());
  auto late = SendAndWait(transport, slow);
  CHECK(late.status().code() == Code::kTimeout);
}

TEST_CASE("InProcessTransport streams watch events and cancels cleanly [concurrent]") {
  auto sim = GeneratedSimulation({.clusters = 1});
  auto transport = std::make_unique<fakes::InProcessTransport>(*sim);
  std::mutex mu;
  std::condition_variable cv;
  std::string data;
  int headers_status = 0;
  std::vector<Status> done;
  std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> wrong_thread{false};
  http::Transport::StreamCallbacks callbacks;
  callbacks.on_headers = [&](int status, const http::Headers&) {
    std::lock_guard lock(mu);
    headers_status = status;
  };
  callbacks.on_data = [&](std::string_view chunk) {
    if (std::this_thread::get_id() == caller) wrong_thread = true;
    std::lock_guard lock(mu);
    data.append(chunk);
    cv.notify_all();
  };
  callbacks.on_done = [&](Status status) {
    std::lock_guard lock(mu);
    done.push_back(status);
    cv.notify_all();
  };
  auto wait = [&](auto predicate) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, kDeadline, predicate);
  };
  http::Request request = Request(
      "http://kubesim.test/clusters/cluster-0000/api/v1/namespaces/default/configmaps?watch=1");
  request.timeout = 0ms;
  auto handle = transport->Stream(request, callbacks);
  REQUIRE(Eventually([&] { return sim->Stats()["clusters"]["cluster-0000"]["openWatches"] == 1; }));
  ApiServer* target = sim->cluster("cluster-0000");
  for (int i = 0; i < 20; ++i) {
    Json cm = {{"apiVersion", "v1"},
               {"kind", "ConfigMap"},
               {"metadata", {{"name", "cm-" + std::to_string(i)}}}};
    REQUIRE(target->Call("POST", "/api/v1/namespaces/default/configmaps", cm).status == 201);
  }
  REQUIRE(wait([&] { return data.find("cm-19") != std::string::npos; }));
  {
    std::lock_guard lock(mu);
    CHECK(headers_status == 200);
    // In order, one event per line.
    CHECK(data.find("\"cm-3\"") < data.find("\"cm-4\""));
    CHECK(std::count(data.begin(), data.end(), '\n') == 20);
  }
  CHECK_FALSE(wrong_thread);
  handle->Cancel();
  REQUIRE(wait([&] { return !done.empty(); }));
  handle.reset();
  transport.reset();
  std::lock_guard lock(mu);
  REQUIRE(done.size() == 1);
  CHECK(done[0].code() == Code::kCancelled);
  CHECK(sim->Stats()["clusters"]["cluster-0000"]["openWatches"] == 0);
}

TEST_CASE("InProcessTransport ends open streams and pending requests when destroyed [concurrent]") {
  auto sim = GeneratedSimulation({.clusters = 1});
  auto transport = std::make_unique<fakes::InProcessTransport>(*sim);
  std::promise<Status> stream_done;
  http::Transport::StreamCallbacks callbacks;
  callbacks.on_done = [&](Status s) { stream_done.set_value(s); };
  auto handle =
      transport->Stream(Request("http://kubesim.test/api/v1/namespaces?watch=1"), callbacks);
  REQUIRE(Eventually([&] { return sim->Stats()["clusters"]["hub"]["openWatches"] == 1; }));
  REQUIRE(sim->faults().Set("hub", {.timeout_rate = 1}).ok());
  std::promise<Status> send_done;
  http::Request hanging = Request("http://kubesim.test/api/v1/namespaces");
  hanging.timeout = 0ms;
  transport->Send(hanging, [&](Result<http::Response> r) { send_done.set_value(r.status()); });
  transport.reset();
  auto stream_future = stream_done.get_future();
  auto send_future = send_done.get_future();
  REQUIRE(stream_future.wait_for(kDeadline) == std::future_status::ready);
  REQUIRE(send_future.wait_for(kDeadline) == std::future_status::ready);
  CHECK(stream_future.get().code() == Code::kCancelled);
  CHECK(send_future.get().code() == Code::kCancelled);
  handle.reset();  // after the transport: harmless
  CHECK(sim->Stats()["clusters"]["hub"]["openWatches"] == 0);
}

TEST_CASE(
    "kube::ClientImpl works against the simulator through the in-process transport [concurrent]") {
  auto sim =
      GeneratedSimulation({.clusters = 2, .syncsets = 1, .selector_syncsets = 1, .resources = 2});
  auto transport = std::make_shared<fakes::InProcessTransport>(*sim);
  kube::ClusterConfig hub_config;
  hub_config.server = "http://kubesim.test";
  kube::ClientImpl hub(hub_config, transport);
  auto cds = hub.List(kube::Collection(kube::resources::kClusterDeployments), {});
  REQUIRE_MESSAGE(cds.ok(), cds.status().ToString());
  CHECK(cds->items.size() == 2);
  auto sss = hub.Get(kube::Object(kube::resources::kSelectorSyncSets, "", "fleet-sss-00"));
  REQUIRE(sss.ok());
  CHECK((*sss)["spec"]["resources"].size() == 2);

  kube::ClusterConfig target_config = hub_config;
  target_config.server += "/clusters/cluster-0001";
  kube::ClientImpl target(target_config, transport);
  kube::WatchOptions watch_options;
  watch_options.timeout_seconds = 30;
  auto watch =
      target.Watch(kube::Collection(kube::resources::kConfigMaps, "default"), watch_options);
  REQUIRE(watch.ok());
  Json cm = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "from-client"}}}};
  auto created = target.Create(kube::Collection(kube::resources::kConfigMaps, "default"), cm);
  REQUIRE_MESSAGE(created.ok(), created.status().ToString());
  bool seen = false;
  auto end = std::chrono::steady_clock::now() + kDeadline;
  while (!seen && std::chrono::steady_clock::now() < end) {
    auto event = (*watch)->Next(100ms);
    REQUIRE(event.ok());
    if (*event && (*event)->object["metadata"]["name"] == "from-client") seen = true;
  }
  CHECK(seen);
  CHECK(target.Get(kube::Object(kube::resources::kConfigMaps, "default", "from-client")).ok());
  CHECK(hub.Get(kube::Object(kube::resources::kConfigMaps, "default", "from-client"))
            .status()
            .code() == Code::kNotFound);
}

}  // namespace
}  // namespace syncbus::kubesim
