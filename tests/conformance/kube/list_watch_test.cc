// Conformance: lists (paging, selectors, the list's resourceVersion) and watches (order of events,
// bookmarks, 410 on a resourceVersion older than the server's window, resourceVersion 0).
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "common/kube/client_impl.h"
#include "tests/conformance/kube/conformance_util.h"

namespace syncbus::conformance {
namespace {

using kube::Collection;
using kube::Object;
using std::chrono::milliseconds;
namespace resources = kube::resources;

// Names of the listed items, sorted.
std::set<std::string> Names(const kube::ObjectList& list) {
  std::set<std::string> names;
  for (const Json& item : list.items) names.insert(item["metadata"]["name"].get<std::string>());
  return names;
}

std::set<std::string> Selected(kube::Client& client, const std::string& ns,
                               const std::string& label_selector) {
  kube::ListOptions options;
  options.label_selector = label_selector;
  Result<kube::ObjectList> list = client.List(Collection(resources::kConfigMaps, ns), options);
  REQUIRE_MESSAGE(list.ok(), label_selector << ": " << list.status().ToString());
  return Names(*list);
}

// Events of `stream` until it ends (the server's timeoutSeconds) or `max_events` arrived.
std::vector<kube::WatchEvent> Drain(kube::WatchStream& stream, size_t max_events,
                                    Status* end = nullptr) {
  std::vector<kube::WatchEvent> events;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (events.size() < max_events && std::chrono::steady_clock::now() < until) {
    Result<std::optional<kube::WatchEvent>> next = stream.Next(milliseconds(200));
    if (!next.ok()) {
      if (end) *end = next.status();
      return events;
    }
    if (next->has_value()) events.push_back(std::move(**next));
  }
  return events;
}

std::vector<kube::WatchEvent> WithoutBookmarks(std::vector<kube::WatchEvent> events) {
  std::erase_if(
      events, [](const kube::WatchEvent& e) { return e.type == kube::WatchEventType::kBookmark; });
  return events;
}

// Creates a namespaced custom resource type "widgets" in a group of its own (named after `ns`),
// waits until it is Established and served, and returns it.
kube::Resource NewCustomResourceType(ServerUnderTest& server, const std::string& ns) {
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  kube::Resource crds{"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                      "CustomResourceDefinition", false};
  kube::Resource widgets{ns + ".conformance.syncbus.io", "v1", "widgets", "Widget", true};
  const std::string name = "widgets." + widgets.group;
  Json crd = {{"apiVersion", "apiextensions.k8s.io/v1"},
              {"kind", "CustomResourceDefinition"},
              {"metadata", {{"name", name}}},
              {"spec",
               {{"group", widgets.group},
                {"scope", "Namespaced"},
                {"names", {{"plural", "widgets"}, {"singular", "widget"}, {"kind", "Widget"}}},
                {"versions",
                 {{{"name", "v1"},
                   {"served", true},
                   {"storage", true},
                   {"schema",
                    {{"openAPIV3Schema",
                      {{"type", "object"},
                       {"properties",
                        {{"spec",
                          {{"type", "object"},
                           {"properties", {{"size", {{"type", "integer"}}}}}}}}}}}}}}}}}}};
  Result<Json> created = client->Create(Collection(crds), crd);
  REQUIRE_MESSAGE(created.ok(), created.status().ToString());
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    Result<Json> got = client->Get(Object(crds, "", name));
    REQUIRE(got.ok());
    bool established = false;
    for (const Json& c : (*got)["status"].value("conditions", Json::array())) {
      established |= c.value("type", "") == "Established" && c.value("status", "") == "True";
    }
    // Served once a list answers (discovery can lag the condition by a moment).
    if (established && client->List(Collection(widgets, ns), {}).ok()) return widgets;
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < until, name << " never became usable");
    std::this_thread::sleep_for(milliseconds(100));
  }
}

TEST_CASE("a paged list returns every item, its continue token and the list's resourceVersion") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("paging");
  for (int i = 0; i < 25; ++i) {
    REQUIRE(client
                ->Create(Collection(resources::kConfigMaps, ns),
                         ConfigMap(ns, "cm-" + std::to_string(100 + i), {{"i", "v"}}))
                .ok());
  }
  RawResponse page = server.Raw("GET", ConfigMapsPath(ns) + "?limit=10");
  REQUIRE(page.status == 200);
  CHECK(page.body["kind"] == "ConfigMapList");
  CHECK(page.body["apiVersion"] == "v1");
  CHECK(page.body["items"].size() == 10);
  CHECK(page.body["items"][0]["metadata"]["name"] == "cm-100");  // by name within a namespace
  CHECK(page.body["metadata"]["remainingItemCount"] == 15);
  REQUIRE(page.body["metadata"].contains("continue"));
  CHECK_FALSE(page.body["metadata"]["resourceVersion"].get<std::string>().empty());

  uint64_t before = server.requests();
  kube::ListOptions options;
  options.limit = 10;
  Result<kube::ObjectList> list = client->List(Collection(resources::kConfigMaps, ns), options);
  REQUIRE(list.ok());
  CHECK(server.requests() - before == 3);  // pages of 10, 10, 5
  CHECK(list->items.size() == 25);
  CHECK(Names(*list).size() == 25);
  CHECK_FALSE(list->resource_version.empty());
  for (const Json& item : list->items) CHECK(item["kind"] == "ConfigMap");

  RawResponse bad = server.Raw("GET", ConfigMapsPath(ns) + "?limit=10&continue=garbage");
  CheckStatusBody(bad, 400, "BadRequest");
}

// A list page beside idle watches of the same client, as a reflector's next page is: every page
// answers within its deadline. Over HTTP/2, libcurl 7.88 held some pages back until their timeout
// (the last frame of a page whose first frames another stream's transfer had read: 2 of 200
// pages of this case on the real apiserver; tests/unit/core/curl_transport_test.cc has the
// mechanism).
TEST_CASE("list pages beside open watches of the same client are never held back [concurrent]") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("pages-beside-watches");
  // 500 objects: a page of about 200 KiB that the server sends gzip-compressed, just over the
  // 16 KiB a transfer buffers, in 4 KiB frames.
  for (int i = 0; i < 500; ++i) {
    std::string value =
        std::to_string(i * 7919) + std::string(200, static_cast<char>('a' + i % 26));
    REQUIRE(client
                ->Create(Collection(resources::kConfigMaps, ns),
                         ConfigMap(ns, "cm-" + std::to_string(i), {{"k", value}}))
                .ok());
  }
  std::vector<std::unique_ptr<kube::WatchStream>> watches;
  for (int i = 0; i < 6; ++i) {
    kube::WatchOptions options;
    options.timeout_seconds = 600;
    Result<std::unique_ptr<kube::WatchStream>> watch =
        client->Watch(Collection(resources::kSecrets, ns), options);
    REQUIRE(watch.ok());
    watches.push_back(std::move(watch).value());
  }
  std::shared_ptr<kube::ClientImpl> lists = client->WithRequestTimeout(std::chrono::seconds(5));
  int held_back = 0;
  for (int i = 0; i < 150; ++i) {
    Result<kube::ObjectList> list = lists->List(Collection(resources::kConfigMaps, ns), {});
    if (!list.ok()) {
      ++held_back;
      MESSAGE(list.status().ToString());
      continue;
    }
    CHECK(list->items.size() == 500);
  }
  CHECK(held_back == 0);
}

TEST_CASE("label and field selectors") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("selectors");
  const std::vector<std::pair<std::string, Json>> objects = {
      {"prod-web", {{"env", "prod"}, {"tier", "web"}}},
      {"prod-db", {{"env", "prod"}}},
      {"dev-web", {{"env", "dev"}, {"tier", "web"}}},
      {"bare", Json::object()}};
  for (const auto& [name, labels] : objects) {
    REQUIRE(client->Create(Collection(resources::kConfigMaps, ns), ConfigMap(ns, name, {}, labels))
                .ok());
  }
  using Set = std::set<std::string>;
  CHECK(Selected(*client, ns, "env=prod") == Set{"prod-db", "prod-web"});
  CHECK(Selected(*client, ns, "env==prod,tier=web") == Set{"prod-web"});
  CHECK(Selected(*client, ns, "env!=prod") == Set{"bare", "dev-web"});
  CHECK(Selected(*client, ns, "env in (dev,prod)") == Set{"dev-web", "prod-db", "prod-web"});
  CHECK(Selected(*client, ns, "env notin (prod)") == Set{"bare", "dev-web"});
  CHECK(Selected(*client, ns, "tier") == Set{"dev-web", "prod-web"});
  CHECK(Selected(*client, ns, "!tier") == Set{"bare", "prod-db"});

  RawResponse bad = server.Raw("GET", ConfigMapsPath(ns) + "?labelSelector=env%3D%3D%3Dx");
  CheckStatusBody(bad, 400, "BadRequest");

  kube::ListOptions by_name;
  by_name.field_selector = "metadata.name=dev-web";
  Result<kube::ObjectList> one = client->List(Collection(resources::kConfigMaps, ns), by_name);
  REQUIRE(one.ok());
  CHECK(Names(*one) == Set{"dev-web"});
  kube::ListOptions by_namespace;
  by_namespace.field_selector = "metadata.namespace=" + ns;
  Result<kube::ObjectList> all_ns = client->List(Collection(resources::kConfigMaps), by_namespace);
  REQUIRE(all_ns.ok());
  CHECK(Names(*all_ns).size() == 4);
}

TEST_CASE("a watch from a list's resourceVersion sees each change once, in order [concurrent]") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("watch");
  REQUIRE(client->Create(Collection(resources::kConfigMaps, ns), ConfigMap(ns, "before", {})).ok());
  Result<kube::ObjectList> list = client->List(Collection(resources::kConfigMaps, ns), {});
  REQUIRE(list.ok());
  kube::WatchOptions options;
  options.resource_version = list->resource_version;
  Result<std::unique_ptr<kube::WatchStream>> watch =
      client->Watch(Collection(resources::kConfigMaps, ns), options);
  REQUIRE_MESSAGE(watch.ok(), watch.status().ToString());

  const kube::ObjectRef ref = Object(resources::kConfigMaps, ns, "w");
  Result<Json> created =
      client->Create(Collection(resources::kConfigMaps, ns), ConfigMap(ns, "w", {{"k", "1"}}));
  REQUIRE(created.ok());
  Result<Json> patched = client->Patch(ref, kube::PatchType::kMerge, R"({"data":{"k":"2"}})");
  REQUIRE(patched.ok());
  REQUIRE(client->Delete(ref, {}).ok());

  std::vector<kube::WatchEvent> events = WithoutBookmarks(Drain(**watch, 3));
  REQUIRE(events.size() == 3);
  CHECK(events[0].type == kube::WatchEventType::kAdded);
  CHECK(events[0].object["data"]["k"] == "1");
  CHECK(Rv(events[0].object) == Rv(*created));
  CHECK(events[1].type == kube::WatchEventType::kModified);
  CHECK(events[1].object["data"]["k"] == "2");
  CHECK(Rv(events[1].object) == Rv(*patched));
  CHECK(events[2].type == kube::WatchEventType::kDeleted);
  CHECK(RvNumber(Rv(events[2].object)) > RvNumber(Rv(*patched)));
  for (const kube::WatchEvent& e : events) {
    CHECK(e.object["kind"] == "ConfigMap");
    CHECK(e.object["apiVersion"] == "v1");
    CHECK(e.object["metadata"]["name"] == "w");
  }
}

TEST_CASE("a watch with bookmarks gets one before its timeout, then ends [concurrent]") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("bookmark");
  Result<Json> created =
      client->Create(Collection(resources::kConfigMaps, ns), ConfigMap(ns, "b", {}));
  REQUIRE(created.ok());
  kube::WatchOptions options;
  options.resource_version = Rv(*created);
  options.allow_bookmarks = true;
  options.timeout_seconds = 8;
  Result<std::unique_ptr<kube::WatchStream>> watch =
      client->Watch(Collection(resources::kConfigMaps, ns), options);
  REQUIRE(watch.ok());
  // A write elsewhere moves the server's resourceVersion on; the bookmark carries it.
  const std::string other = server.NewNamespace("bookmark-other");
  Result<Json> elsewhere =
      client->Create(Collection(resources::kConfigMaps, other), ConfigMap(other, "x", {}));
  REQUIRE(elsewhere.ok());

  Status end;
  std::vector<kube::WatchEvent> events = Drain(**watch, 100, &end);
  CHECK(end.code() == Code::kUnavailable);  // the server closed the watch at its timeout
  std::vector<kube::WatchEvent> bookmarks;
  for (const kube::WatchEvent& e : events) {
    if (e.type == kube::WatchEventType::kBookmark) bookmarks.push_back(e);
  }
  CHECK(WithoutBookmarks(events).empty());
  REQUIRE_FALSE(bookmarks.empty());
  const Json& bookmark = bookmarks.back().object;
  CHECK(bookmark["kind"] == "ConfigMap");
  CHECK(bookmark["apiVersion"] == "v1");
  CHECK(RvNumber(Rv(bookmark)) >= RvNumber(Rv(*created)));
  CHECK_FALSE(bookmark["metadata"].contains("name"));
}

TEST_CASE("a new resource type's watch from before it existed is 410 Expired") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("expired");
  // A type made now: its watch window starts at the current resourceVersion, so
  // resourceVersion 1 is older than anything the server can replay.
  const kube::Resource widgets = NewCustomResourceType(server, ns);
  Json widget = {{"apiVersion", widgets.ApiVersion()},
                 {"kind", widgets.kind},
                 {"metadata", {{"name", "w"}, {"namespace", ns}}},
                 {"spec", {{"size", 1}}}};
  Result<Json> created = client->Create(Collection(widgets, ns), widget);
  REQUIRE_MESSAGE(created.ok(), created.status().ToString());
  CHECK((*created)["spec"]["size"] == 1);

  // On the wire: a 200 watch whose only event is an ERROR carrying the 410 Status.
  RawResponse raw = server.Raw("GET", "/apis/" + widgets.ApiVersion() + "/namespaces/" + ns +
                                          "/widgets?watch=1&resourceVersion=1&timeoutSeconds=5");
  REQUIRE(raw.status == 200);
  Json event = Json::parse(raw.text.substr(0, raw.text.find('\n')), nullptr, false);
  REQUIRE_MESSAGE(event.is_object(), raw.text);
  CHECK(event["type"] == "ERROR");
  CHECK(event["object"]["kind"] == "Status");
  CHECK(event["object"]["status"] == "Failure");
  CHECK(event["object"]["reason"] == "Expired");
  CHECK(event["object"]["code"] == 410);
  CHECK(event["object"]["message"].get<std::string>().starts_with("too old resource version: 1 ("));

  kube::WatchOptions options;
  options.resource_version = "1";
  Result<std::unique_ptr<kube::WatchStream>> watch =
      client->Watch(Collection(widgets, ns), options);
  REQUIRE(watch.ok());
  Status end;
  CHECK(Drain(**watch, 10, &end).empty());
  CHECK(end.code() == Code::kGone);

  // From the object's own version the watch resumes normally.
  options.resource_version = Rv(*created);
  Result<std::unique_ptr<kube::WatchStream>> resumed =
      client->Watch(Collection(widgets, ns), options);
  REQUIRE(resumed.ok());
  REQUIRE(client->Delete(Object(widgets, ns, "w"), {}).ok());
  std::vector<kube::WatchEvent> events = WithoutBookmarks(Drain(**resumed, 1));
  REQUIRE(events.size() == 1);
  CHECK(events[0].type == kube::WatchEventType::kDeleted);
}

TEST_CASE("a watch from resourceVersion 0 starts with the current objects as ADDED [concurrent]") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("rv0");
  for (const char* name : {"one", "two"}) {
    REQUIRE(client->Create(Collection(resources::kConfigMaps, ns), ConfigMap(ns, name, {})).ok());
  }
  kube::WatchOptions options;
  options.resource_version = "0";
  Result<std::unique_ptr<kube::WatchStream>> watch =
      client->Watch(Collection(resources::kConfigMaps, ns), options);
  REQUIRE(watch.ok());
  std::vector<kube::WatchEvent> events = WithoutBookmarks(Drain(**watch, 2));
  REQUIRE(events.size() == 2);
  std::set<std::string> names;
  for (const kube::WatchEvent& e : events) {
    CHECK(e.type == kube::WatchEventType::kAdded);
    names.insert(e.object["metadata"]["name"].get<std::string>());
  }
  CHECK(names == std::set<std::string>{"one", "two"});
}

TEST_CASE("a list from the watch cache (resourceVersion 0) ignores limit and comes whole") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("list-cache");
  for (const char* name : {"a", "b", "c", "d", "e"}) {
    REQUIRE(client->Create(Collection(resources::kConfigMaps, ns), ConfigMap(ns, name, {})).ok());
  }
  const std::string path = "/api/v1/namespaces/" + ns + "/configmaps";
  RawResponse raw = server.Raw("GET", path + "?limit=2&resourceVersion=0");
  REQUIRE(raw.status == 200);
  const Json& body = raw.body;
  CHECK(body["items"].size() == 5);
  CHECK(body["metadata"].value("continue", "").empty());
  CHECK_FALSE(body["metadata"].value("resourceVersion", "").empty());

  // The client splits that one response into pages of `limit` as it arrives.
  kube::ListOptions options;
  options.limit = 2;
  options.resource_version = "0";
  std::vector<size_t> pages;
  options.on_page = [&](std::vector<Json>& page) { pages.push_back(page.size()); };
  Result<kube::ObjectList> list = client->List(Collection(resources::kConfigMaps, ns), options);
  REQUIRE(list.ok());
  CHECK(pages == std::vector<size_t>{2, 2, 1});
  CHECK_FALSE(list->resource_version.empty());
  options.metadata_only = true;
  options.on_page = nullptr;
  Result<kube::ObjectList> metadata = client->List(Collection(resources::kConfigMaps, ns), options);
  REQUIRE(metadata.ok());
  REQUIRE(metadata->items.size() == 5);
  CHECK(metadata->items[0]["kind"] == "PartialObjectMetadata");
}

TEST_CASE("a watch with a label selector sees only matching objects [concurrent]") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("watch-sel");
  Result<kube::ObjectList> list = client->List(Collection(resources::kConfigMaps, ns), {});
  REQUIRE(list.ok());
  kube::WatchOptions options;
  options.resource_version = list->resource_version;
  options.label_selector = "pick=yes";
  Result<std::unique_ptr<kube::WatchStream>> watch =
      client->Watch(Collection(resources::kConfigMaps, ns), options);
  REQUIRE(watch.ok());
  REQUIRE(client
              ->Create(Collection(resources::kConfigMaps, ns),
                       ConfigMap(ns, "skip", {}, {{"pick", "no"}}))
              .ok());
  REQUIRE(client
              ->Create(Collection(resources::kConfigMaps, ns),
                       ConfigMap(ns, "take", {}, {{"pick", "yes"}}))
              .ok());
  // Relabelling an object out of the selection is a DELETED for this watch.
  REQUIRE(client
              ->Patch(Object(resources::kConfigMaps, ns, "take"), kube::PatchType::kMerge,
                      R"({"metadata":{"labels":{"pick":"no"}}})")
              .ok());
  std::vector<kube::WatchEvent> events = WithoutBookmarks(Drain(**watch, 2));
  REQUIRE(events.size() == 2);
  CHECK(events[0].type == kube::WatchEventType::kAdded);
  CHECK(events[0].object["metadata"]["name"] == "take");
  CHECK(events[1].type == kube::WatchEventType::kDeleted);
  CHECK(events[1].object["metadata"]["name"] == "take");
}

}  // namespace
}  // namespace syncbus::conformance
