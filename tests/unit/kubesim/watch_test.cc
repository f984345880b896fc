#include <doctest/doctest.h>

#include "tests/unit/kubesim/api_test_util.h"

namespace syncbus::kubesim::testing {
namespace {

uint64_t Watch(ApiServer& s, const std::shared_ptr<RecordingSink>& sink, const std::string& path,
               const std::string& query) {
  auto started = s.StartWatch(WatchRequest(path, query), sink);
  REQUIRE(std::holds_alternative<uint64_t>(started));
  return std::get<uint64_t>(started);
}

std::vector<std::string> Types(const std::vector<Json>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e["type"]);
  return out;
}

Json Put(ApiServer& s, Json obj) {
  auto r = s.Call("PUT", CmPath(obj["metadata"]["namespace"], obj["metadata"]["name"]), obj);
  REQUIRE(r.status == 200);
  return Body(r);
}

TEST_CASE("watch without a resourceVersion lists current objects as ADDED, then live events") {
  Fixture f;
  ApiServer& s = *f.server;
  Json a = Body(s.Call("POST", CmPath("default"), ConfigMap("a", "default", {{"k", "1"}})));
  auto sink = std::make_shared<RecordingSink>();
  Watch(s, sink, CmPath("default"), "");
  auto events = sink->Events();
  REQUIRE(events.size() == 1);
  CHECK(events[0]["type"] == "ADDED");
  CHECK(events[0]["object"] == a);
  CHECK(events[0]["object"]["kind"] == "ConfigMap");

  a["data"]["k"] = "2";
  Json modified = Put(s, a);
  Put(s, modified);  // no-op: no event
  REQUIRE(s.Call("DELETE", CmPath("default", "a")).status == 200);
  events = sink->Events();
  CHECK(Types(events) == std::vector<std::string>{"ADDED", "MODIFIED", "DELETED"});
  CHECK(events[1]["object"] == modified);
  CHECK(events[2]["object"]["data"]["k"] == "2");
  CHECK(std::stoull(Rv(events[2]["object"])) > std::stoull(Rv(modified)));
  CHECK(sink->Lines()[0].back() == '\n');
  CHECK(s.stats().open_watches == 1);
}

TEST_CASE("watch from a resourceVersion replays the events after it") {
  Fixture f;
  ApiServer& s = *f.server;
  s.Call("POST", CmPath("default"), ConfigMap("a", "default", {}));
  Json list = Body(s.Call("GET", CmPath("default")));
  std::string rv = list["metadata"]["resourceVersion"];
  s.Call("POST", CmPath("default"), ConfigMap("b", "default", {}));
  s.Call("POST", CmPath("kube-system"), ConfigMap("other", "kube-system", {}));
  s.Call("DELETE", CmPath("default", "a"));
  auto sink = std::make_shared<RecordingSink>();
  Watch(s, sink, CmPath("default"), "resourceVersion=" + rv);
  auto events = sink->Events();
  CHECK(Types(events) == std::vector<std::string>{"ADDED", "DELETED"});
  CHECK(events[0]["object"]["metadata"]["name"] == "b");
  auto all = std::make_shared<RecordingSink>();
  Watch(s, all, "/api/v1/configmaps", "resourceVersion=" + rv);
  CHECK(all->Events().size() == 3);
}

TEST_CASE("a resourceVersion older than the history gets an ERROR event with 410 Expired") {
  Fixture f;
  ApiServer& s = *f.server;
  Json a = Body(s.Call("POST", CmPath("default"), ConfigMap("a", "default", {})));
  std::string rv = Rv(a);
  auto open = std::make_shared<RecordingSink>();
  Watch(s, open, CmPath("default"), "resourceVersion=" + rv);
  s.ExpireHistory();
  auto events = open->Events();
  REQUIRE(events.size() == 1);
  CHECK(events[0]["type"] == "ERROR");
  CHECK(events[0]["object"]["code"] == 410);
  CHECK(open->ended());

  auto late = std::make_shared<RecordingSink>();
  Watch(s, late, CmPath("default"), "resourceVersion=" + rv);
  events = late->Events();
  REQUIRE(events.size() == 1);
  Json status = events[0]["object"];
  CHECK(status["kind"] == "Status");
  CHECK(status["reason"] == "Expired");
  CHECK(status["code"] == 410);
  CHECK(status["message"].get<std::string>().rfind("too old resource version: " + rv + " (", 0) ==
        0);
  CHECK(late->ended());
  CHECK(s.stats().open_watches == 0);

  // A fresh list's resourceVersion can be watched again.
  std::string fresh = Body(s.Call("GET", CmPath("default")))["metadata"]["resourceVersion"];
  auto again = std::make_shared<RecordingSink>();
  Watch(s, again, CmPath("default"), "resourceVersion=" + fresh);
  s.Call("DELETE", CmPath("default", "a"));
  CHECK(Types(again->Events()) == std::vector<std::string>{"DELETED"});
}

TEST_CASE("a small history expires old resourceVersions") {
  Fixture f(false, 3);
  ApiServer& s = *f.server;
  std::string rv = Rv(Body(s.Call("POST", CmPath("default"), ConfigMap("a", "default", {}))));
  for (int i = 0; i < 5; ++i) {
    s.Call("POST", CmPath("default"), ConfigMap("x" + std::to_string(i), "default", {}));
  }
  auto sink = std::make_shared<RecordingSink>();
  Watch(s, sink, CmPath("default"), "resourceVersion=" + rv);
  REQUIRE(sink->Events().size() == 1);
  CHECK(sink->Events()[0]["type"] == "ERROR");
}

// `n` updates of ConfigMap `obj`, each a change (its data names the version it replaces); the
// last state.
Json Update(ApiServer& s, Json obj, int n) {
  for (int i = 0; i < n; ++i) {
    obj["data"] = {{"after", Rv(obj)}};
    obj = Put(s, obj);
  }
  return obj;
}

uint64_t RvOf(const Json& obj) {
  return std::stoull(Rv(obj));
}

// kube-apiserver's answer to a watch from before its window, as measured on 1.26.4.
Json TooOld(uint64_t rv, uint64_t floor) {
  return Json::parse(
      R"j({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},)j"
      R"j("status":"Failure","message":"too old resource version: )j" +
      std::to_string(rv) + " (" + std::to_string(floor) +
      R"j()","reason":"Expired","code":410}})j");
}

TEST_CASE("by default a watch resumes from anywhere in a burst, however long") {
  Fixture f;
  ApiServer& s = *f.server;
  Json cm = Body(s.Call("POST", CmPath("default"), ConfigMap("a", "default", {})));
  Json first = Update(s, cm, 1);
  Json last = Update(s, first, 1999);
  // Another type's events do not crowd ConfigMaps out.
  for (int i = 0; i < 150; ++i) {
    REQUIRE(s.Call("POST", "/api/v1/namespaces",
                   {{"apiVersion", "v1"},
                    {"kind", "Namespace"},
                    {"metadata", {{"name", "ns-" + std::to_string(i)}}}})
                .status == 201);
  }
  auto sink = std::make_shared<RecordingSink>();
  Watch(s, sink, CmPath("default"), "resourceVersion=" + Rv(first));
  auto events = sink->Events();
  REQUIRE(events.size() == 1999);
  CHECK(events.front()["type"] == "MODIFIED");
  CHECK(RvOf(events.front()["object"]) == RvOf(first) + 1);
  CHECK(events.back()["object"] == last);
}

TEST_CASE("a watch from before its type's window gets kube-apiserver's 410 ERROR event") {
  Fixture f;
  ApiServer& s = *f.server;
  Json created = Body(s.Call("POST", CmPath("default"), ConfigMap("a", "default", {})));
  Json quiet = Update(s, created, 1);
  // 80 s later, a burst: the window keeps its 100 events, dropping the older ones, and only then
  // grows for the fresh burst.
  f.clock.Advance(std::chrono::seconds(80));
  REQUIRE(s.Call("POST", "/api/v1/namespaces",
                 {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "other"}}}})
              .status == 201);
  Json burst_first = Update(s, quiet, 1);
  Update(s, burst_first, 149);
  uint64_t floor = RvOf(burst_first) - 1;
  REQUIRE(floor > RvOf(quiet));

  for (uint64_t from : {RvOf(created), RvOf(quiet)}) {
    CAPTURE(from);
    auto sink = std::make_shared<RecordingSink>();
    Watch(s, sink, CmPath("default"), "resourceVersion=" + std::to_string(from));
    auto events = sink->Events();
    REQUIRE(events.size() == 1);
    CHECK(events[0] == TooOld(from, floor));
    CHECK(sink->ended());
  }
  auto resumed = std::make_shared<RecordingSink>();
  Watch(s, resumed, CmPath("default"), "resourceVersion=" + std::to_string(floor));
  auto events = resumed->Events();
  REQUIRE(events.size() == 150);
  CHECK(RvOf(events.front()["object"]) == RvOf(burst_first));
  CHECK(!resumed->ended());
}

TEST_CASE("resourceVersion=1 on a busy type gets 410, resourceVersion=0 lists the current state") {
  Fixture f;
  ApiServer& s = *f.server;
  Json cm = Body(s.Call("POST", CmPath("default"), ConfigMap("a", "default", {})));
  f.clock.Advance(std::chrono::seconds(80));
  cm = Update(s, cm, 100);
  auto sink = std::make_shared<RecordingSink>();
  Watch(s, sink, CmPath("default"), "resourceVersion=1");
  REQUIRE(sink->Events().size() == 1);
  CHECK(sink->Events()[0] == TooOld(1, RvOf(cm) - 100));

  // A quiet type still resumes from 1.
  auto quiet = std::make_shared<RecordingSink>();
  Watch(s, quiet, "/api/v1/namespaces", "resourceVersion=1");
  CHECK(Types(quiet->Events()) == std::vector<std::string>{"ADDED", "ADDED", "ADDED"});

  for (const char* query : {"resourceVersion=0", ""}) {
    auto current = std::make_shared<RecordingSink>();
    Watch(s, current, CmPath("default"), query);
    REQUIRE(current->Events().size() == 1);
    CHECK(current->Events()[0]["type"] == "ADDED");
    CHECK(current->Events()[0]["object"] == cm);
  }
}

TEST_CASE("a window grown for a burst halves once its newest quarter is older than 75 s") {
  Fixture f;
  ApiServer& s = *f.server;
  // 400 events fill a window grown 100 -> 200 -> 400.
  Json cm = Body(s.Call("POST", CmPath("default"), ConfigMap("a", "default", {})));
  uint64_t first = RvOf(cm);
  cm = Update(s, cm, 399);
  auto replay = std::make_shared<RecordingSink>();
  Watch(s, replay, CmPath("default"), "resourceVersion=" + std::to_string(first - 1));
  CHECK(replay->Events().size() == 400);

  f.clock.Advance(std::chrono::seconds(76));
  Update(s, cm, 1);
  // The window keeps the newest 200: the last 199 of the burst and the new event.
  uint64_t floor = first + 200;
  auto old = std::make_shared<RecordingSink>();
  Watch(s, old, CmPath("default"), "resourceVersion=" + std::to_string(floor - 1));
  REQUIRE(old->Events().size() == 1);
  CHECK(old->Events()[0] == TooOld(floor - 1, floor));
  auto kept = std::make_shared<RecordingSink>();
  Watch(s, kept, CmPath("default"), "resourceVersion=" + std::to_string(floor));
  CHECK(kept->Events().size() == 200);
}

TEST_CASE(
    "a watch from a future resourceVersion waits silently for it, then streams what follows") {
  Fixture f;
  ApiServer& s = *f.server;
  uint64_t current = RvOf(Body(s.Call("POST", CmPath("default"), ConfigMap("a", "default", {}))));
  auto sink = std::make_shared<RecordingSink>();
  Watch(s, sink, CmPath("default"),
        "allowWatchBookmarks=true&resourceVersion=" + std::to_string(current + 2));
  s.Call("POST", CmPath("default"), ConfigMap("b", "default", {}));
  s.SendBookmarks();
  s.Call("POST", CmPath("default"), ConfigMap("c", "default", {}));
  CHECK(sink->Events().empty());  // neither the events up to it nor bookmarks before it
  CHECK(!sink->ended());
  s.Call("POST", CmPath("default"), ConfigMap("d", "default", {}));
  s.SendBookmarks();
  auto events = sink->Events();
  REQUIRE(events.size() == 2);
  CHECK(events[0]["type"] == "ADDED");
  CHECK(events[0]["object"]["metadata"]["name"] == "d");
  CHECK(events[1]["type"] == "BOOKMARK");
  CHECK(RvOf(events[1]["object"]) == current + 3);
}

TEST_CASE("label-filtered watches see objects enter and leave the selection") {
  Fixture f;
  ApiServer& s = *f.server;
  Json a = Body(s.Call("POST", CmPath("default"), ConfigMap("a", "default", {}, {{"app", "x"}})));
  auto sink = std::make_shared<RecordingSink>();
  Watch(s, sink, CmPath("default"), "labelSelector=app%3Dx");
  a["metadata"]["labels"]["app"] = "y";
  Json left = Put(s, a);
  left["data"] = {{"k", "v"}};
  left = Put(s, left);  // not selected: no event
  left["metadata"]["labels"]["app"] = "x";
  Json back = Put(s, left);
  auto events = sink->Events();
  CHECK(Types(events) == std::vector<std::string>{"ADDED", "DELETED", "ADDED"});
  CHECK(events[1]["object"]["metadata"]["labels"]["app"] == "x");
  CHECK(std::stoull(Rv(events[1]["object"])) > std::stoull(Rv(events[0]["object"])));
  CHECK(events[2]["object"] == back);
}

TEST_CASE("bookmarks, timeouts, CloseAllWatches, StopWatch and gone clients") {
  Fixture f;
  ApiServer& s = *f.server;
  auto with = std::make_shared<RecordingSink>();
  auto without = std::make_shared<RecordingSink>();
  Watch(s, with, CmPath("default"), "allowWatchBookmarks=true&timeoutSeconds=60");
  uint64_t stopped = Watch(s, without, CmPath("default"), "");
  s.Call("POST", CmPath("default"), ConfigMap("a", "default", {}));
  s.SendBookmarks();
  auto events = with->Events();
  REQUIRE(events.size() == 2);
  CHECK(events[1]["type"] == "BOOKMARK");
  std::string current = Body(s.Call("GET", CmPath("default")))["metadata"]["resourceVersion"];
  CHECK(events[1]["object"] == Json{{"kind", "ConfigMap"},
                                    {"apiVersion", "v1"},
                                    {"metadata", {{"resourceVersion", current}}}});
  CHECK(without->Events().size() == 1);

  s.StopWatch(stopped);
  s.Call("POST", CmPath("default"), ConfigMap("b", "default", {}));
  CHECK(without->Events().size() == 1);
  CHECK(!without->ended());

  f.clock.Advance(std::chrono::seconds(61));
  s.SendBookmarks();
  CHECK(with->ended());
  CHECK(s.stats().open_watches == 0);

  auto closing = std::make_shared<RecordingSink>();
  Watch(s, closing, CmPath("default"), "");
  s.CloseAllWatches();
  CHECK(closing->ended());

  auto gone = std::make_shared<RecordingSink>();
  Watch(s, gone, CmPath("default"), "");
  gone->set_alive(false);
  s.Call("POST", CmPath("default"), ConfigMap("c", "default", {}));
  CHECK(s.stats().open_watches == 0);
}

TEST_CASE("watching one object by name, and errors that refuse a watch") {
  Fixture f;
  ApiServer& s = *f.server;
  s.Call("POST", CmPath("default"), ConfigMap("a", "default", {}));
  s.Call("POST", CmPath("default"), ConfigMap("b", "default", {}));
  auto sink = std::make_shared<RecordingSink>();
  Watch(s, sink, CmPath("default", "a"), "");
  REQUIRE(sink->Events().size() == 1);
  CHECK(sink->Events()[0]["object"]["metadata"]["name"] == "a");
  auto bad = s.StartWatch(WatchRequest(CmPath("default"), "labelSelector=a+in+b"), sink);
  REQUIRE(std::holds_alternative<ApiResponse>(bad));
  CHECK(std::get<ApiResponse>(bad).status == 400);
  auto unknown = s.StartWatch(WatchRequest("/apis/nope/v1/things", ""), sink);
  REQUIRE(std::holds_alternative<ApiResponse>(unknown));
  CHECK(std::get<ApiResponse>(unknown).status == 404);
  // As kube-apiserver 1.26.4: an unparsable resourceVersion is its storage layer's 500, and
  // resourceVersionMatch is a 422 on a watch.
  auto unparsable = s.StartWatch(WatchRequest(CmPath("default"), "resourceVersion=x1"), sink);
  REQUIRE(std::holds_alternative<ApiResponse>(unparsable));
  CHECK(std::get<ApiResponse>(unparsable).status == 500);
  CHECK(Body(std::get<ApiResponse>(unparsable))["message"] ==
        R"(resourceVersion: Invalid value: "x1": strconv.ParseUint: parsing "x1": invalid syntax)");
  auto matched = s.StartWatch(
      WatchRequest(CmPath("default"), "resourceVersion=1&resourceVersionMatch=NotOlderThan"), sink);
  REQUIRE(std::holds_alternative<ApiResponse>(matched));
  CHECK(std::get<ApiResponse>(matched).status == 422);
  CHECK(sink->Events().size() == 1);
  CHECK(ApiServer::IsWatch(WatchRequest(CmPath("default"), "")));
  ApiRequest not_watch = WatchRequest(CmPath("default"), "");
  not_watch.query = "watch=false";
  CHECK(!ApiServer::IsWatch(not_watch));
}

// A client that writes from inside its event callback must neither deadlock nor see events out
// of order.
class ReentrantSink : public RecordingSink {
 public:
  explicit ReentrantSink(ApiServer* s) : server_(s) {}
  bool Send(std::string line) override {
    Json event = Json::parse(line);
    if (event["type"] == "ADDED" && event["object"]["metadata"]["name"] == "trigger") {
      server_->Call("POST", CmPath("default"), ConfigMap("echo", "default", {}));
    }
    return RecordingSink::Send(std::move(line));
  }

 private:
  ApiServer* server_;
};

TEST_CASE("writes from inside Send are delivered in order") {
  Fixture f;
  ApiServer& s = *f.server;
  auto sink = std::make_shared<ReentrantSink>(&s);
  Watch(s, sink, CmPath("default"), "");
  s.Call("POST", CmPath("default"), ConfigMap("trigger", "default", {}));
  auto events = sink->Events();
  REQUIRE(events.size() == 2);
  CHECK(events[0]["object"]["metadata"]["name"] == "trigger");
  CHECK(events[1]["object"]["metadata"]["name"] == "echo");
}

}  // namespace
}  // namespace syncbus::kubesim::testing
