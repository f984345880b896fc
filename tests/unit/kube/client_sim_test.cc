// ClientImpl and Reflector against the Kubernetes simulator: through the in-process transport
// (real REST without sockets), and through CurlTransport to the simulator's HTTP server (the
// whole stack: kubeconfig, path prefixes, chunked watches, fault injection).
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>

#include <doctest/doctest.h>

#include "common/http/curl_transport.h"
#include "common/kube/client_impl.h"
#include "common/kube/config.h"
#include "common/kube/reflector.h"
#include "tests/fakes/common/http/in_process_transport.h"
#include "tests/kubesim/sim_server.h"
#include "tests/kubesim/sim_simulation.h"

namespace syncbus::kube {
namespace {

using std::chrono::milliseconds;
constexpr auto kDeadline = std::chrono::seconds(30);

struct Sim {
  std::unique_ptr<kubesim::Simulation> simulation;
  std::shared_ptr<fakes::InProcessTransport> transport;
  std::unique_ptr<ClientImpl> client;

  explicit Sim(size_t watch_history = 0) {
    kubesim::Simulation::Options options;
    options.token = "sim-token";
    options.watch_history = watch_history;
    Result<std::unique_ptr<kubesim::Simulation>> created = kubesim::Simulation::Create(options);
    REQUIRE(created.ok());
    simulation = std::move(created).value();
    transport = std::make_shared<fakes::InProcessTransport>(*simulation);
    ClusterConfig config;
    config.server = "https://sim.invalid:6443";
    config.bearer_token = "sim-token";
    client = std::make_unique<ClientImpl>(config, transport);
    Json ns = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "hive"}}}};
    Result<Json> made = client->Create(Collection(resources::kNamespaces), ns);
    REQUIRE((made.ok() || made.status().code() == Code::kAlreadyExists));
  }
  ~Sim() {
    client.reset();
    transport.reset();
  }
};

Json ConfigMap(const std::string& name, const std::string& value) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", "hive"}}},
          {"data", {{"key", value}}}};
}

std::string Rv(const Json& object) {
  return object["metadata"]["resourceVersion"].get<std::string>();
}

// Next event that is not a bookmark, waiting up to the deadline.
WatchEvent NextEvent(WatchStream& stream) {
  auto until = std::chrono::steady_clock::now() + kDeadline;
  while (std::chrono::steady_clock::now() < until) {
    Result<std::optional<WatchEvent>> next = stream.Next(milliseconds(500));
    REQUIRE(next.ok());
    if (next->has_value() && (*next)->type != WatchEventType::kBookmark) return std::move(**next);
  }
  FAIL("no watch event before the deadline");
  return {};
}

// cm-0 .. cm-<n-1> in namespace hive.
void CreateConfigMaps(Sim& sim, int n) {
  for (int i = 0; i < n; ++i) {
    REQUIRE(sim.client
                ->Create(Collection(resources::kConfigMaps, "hive"),
                         ConfigMap("cm-" + std::to_string(i), "v"))
                .ok());
  }
}

TEST_CASE("client over the simulator: create, get, update conflict, delete") {
  Sim sim;
  ObjectRef ref = Object(resources::kConfigMaps, "hive", "a");
  Result<Json> created =
      sim.client->Create(Collection(resources::kConfigMaps, "hive"), ConfigMap("a", "1"));
  REQUIRE(created.ok());
  CHECK((*created)["data"]["key"] == "1");

  Result<Json> again =
      sim.client->Create(Collection(resources::kConfigMaps, "hive"), ConfigMap("a", "1"));
  CHECK(again.status().code() == Code::kAlreadyExists);

  Result<Json> got = sim.client->Get(ref);
  REQUIRE(got.ok());
  CHECK(Rv(*got) == Rv(*created));

  Json update = *got;
  update["data"]["key"] = "2";
  Result<Json> updated = sim.client->Update(ref, update);
  REQUIRE(updated.ok());
  CHECK(Rv(*updated) != Rv(*got));
  Result<Json> stale = sim.client->Update(ref, update);  // still carries the old resourceVersion
  CHECK(stale.status().code() == Code::kConflict);
  CHECK(stale.status().http_status() == 409);

  CHECK(sim.client->Delete(ref, {}).ok());
  CHECK(sim.client->Get(ref).status().code() == Code::kNotFound);
  CHECK(sim.client->Delete(ref, {}).code() == Code::kNotFound);
}

TEST_CASE("client over the simulator: a wrong token is kUnauthorized") {
  Sim sim;
  ClusterConfig config;
  config.server = "https://sim.invalid";
  config.bearer_token = "wrong";
  ClientImpl client(config, sim.transport);
  CHECK(client.Get(Object(resources::kConfigMaps, "hive", "a")).status().code() ==
        Code::kUnauthorized);
}

TEST_CASE("client over the simulator: paged list returns every item and the list's version") {
  Sim sim;
  CreateConfigMaps(sim, 25);
  uint64_t before = sim.simulation->hub().stats().requests;
  ListOptions options;
  options.limit = 10;
  Result<ObjectList> list = sim.client->List(Collection(resources::kConfigMaps, "hive"), options);
  REQUIRE(list.ok());
  CHECK(list->items.size() == 25);
  CHECK(sim.simulation->hub().stats().requests - before == 3);  // pages of 10, 10, 5
  CHECK_FALSE(list->resource_version.empty());
  std::set<std::string> names;
  for (const Json& item : list->items) {
    names.insert(item["metadata"]["name"]);
    CHECK(item["kind"] == "ConfigMap");
  }
  CHECK(names.size() == 25);

  ListOptions selected;
  selected.field_selector = "metadata.name=cm-7";
  Result<ObjectList> one = sim.client->List(Collection(resources::kConfigMaps, "hive"), selected);
  REQUIRE(one.ok());
  REQUIRE(one->items.size() == 1);
  CHECK(one->items[0]["metadata"]["name"] == "cm-7");
}

TEST_CASE(
    "client over the simulator: each page goes to on_page as it arrives, what it leaves is "
    "returned") {
  Sim sim;
  CreateConfigMaps(sim, 25);
  ListOptions options;
  options.limit = 10;
  std::vector<size_t> page_sizes;
  size_t taken = 0;
  options.on_page = [&](std::vector<Json>& page) {
    page_sizes.push_back(page.size());
    for (const Json& item : page) CHECK(item["kind"] == "ConfigMap");  // complete objects
    // Take every object but the page's first.
    taken += page.size() - 1;
    page.erase(page.begin() + 1, page.end());
  };
  Result<ObjectList> list = sim.client->List(Collection(resources::kConfigMaps, "hive"), options);
  REQUIRE(list.ok());
  CHECK(page_sizes == std::vector<size_t>{10, 10, 5});
  CHECK(taken == 22);
  CHECK(list->items.size() == 3);
}

TEST_CASE(
    "client over the simulator: a list from the watch cache is one request, handed over in "
    "pages of `limit`") {
  Sim sim;
  CreateConfigMaps(sim, 25);
  uint64_t before = sim.simulation->hub().stats().requests;
  ListOptions options;
  options.limit = 10;
  options.resource_version = "0";
  std::vector<size_t> page_sizes;
  options.on_page = [&](std::vector<Json>& page) {
    page_sizes.push_back(page.size());
    for (const Json& item : page) CHECK(item["kind"] == "ConfigMap");  // complete objects
    page.erase(page.begin() + 1, page.end());
  };
  ListProgress progress;
  options.progress = &progress;
  Result<ObjectList> list = sim.client->List(Collection(resources::kConfigMaps, "hive"), options);
  REQUIRE(list.ok());
  CHECK(sim.simulation->hub().stats().requests - before == 1);  // the cache ignores limit
  CHECK(page_sizes == std::vector<size_t>{10, 10, 5});
  CHECK(list->items.size() == 3);
  CHECK_FALSE(list->resource_version.empty());
  CHECK(progress.resource_version == list->resource_version);
  CHECK(progress.next_continue.empty());  // nothing to resume

  ListOptions metadata;
  metadata.resource_version = "0";
  metadata.metadata_only = true;
  metadata.field_selector = "metadata.name=cm-7";
  Result<ObjectList> one = sim.client->List(Collection(resources::kConfigMaps, "hive"), metadata);
  REQUIRE(one.ok());
  REQUIRE(one->items.size() == 1);
  CHECK(one->items[0]["kind"] == "PartialObjectMetadata");
  CHECK_FALSE(one->items[0].contains("data"));

  ListOptions empty;
  empty.resource_version = "0";
  int pages = 0;
  empty.on_page = [&](std::vector<Json>& page) { pages += page.empty() ? 1 : 100; };
  Result<ObjectList> none = sim.client->List(Collection(resources::kSecrets, "hive"), empty);
  REQUIRE(none.ok());
  CHECK(none->items.empty());
  CHECK(pages == 1);  // an empty list is one empty page, as a paged list's

  ListOptions wrong;
  wrong.resource_version = "0";
  wrong.label_selector = "a in (";
  CHECK(sim.client->List(Collection(resources::kConfigMaps, "hive"), wrong).status().code() ==
        Code::kInvalidArgument);
}

TEST_CASE(
    "client over the simulator: watch from a list's version sees changes in order [concurrent]") {
  Sim sim;
  REQUIRE(sim.client->Create(Collection(resources::kConfigMaps, "hive"), ConfigMap("before", "0"))
              .ok());
  Result<ObjectList> list = sim.client->List(Collection(resources::kConfigMaps, "hive"), {});
  REQUIRE(list.ok());
  WatchOptions options;
  options.resource_version = list->resource_version;
  Result<std::unique_ptr<WatchStream>> watch =
      sim.client->Watch(Collection(resources::kConfigMaps, "hive"), options);
  REQUIRE(watch.ok());

  ObjectRef ref = Object(resources::kConfigMaps, "hive", "w");
  REQUIRE(sim.client->Create(Collection(resources::kConfigMaps, "hive"), ConfigMap("w", "1")).ok());
  REQUIRE(sim.client->Patch(ref, PatchType::kMerge, R"({"data":{"key":"2"}})").ok());
  REQUIRE(sim.client->Delete(ref, {}).ok());

  WatchEvent added = NextEvent(**watch);
  CHECK(added.type == WatchEventType::kAdded);
  CHECK(added.object["metadata"]["name"] == "w");
  WatchEvent modified = NextEvent(**watch);
  CHECK(modified.type == WatchEventType::kModified);
  CHECK(modified.object["data"]["key"] == "2");
  WatchEvent deleted = NextEvent(**watch);
  CHECK(deleted.type == WatchEventType::kDeleted);

  sim.simulation->hub().SendBookmarks();
  auto until = std::chrono::steady_clock::now() + kDeadline;
  bool bookmark = false;
  while (!bookmark && std::chrono::steady_clock::now() < until) {
    Result<std::optional<WatchEvent>> next = (*watch)->Next(milliseconds(500));
    REQUIRE(next.ok());
    bookmark = next->has_value() && (*next)->type == WatchEventType::kBookmark;
  }
  CHECK(bookmark);

  sim.simulation->hub().CloseAllWatches();
  Result<std::optional<WatchEvent>> closed = (*watch)->Next(kDeadline);
  CHECK(closed.status().code() == Code::kUnavailable);
}

TEST_CASE("client over the simulator: a watch from an expired version is kGone [concurrent]") {
  Sim sim;
  Result<Json> first =
      sim.client->Create(Collection(resources::kConfigMaps, "hive"), ConfigMap("x", "1"));
  REQUIRE(first.ok());
  REQUIRE(sim.client->Create(Collection(resources::kConfigMaps, "hive"), ConfigMap("y", "1")).ok());
  sim.simulation->hub().ExpireHistory();
  WatchOptions options;
  options.resource_version = Rv(*first);
  Result<std::unique_ptr<WatchStream>> watch =
      sim.client->Watch(Collection(resources::kConfigMaps, "hive"), options);
  REQUIRE(watch.ok());
  Result<std::optional<WatchEvent>> next = (*watch)->Next(kDeadline);
  CHECK(next.status().code() == Code::kGone);
}

TEST_CASE("client over the simulator: server-side apply, field ownership and force") {
  Sim sim;
  ObjectRef ref = Object(resources::kConfigMaps, "hive", "ssa");
  Result<Json> applied = sim.client->Apply(ref, ConfigMap("ssa", "one"), {"manager-a", false});
  REQUIRE(applied.ok());
  CHECK((*applied)["data"]["key"] == "one");

  Result<Json> conflict = sim.client->Apply(ref, ConfigMap("ssa", "two"), {"manager-b", false});
  CHECK(conflict.status().code() == Code::kConflict);

  Result<Json> forced = sim.client->Apply(ref, ConfigMap("ssa", "two"), {"manager-b", true});
  REQUIRE(forced.ok());
  CHECK((*forced)["data"]["key"] == "two");

  Result<Json> same = sim.client->Apply(ref, ConfigMap("ssa", "two"), {"manager-b", true});
  REQUIRE(same.ok());
  CHECK(Rv(*same) == Rv(*forced));  // no change, no new version
}

TEST_CASE(
    "client over the simulator: patch types, and strategic merge on a custom resource is 415") {
  Sim sim;
  ObjectRef cm = Object(resources::kConfigMaps, "hive", "p");
  REQUIRE(sim.client->Create(Collection(resources::kConfigMaps, "hive"), ConfigMap("p", "1")).ok());
  Result<Json> json_patch = sim.client->Patch(
      cm, PatchType::kJson, R"([{"op":"replace","path":"/data/key","value":"j"}])");
  REQUIRE(json_patch.ok());
  CHECK((*json_patch)["data"]["key"] == "j");
  Result<Json> strategic =
      sim.client->Patch(cm, PatchType::kStrategicMerge, R"({"data":{"other":"s"}})");
  REQUIRE(strategic.ok());
  CHECK((*strategic)["data"]["other"] == "s");

  Json sync_set = {{"apiVersion", "hive.openshift.io/v1"},
                   {"kind", "SyncSet"},
                   {"metadata", {{"name", "ss"}, {"namespace", "hive"}}},
                   {"spec", {{"clusterDeploymentRefs", Json::array({{{"name", "c1"}}})}}}};
  REQUIRE(sim.client->Create(Collection(resources::kSyncSets, "hive"), sync_set).ok());
  Result<Json> rejected =
      sim.client->Patch(Object(resources::kSyncSets, "hive", "ss"), PatchType::kStrategicMerge,
                        R"({"spec":{"resourceApplyMode":"Sync"}})");
  CHECK(rejected.status().code() == Code::kUnsupported);
  CHECK(rejected.status().http_status() == 415);
}

TEST_CASE(
    "client over the simulator: status subresource update with a stale version is kConflict") {
  Sim sim;
  Json cluster_sync = {{"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
                       {"kind", "ClusterSync"},
                       {"metadata", {{"name", "c1"}, {"namespace", "hive"}}},
                       {"spec", Json::object()}};
  Result<Json> created =
      sim.client->Create(Collection(resources::kClusterSyncs, "hive"), cluster_sync);
  REQUIRE(created.ok());
  ObjectRef status = StatusOf(resources::kClusterSyncs, "hive", "c1");
  Json with_status = *created;
  with_status["status"] = {{"controlledByReplica", 1}};
  Result<Json> updated = sim.client->Update(status, with_status);
  REQUIRE(updated.ok());
  CHECK((*updated)["status"]["controlledByReplica"] == 1);
  with_status["status"]["controlledByReplica"] = 2;
  Result<Json> stale = sim.client->Update(status, with_status);
  CHECK(stale.status().code() == Code::kConflict);
}

TEST_CASE("client over the simulator: async applies in parallel [concurrent]") {
  Sim sim;
  constexpr int kApplies = 200;
  std::mutex mu;
  std::condition_variable cv;
  int ok = 0, done = 0;
  for (int i = 0; i < kApplies; ++i) {
    std::string name = "async-" + std::to_string(i);
    sim.client->ApplyAsync(Object(resources::kConfigMaps, "hive", name), ConfigMap(name, "v"),
                           {"syncbus", true}, [&](Result<Json> r) {
                             std::lock_guard lock(mu);
                             ++done;
                             if (r.ok()) ++ok;
                             cv.notify_all();
                           });
  }
  std::unique_lock lock(mu);
  REQUIRE(cv.wait_for(lock, kDeadline, [&] { return done == kApplies; }));
  CHECK(ok == kApplies);
  lock.unlock();
  Result<ObjectList> list = sim.client->List(Collection(resources::kConfigMaps, "hive"), {});
  REQUIRE(list.ok());
  CHECK(list->items.size() == kApplies);
}

// A mirror kept by a Reflector: name -> resourceVersion.
class Mirror final : public ReflectorHandler {
 public:
  void OnReplace(std::vector<Json> items) override {
    std::lock_guard lock(mu_);
    objects_.clear();
    for (const Json& item : items) objects_[item["metadata"]["name"]] = Rv(item);
    ++replaces_;
    cv_.notify_all();
  }
  void OnUpsert(Json object) override {
    std::lock_guard lock(mu_);
    objects_[object["metadata"]["name"]] = Rv(object);
    cv_.notify_all();
  }
  void OnDelete(Json object) override {
    std::lock_guard lock(mu_);
    objects_.erase(object["metadata"]["name"].get<std::string>());
    ++deletes_;
    cv_.notify_all();
  }
  void OnSynced() override {}

  // Waits until the mirror equals `expected`.
  bool AwaitEqual(const std::map<std::string, std::string>& expected) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kDeadline, [&] { return objects_ == expected; });
  }
  bool AwaitReplaces(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kDeadline, [&] { return replaces_ >= n; });
  }
  std::map<std::string, std::string> objects() {
    std::lock_guard lock(mu_);
    return objects_;
  }
  int replaces() {
    std::lock_guard lock(mu_);
    return replaces_;
  }
  int deletes() {
    std::lock_guard lock(mu_);
    return deletes_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> objects_;
  int replaces_ = 0;
  int deletes_ = 0;
};

std::map<std::string, std::string> ServerState(ClientImpl& client) {
  Result<ObjectList> list = client.List(Collection(resources::kConfigMaps, "hive"), {});
  REQUIRE(list.ok());
  std::map<std::string, std::string> state;
  for (const Json& item : list->items) state[item["metadata"]["name"]] = Rv(item);
  return state;
}

Reflector::Options NoSleepOptions() {
  Reflector::Options options;
  options.list.limit = 7;  // several pages
  options.wait = [](milliseconds) {};
  return options;
}

TEST_CASE(
    "reflector over the simulator: initial list, then adds, updates and deletes [concurrent]") {
  Sim sim;
  for (int i = 0; i < 20; ++i) {
    REQUIRE(sim.client
                ->Create(Collection(resources::kConfigMaps, "hive"),
                         ConfigMap("r-" + std::to_string(i), "0"))
                .ok());
  }
  Mirror mirror;
  Reflector reflector(*sim.client, Collection(resources::kConfigMaps, "hive"), mirror,
                      NoSleepOptions());
  reflector.Start();
  REQUIRE(mirror.AwaitEqual(ServerState(*sim.client)));
  REQUIRE(sim.client->Delete(Object(resources::kConfigMaps, "hive", "r-3"), {}).ok());
  REQUIRE(sim.client
              ->Patch(Object(resources::kConfigMaps, "hive", "r-4"), PatchType::kMerge,
                      R"({"data":{"key":"1"}})")
              .ok());
  REQUIRE(
      sim.client->Create(Collection(resources::kConfigMaps, "hive"), ConfigMap("r-new", "0")).ok());
  CHECK(mirror.AwaitEqual(ServerState(*sim.client)));
  CHECK(mirror.deletes() == 1);
  CHECK(mirror.objects().count("r-3") == 0);
  reflector.Stop();
  CHECK(reflector.relists() == 0);
}

TEST_CASE(
    "reflector over the simulator: rewatch after CloseAllWatches without a relist [concurrent]") {
  Sim sim;
  Mirror mirror;
  Reflector reflector(*sim.client, Collection(resources::kConfigMaps, "hive"), mirror,
                      NoSleepOptions());
  reflector.Start();
  // Listed before "one" exists, so "one" arrives through the watch: the watch is open.
  REQUIRE(mirror.AwaitReplaces(1));
  REQUIRE(
      sim.client->Create(Collection(resources::kConfigMaps, "hive"), ConfigMap("one", "0")).ok());
  REQUIRE(mirror.AwaitEqual(ServerState(*sim.client)));
  sim.simulation->hub().CloseAllWatches();
  REQUIRE(
      sim.client->Create(Collection(resources::kConfigMaps, "hive"), ConfigMap("two", "0")).ok());
  CHECK(mirror.AwaitEqual(ServerState(*sim.client)));
  reflector.Stop();
  CHECK(reflector.watch_restarts() >= 1);
  CHECK(reflector.relists() == 0);
  CHECK(mirror.replaces() == 1);
}

TEST_CASE(
    "reflector over the simulator: relist after ExpireHistory and a closed watch [concurrent]") {
  Sim sim;
  Mirror mirror;
  Reflector reflector(*sim.client, Collection(resources::kConfigMaps, "hive"), mirror,
                      NoSleepOptions());
  reflector.Start();
  REQUIRE(mirror.AwaitReplaces(1));
  REQUIRE(
      sim.client->Create(Collection(resources::kConfigMaps, "hive"), ConfigMap("kept", "0")).ok());
  REQUIRE(mirror.AwaitEqual(ServerState(*sim.client)));
  sim.simulation->hub().ExpireHistory();
  sim.simulation->hub().CloseAllWatches();
  // Resuming from the last seen version is now 410: the reflector lists again.
  REQUIRE(
      sim.client->Create(Collection(resources::kConfigMaps, "hive"), ConfigMap("after", "0")).ok());
  CHECK(mirror.AwaitReplaces(2));
  CHECK(mirror.AwaitEqual(ServerState(*sim.client)));
  reflector.Stop();
  CHECK(reflector.relists() >= 1);
}

TEST_CASE(
    "reflector over the simulator: the mirror equals the server after churn and faults "
    "[concurrent]") {
  Sim sim(/*watch_history=*/50);
  Mirror mirror;
  Reflector reflector(*sim.client, Collection(resources::kConfigMaps, "hive"), mirror,
                      NoSleepOptions());
  reflector.Start();
  std::mt19937 random(7);
  for (int step = 0; step < 400; ++step) {
    std::string name = "churn-" + std::to_string(random() % 40);
    ObjectRef ref = Object(resources::kConfigMaps, "hive", name);
    switch (random() % 3) {
      case 0:
      case 1: {
        Result<Json> applied =
            sim.client->Apply(ref, ConfigMap(name, std::to_string(step)), {"churn", true});
        REQUIRE(applied.ok());
        break;
      }
      default: {
        Status deleted = sim.client->Delete(ref, {});
        REQUIRE((deleted.ok() || deleted.code() == Code::kNotFound));
      }
    }
    if (step % 97 == 0) sim.simulation->hub().CloseAllWatches();
    if (step % 151 == 0) sim.simulation->hub().ExpireHistory();
  }
  CHECK(mirror.AwaitEqual(ServerState(*sim.client)));
  reflector.Stop();
}

// --- The whole stack: kubeconfig -> ClientImpl -> CurlTransport -> SimServer ------------------

struct SocketSim {
  std::unique_ptr<kubesim::SimServer> server;
  std::shared_ptr<http::CurlTransport> transport;

  explicit SocketSim(int clusters = 0) {
    kubesim::SimServer::Options options;
    options.simulation.token = "sock-token";
    options.simulation.fleet.clusters = clusters;
    options.bookmark_interval = milliseconds(0);
    Result<std::unique_ptr<kubesim::SimServer>> started = kubesim::SimServer::Start(options);
    REQUIRE(started.ok());
    server = std::move(started).value();
    Result<std::unique_ptr<http::CurlTransport>> curl = http::CurlTransport::Create({});
    REQUIRE(curl.ok());
    transport = std::move(curl).value();
  }
  ~SocketSim() {
    transport.reset();
    server->Stop();
  }
  std::unique_ptr<ClientImpl> Client(const std::string& kubeconfig) {
    Result<ClusterConfig> config = ParseKubeconfig(kubeconfig);
    REQUIRE(config.ok());
    return std::make_unique<ClientImpl>(*config, transport);
  }
  std::unique_ptr<ClientImpl> Hub() { return Client(server->HubKubeconfig()); }
  std::unique_ptr<ClientImpl> Target(const std::string& name) {
    ClusterConfig config;
    config.server = server->base_url() + "/clusters/" + name;
    config.bearer_token = "sock-token";
    return std::make_unique<ClientImpl>(config, transport);
  }
};

TEST_CASE("client over curl and the socket simulator: targets behind a path prefix") {
  SocketSim sim(2);
  const std::vector<std::string>& names = sim.server->simulation().cluster_names();
  REQUIRE(names.size() == 2);
  std::unique_ptr<ClientImpl> first = sim.Target(names[0]);
  std::unique_ptr<ClientImpl> second = sim.Target(names[1]);
  ObjectRef ref = Object(resources::kConfigMaps, "default", "only-on-first");
  Json cm = ConfigMap("only-on-first", "1");
  cm["metadata"]["namespace"] = "default";
  REQUIRE(first->Apply(ref, cm, {"syncbus", true}).ok());
  CHECK(first->Get(ref).ok());
  CHECK(second->Get(ref).status().code() == Code::kNotFound);
  CHECK(sim.server->simulation().cluster(names[0])->stats().objects >
        sim.server->simulation().cluster(names[1])->stats().objects);

  Result<Json> discovery = first->GetPath("/api/v1");
  REQUIRE(discovery.ok());
  CHECK(discovery->value("kind", "") == "APIResourceList");
}

TEST_CASE("client over curl and the socket simulator: CRUD, paging and conflicts") {
  SocketSim sim;
  std::unique_ptr<ClientImpl> hub = sim.Hub();
  Json ns = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "hive"}}}};
  Result<Json> made = hub->Create(Collection(resources::kNamespaces), ns);
  REQUIRE((made.ok() || made.status().code() == Code::kAlreadyExists));
  for (int i = 0; i < 30; ++i) {
    REQUIRE(hub->Create(Collection(resources::kConfigMaps, "hive"),
                        ConfigMap("s-" + std::to_string(i), "v"))
                .ok());
  }
  ListOptions paged;
  paged.limit = 7;
  Result<ObjectList> list = hub->List(Collection(resources::kConfigMaps, "hive"), paged);
  REQUIRE(list.ok());
  CHECK(list->items.size() == 30);
  // From the watch cache: one response over a connection of its own, split as it streams in.
  ListOptions cached = paged;
  cached.resource_version = "0";
  std::vector<size_t> page_sizes;
  cached.on_page = [&](std::vector<Json>& page) { page_sizes.push_back(page.size()); };
  Result<ObjectList> whole = hub->List(Collection(resources::kConfigMaps, "hive"), cached);
  REQUIRE(whole.ok());
  CHECK(whole->items.size() == 30);
  CHECK(page_sizes == std::vector<size_t>{7, 7, 7, 7, 2});
  CHECK(whole->resource_version == list->resource_version);
  Result<Json> got = hub->Get(Object(resources::kConfigMaps, "hive", "s-1"));
  REQUIRE(got.ok());
  Json changed = *got;
  changed["data"]["key"] = "changed";
  REQUIRE(hub->Update(Object(resources::kConfigMaps, "hive", "s-1"), changed).ok());
  CHECK(hub->Update(Object(resources::kConfigMaps, "hive", "s-1"), changed).status().code() ==
        Code::kConflict);
  // Connections are reused across all of that (the cache list had one of its own).
  CHECK(sim.transport->stats().connections <= 2);
}

TEST_CASE("client over curl and the socket simulator: injected throttling is kTooManyRequests") {
  SocketSim sim;
  std::unique_ptr<ClientImpl> hub = sim.Hub();
  kubesim::FaultSpec throttled;
  throttled.throttle_rate = 1.0;
  throttled.retry_after_seconds = 2;
  REQUIRE(sim.server->simulation().faults().SetDefault(throttled).ok());
  Result<Json> got = hub->Get(Object(resources::kConfigMaps, "default", "x"));
  CHECK(got.status().code() == Code::kTooManyRequests);
  CHECK(got.status().http_status() == 429);
  CHECK(got.status().retry_after() == std::chrono::seconds(2));
}

TEST_CASE("client over curl and the socket simulator: chunked watch, close and 410 [concurrent]") {
  SocketSim sim;
  std::unique_ptr<ClientImpl> hub = sim.Hub();
  Result<ObjectList> list = hub->List(Collection(resources::kConfigMaps, "default"), {});
  REQUIRE(list.ok());
  WatchOptions options;
  options.resource_version = list->resource_version;
  Result<std::unique_ptr<WatchStream>> watch =
      hub->Watch(Collection(resources::kConfigMaps, "default"), options);
  REQUIRE(watch.ok());
  Json cm = ConfigMap("watched", "1");
  cm["metadata"]["namespace"] = "default";
  Result<Json> created = hub->Create(Collection(resources::kConfigMaps, "default"), cm);
  REQUIRE(created.ok());
  WatchEvent added = NextEvent(**watch);
  CHECK(added.type == WatchEventType::kAdded);
  CHECK(added.object["metadata"]["name"] == "watched");
  sim.server->simulation().hub().CloseAllWatches();
  CHECK((*watch)->Next(kDeadline).status().code() == Code::kUnavailable);

  REQUIRE(hub->Delete(Object(resources::kConfigMaps, "default", "watched"), {}).ok());
  sim.server->simulation().hub().ExpireHistory();
  options.resource_version = Rv(*created);
  Result<std::unique_ptr<WatchStream>> expired =
      hub->Watch(Collection(resources::kConfigMaps, "default"), options);
  REQUIRE(expired.ok());
  CHECK((*expired)->Next(kDeadline).status().code() == Code::kGone);
}

TEST_CASE(
    "client over curl and the socket simulator: an unanswered watch ends at the request timeout") {
  SocketSim sim;
  Result<ClusterConfig> config = ParseKubeconfig(sim.server->HubKubeconfig());
  REQUIRE(config.ok());
  config->request_timeout = milliseconds(300);
  ClientImpl hub(*config, sim.transport);
  WatchOptions options;
  options.timeout_seconds = 1;

  // Answered: the watch lives past the request timeout and ends when the server closes it at
  // its timeoutSeconds.
  Result<std::unique_ptr<WatchStream>> answered =
      hub.Watch(Collection(resources::kConfigMaps, "default"), options);
  REQUIRE(answered.ok());
  auto started = std::chrono::steady_clock::now();
  Result<std::optional<WatchEvent>> next = (*answered)->Next(kDeadline);
  while (next.ok()) next = (*answered)->Next(kDeadline);
  CHECK(next.status().code() == Code::kUnavailable);
  CHECK(std::chrono::steady_clock::now() - started >= milliseconds(900));

  // Accepted and never answered: the watch ends with kTimeout instead of hanging.
  kubesim::FaultSpec silent;
  silent.timeout_rate = 1.0;
  REQUIRE(sim.server->simulation().faults().SetDefault(silent).ok());
  Result<std::unique_ptr<WatchStream>> unanswered =
      hub.Watch(Collection(resources::kConfigMaps, "default"), options);
  REQUIRE(unanswered.ok());
  Result<std::optional<WatchEvent>> stalled = (*unanswered)->Next(kDeadline);
  REQUIRE_FALSE(stalled.ok());
  CHECK(stalled.status().code() == Code::kTimeout);
  CHECK(stalled.status().message().find("no response from the server within 0.3 s") !=
        std::string::npos);
}

TEST_CASE(
    "client over curl and the socket simulator: 1,000 async applies across targets [concurrent]") {
  SocketSim sim(4);
  std::vector<std::unique_ptr<ClientImpl>> targets;
  for (const std::string& name : sim.server->simulation().cluster_names())
    targets.push_back(sim.Target(name));
  constexpr int kApplies = 1000;
  std::mutex mu;
  std::condition_variable cv;
  int ok = 0, done = 0;
  std::string first_error;
  for (int i = 0; i < kApplies; ++i) {
    std::string name = "bulk-" + std::to_string(i / 4);
    Json cm = ConfigMap(name, std::to_string(i));
    cm["metadata"]["namespace"] = "default";
    targets[i % 4]->ApplyAsync(Object(resources::kConfigMaps, "default", name), cm,
                               {"syncbus", true}, [&](Result<Json> r) {
                                 std::lock_guard lock(mu);
                                 ++done;
                                 if (r.ok()) {
                                   ++ok;
                                 } else if (first_error.empty()) {
                                   first_error = r.status().ToString();
                                 }
                                 cv.notify_all();
                               });
  }
  std::unique_lock lock(mu);
  REQUIRE(cv.wait_for(lock, std::chrono::seconds(120), [&] { return done == kApplies; }));
  CHECK_MESSAGE(ok == kApplies, first_error);
}

TEST_CASE(
    "client over curl and the socket simulator: requests go through the kubeconfig's proxy-url") {
  SocketSim sim;
  // The server's host does not resolve: only the proxy (the simulator itself, which answers
  // requests in absolute form by their path) can carry the requests.
  std::string kubeconfig = sim.server->HubKubeconfig();
  const std::string base = sim.server->base_url();  // http://127.0.0.1:PORT
  size_t at = kubeconfig.find(base);
  REQUIRE(at != std::string::npos);
  kubeconfig.replace(at, base.size(), "http://hub.syncbus-proxied.invalid:6443");
  Result<ClusterConfig> direct = ParseKubeconfig(kubeconfig);
  REQUIRE(direct.ok());
  CHECK(ClientImpl(*direct, sim.transport)
            .Get(Object(resources::kNamespaces, "", "default"))
            .status()
            .code() == Code::kUnavailable);

  size_t cluster = kubeconfig.find("    server: ");
  REQUIRE(cluster != std::string::npos);
  kubeconfig.insert(cluster, "    proxy-url: " + base + "\n");
  Result<ClusterConfig> proxied = ParseKubeconfig(kubeconfig);
  REQUIRE_MESSAGE(proxied.ok(), proxied.status().ToString());
  CHECK(proxied->proxy_url == base);
  ClientImpl hub(*proxied, sim.transport);
  Result<Json> ns = hub.Get(Object(resources::kNamespaces, "", "default"));
  REQUIRE_MESSAGE(ns.ok(), ns.status().ToString());
  CHECK((*ns)["metadata"]["name"] == "default");
}

TEST_CASE(
    "reflector over curl and the socket simulator: mirror equals server after churn [concurrent]") {
  SocketSim sim;
  std::unique_ptr<ClientImpl> hub = sim.Hub();
  Mirror mirror;
  ObjectRef collection = Collection(resources::kConfigMaps, "default");
  Reflector reflector(*hub, collection, mirror, NoSleepOptions());
  reflector.Start();
  REQUIRE(mirror.AwaitReplaces(1));
  std::mt19937 random(11);
  for (int step = 0; step < 200; ++step) {
    std::string name = "c-" + std::to_string(random() % 25);
    ObjectRef ref = Object(resources::kConfigMaps, "default", name);
    if (random() % 3 != 0) {
      Json cm = ConfigMap(name, std::to_string(step));
      cm["metadata"]["namespace"] = "default";
      REQUIRE(hub->Apply(ref, cm, {"churn", true}).ok());
    } else {
      Status deleted = hub->Delete(ref, {});
      REQUIRE((deleted.ok() || deleted.code() == Code::kNotFound));
    }
    if (step == 60) sim.server->simulation().hub().CloseAllWatches();
    if (step == 120) {
      sim.server->simulation().hub().ExpireHistory();
      sim.server->simulation().hub().CloseAllWatches();
    }
  }
  Result<ObjectList> list = hub->List(collection, {});
  REQUIRE(list.ok());
  std::map<std::string, std::string> expected;
  for (const Json& item : list->items) expected[item["metadata"]["name"]] = Rv(item);
  CHECK(mirror.AwaitEqual(expected));
  reflector.Stop();
}

}  // namespace
}  // namespace syncbus::kube
