#include <doctest/doctest.h>

#include "common/base64.h"
#include "tests/unit/kubesim/api_test_util.h"

namespace syncbus::kubesim::testing {
namespace {

void Populate(ApiServer& s, int n) {
  for (int i = 0; i < n; ++i) {
    char name[16];
    std::snprintf(name, sizeof(name), "cm-%02d", i);
    REQUIRE(s.Call("POST", CmPath("default"), ConfigMap(name, "default", {{"i", std::to_string(i)}}))
                .status == 201);
  }
}

Json Page(ApiServer& s, const std::string& query) {
  auto r = s.Call("GET", CmPath("default"), nullptr, "application/json", query);
  REQUIRE(r.status == 200);
  return Body(r);
}

TEST_CASE("list shape: kind, resourceVersion, items without type metadata for built-ins") {
  Fixture f;
  Populate(*f.server, 2);
  Json list = Page(*f.server, "");
  CHECK(list["kind"] == "ConfigMapList");
  CHECK(list["apiVersion"] == "v1");
  CHECK(list["metadata"]["resourceVersion"].is_string());
  CHECK(!list["metadata"].contains("continue"));
  REQUIRE(list["items"].size() == 2);
  CHECK(!list["items"][0].contains("kind"));
  CHECK(list["items"][0]["metadata"]["name"] == "cm-00");
}

TEST_CASE("paging with limit and continue is a consistent snapshot despite writes between pages") {
  Fixture f;
  ApiServer& s = *f.server;
  Populate(s, 5);
  Json first = Page(s, "limit=2");
  REQUIRE(first["items"].size() == 2);
  std::string token = first["metadata"]["continue"];
  CHECK(first["metadata"]["remainingItemCount"] == 3);
  std::string list_rv = first["metadata"]["resourceVersion"];

  // Writes between pages: delete an unseen item, add a new one, modify another.
  REQUIRE(s.Call("DELETE", CmPath("default", "cm-03")).status == 200);
  REQUIRE(s.Call("POST", CmPath("default"), ConfigMap("cm-99", "default", {})).status == 201);
  Json changed = Body(s.Call("GET", CmPath("default", "cm-04")));
  changed["data"]["i"] = "changed";
  REQUIRE(s.Call("PUT", CmPath("default", "cm-04"), changed).status == 200);

  Json second = Page(s, "limit=2&continue=" + token);
  REQUIRE(second["items"].size() == 2);
  CHECK(second["items"][0]["metadata"]["name"] == "cm-02");
  CHECK(second["items"][1]["metadata"]["name"] == "cm-03");
  CHECK(second["metadata"]["resourceVersion"] == list_rv);
  Json third = Page(s, "limit=2&continue=" + std::string(second["metadata"]["continue"]));
  REQUIRE(third["items"].size() == 1);
  CHECK(third["items"][0]["metadata"]["name"] == "cm-04");
  CHECK(third["items"][0]["data"]["i"] == "4");
  CHECK(!third["metadata"].contains("continue"));

  Json fresh = Page(s, "");
  CHECK(fresh["items"].size() == 5);
}

TEST_CASE("a continue token older than the history is 410 Expired") {
  Fixture f;
  ApiServer& s = *f.server;
  Populate(s, 3);
  Json first = Page(s, "limit=1");
  std::string token = first["metadata"]["continue"];
  REQUIRE(s.Call("POST", CmPath("default"), ConfigMap("late", "default", {})).status == 201);
  s.ExpireHistory();
  auto r = s.Call("GET", CmPath("default"), nullptr, "application/json",
                  "limit=1&continue=" + token);
  CHECK(r.status == 410);
  Json status = Body(r);
  CHECK(status["reason"] == "Expired");
  CHECK(status["message"].get<std::string>().rfind(
            "The provided continue parameter is too old to display a consistent list result.", 0) ==
        0);
  CHECK(status["metadata"].contains("continue"));
  CHECK(s.Call("GET", CmPath("default"), nullptr, "application/json", "continue=garbage!").status ==
        400);
}

std::string UrlSafeToStandard(std::string text) {
  for (char& c : text) c = c == '-' ? '+' : c == '_' ? '/' : c;
  return text;
}

std::string StandardToUrlSafe(std::string text) {
  for (char& c : text) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return text;
}

ApiResponse Get(ApiServer& s, const std::string& query) {
  return s.Call("GET", CmPath("default"), nullptr, "application/json", query);
}

TEST_CASE("lists at an older resourceVersion reach back to etcd's last compaction") {
  Fixture f(false, 3);  // a watch window of 3 events, which lists do not depend on
  ApiServer& s = *f.server;
  Populate(s, 2);
  Json first = Page(s, "limit=1");
  std::string old_rv = first["metadata"]["resourceVersion"];
  std::string token = first["metadata"]["continue"];
  for (int i = 0; i < 5; ++i) {
    REQUIRE(s.Call("POST", CmPath("default"), ConfigMap("late-" + std::to_string(i), "default", {}))
                .status == 201);
  }
  auto watch = std::make_shared<RecordingSink>();
  s.StartWatch(WatchRequest(CmPath("default"), "resourceVersion=" + old_rv), watch);
  REQUIRE(watch->Events().size() == 1);
  CHECK(watch->Events()[0]["object"]["code"] == 410);
  std::string exact_old = "resourceVersion=" + old_rv + "&resourceVersionMatch=Exact";
  CHECK(Page(s, exact_old)["items"].size() == 2);
  CHECK(Page(s, "limit=1&continue=" + token)["items"][0]["metadata"]["name"] == "cm-01");

  // kube-apiserver compacts etcd every 5 minutes, to the revision it noted the round before.
  f.clock.Advance(std::chrono::minutes(5));
  CHECK(Page(s, exact_old)["items"].size() == 2);
  std::string noted = Page(s, "")["metadata"]["resourceVersion"];
  REQUIRE(s.Call("POST", CmPath("default"), ConfigMap("next", "default", {})).status == 201);
  f.clock.Advance(std::chrono::minutes(5));
  CHECK(Page(s, "resourceVersion=" + noted + "&resourceVersionMatch=Exact")["items"].size() == 7);

  // The answers measured on kube-apiserver 1.26.4.
  ApiResponse exact = Get(s, exact_old);
  CHECK(exact.status == 410);
  CHECK(Body(exact) == Json::parse(R"({"kind":"Status","apiVersion":"v1","metadata":{},
      "status":"Failure","message":"The resourceVersion for the provided list is too old.",
      "reason":"Expired","code":410})"));
  ApiResponse continued = Get(s, "limit=1&continue=" + token);
  CHECK(continued.status == 410);
  Json status = Body(continued);
  std::string fresh = status["metadata"]["continue"];
  status["metadata"].erase("continue");
  CHECK(status == Json::parse(R"({"kind":"Status","apiVersion":"v1","metadata":{},
      "status":"Failure","message":"The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
      "reason":"Expired","code":410})"));
  // The fresh token continues after the same object, at the latest state; like every token, it
  // is URL-safe base64 without padding, of resourceVersion -1.
  Json rest = Page(s, "limit=10&continue=" + fresh);
  CHECK(rest["items"].size() == 7);
  CHECK(rest["items"][0]["metadata"]["name"] == "cm-01");
  CHECK(fresh.find_first_of("+/=") == std::string::npos);
  std::optional<std::string> decoded = DecodeBase64(UrlSafeToStandard(fresh));
  REQUIRE(decoded);
  CHECK(Json::parse(*decoded)["rv"] == -1);
  // A token of resourceVersion 0 is invalid, as in kube-apiserver.
  std::string zero = EncodeBase64(R"({"v":"meta.k8s.io/v1","rv":0,"start":"default/cm-00"})");
  while (zero.back() == '=') zero.pop_back();
  ApiResponse bad = Get(s, "continue=" + StandardToUrlSafe(zero));
  CHECK(bad.status == 400);
  CHECK(Body(bad)["message"] ==
        "invalid continue token: continue key is not valid: incorrect encoded start "
        "resourceVersion (version meta.k8s.io/v1)");
}

TEST_CASE("resourceVersion=0 ignores limit, a future resourceVersion is a 504") {
  Fixture f;
  ApiServer& s = *f.server;
  Populate(s, 3);
  CHECK(Page(s, "limit=1&resourceVersion=0")["items"].size() == 3);
  auto future = s.Call("GET", CmPath("default"), nullptr, "application/json",
                       "resourceVersion=999999");
  CHECK(future.status == 504);
  CHECK(Body(future)["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge");
}

TEST_CASE("custom resource lists carry kind and apiVersion on items and span namespaces") {
  Fixture f(true);
  ApiServer& s = *f.server;
  for (const char* ns : {"a", "b"}) {
    REQUIRE(s.Call("POST", "/api/v1/namespaces",
                   {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}})
                .status == 201);
    Json ss = {{"apiVersion", "hive.openshift.io/v1"},
               {"kind", "SyncSet"},
               {"metadata", {{"name", "s"}, {"namespace", ns}}},
               {"spec", {{"clusterDeploymentRefs", Json::array()}}}};
    REQUIRE(s.Call("POST", std::string("/apis/hive.openshift.io/v1/namespaces/") + ns + "/syncsets",
                   ss)
                .status == 201);
  }
  Json list = Body(s.Call("GET", "/apis/hive.openshift.io/v1/syncsets"));
  CHECK(list["kind"] == "SyncSetList");
  REQUIRE(list["items"].size() == 2);
  CHECK(list["items"][0]["kind"] == "SyncSet");
  CHECK(list["items"][1]["metadata"]["namespace"] == "b");
}

}  // namespace
}  // namespace syncbus::kubesim::testing
