#include <doctest/doctest.h>

#include "common/base64.h"
#include "tests/unit/kubesim/api_test_util.h"

namespace syncbus::kubesim::testing {
namespace {

void Populate(ApiServer& s, int n) {
  for (int i = 0; i < n; ++i) {
    char name[16];
    std::snprintf(name, sizeof(name), "cm-%02d", i);
    REQUIRE(
        s.Call("POST", CmPath("default"), ConfigMap(name, "default", {{"i", std::to_string(i)}}))
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
  auto r =
      s.Call("GET", CmPath("default"), nullptr, "application/json", "limit=1&continue=" + token);
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
  auto future =
      s.Call("GET", CmPath("default"), nullptr, "application/json", "resourceVersion=999999");
  CHECK(future.status == 504);
  CHECK(Body(future)["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge");
}

// The answers below are those of kube-apiserver 1.26.4, which reads from its watch cache or
// from etcd depending on the parameters.
TEST_CASE("a future resourceVersion: 504 from the watch cache, 500 or 504 from etcd") {
  Fixture f;
  ApiServer& s = *f.server;
  Populate(s, 2);
  // The watch cache of configmaps is at its last event, whatever other types did since.
  std::string cache_rv = Page(s, "")["metadata"]["resourceVersion"];
  REQUIRE(s.Call("POST", "/api/v1/namespaces",
                 {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "n"}}}})
              .status == 201);
  std::string current = Page(s, "")["metadata"]["resourceVersion"];
  REQUIRE(current != cache_rv);
  // A list the cache serves has the cache's resourceVersion, one from etcd the latest.
  CHECK(Page(s, "resourceVersion=0")["metadata"]["resourceVersion"] == cache_rv);
  CHECK(Page(s, "resourceVersion=1")["metadata"]["resourceVersion"] == cache_rv);
  CHECK(Page(s, "resourceVersion=1&limit=5&resourceVersionMatch=NotOlderThan")["metadata"]
                                                                              ["resourceVersion"] ==
        current);

  ApiResponse cached = Get(s, "resourceVersion=999999");
  CHECK(cached.status == 504);
  CHECK(http::FindHeader(cached.headers, "Retry-After") == "1");
  Json body = Body(cached);
  CHECK(body["message"] == "Timeout: Too large resource version: 999999, current: " + cache_rv);
  CHECK(body["details"] == Json::parse(R"({"causes":[{"reason":"ResourceVersionTooLarge",
      "message":"Too large resource version"}],"retryAfterSeconds":1})"));
  ApiResponse get = s.Call("GET", CmPath("default", "cm-00"), nullptr, "application/json",
                           "resourceVersion=999999");
  CHECK(get.status == 504);
  CHECK(Body(get)["message"] == body["message"]);

  ApiResponse not_older =
      Get(s, "resourceVersion=999999&resourceVersionMatch=NotOlderThan&limit=1");
  CHECK(not_older.status == 504);
  CHECK(!http::FindHeader(not_older.headers, "Retry-After"));
  CHECK(Body(not_older)["message"] ==
        "Timeout: Too large resource version: 999999, current: " + current);
  CHECK(!Body(not_older)["details"].contains("retryAfterSeconds"));

  const Json future_revision = Json::parse(R"({"kind":"Status","apiVersion":"v1","metadata":{},
      "status":"Failure","message":"etcdserver: mvcc: required revision is a future revision",
      "code":500})");
  for (const char* query :
       {"resourceVersion=999999&resourceVersionMatch=Exact", "resourceVersion=999999&limit=1"}) {
    CAPTURE(query);
    ApiResponse exact = Get(s, query);
    CHECK(exact.status == 500);
    CHECK(Body(exact) == future_revision);
  }
}

TEST_CASE("reads held for the watch cache: MustWait while it has not reached the resourceVersion") {
  Fixture f;
  ApiServer& s = *f.server;
  Populate(s, 1);
  uint64_t next = std::stoull(std::string(Page(s, "")["metadata"]["resourceVersion"])) + 1;
  auto request = [](const std::string& path, const std::string& query) {
    ApiRequest r;
    r.method = "GET";
    r.path = path;
    r.query = query;
    return r;
  };
  const std::string at = "resourceVersion=" + std::to_string(next);
  CHECK(s.MustWait(request(CmPath("default"), at)));
  CHECK(s.MustWait(request(CmPath("default", "cm-00"), at)));
  CHECK(s.MustWait(request(CmPath("default"), at + "&resourceVersionMatch=NotOlderThan")));
  // From etcd, or not a read at a resourceVersion: answered at once.
  CHECK(!s.MustWait(request(CmPath("default"), at + "&limit=5")));
  CHECK(!s.MustWait(request(CmPath("default"), at + "&resourceVersionMatch=Exact")));
  CHECK(!s.MustWait(request(CmPath("default"), "resourceVersion=x")));
  CHECK(!s.MustWait(request(CmPath("default"), "")));
  CHECK(!s.MustWait(request(CmPath("default"), "watch=1&" + at)));
  // A write of another type does not move the configmaps' watch cache; one of theirs does.
  REQUIRE(s.Call("POST", "/api/v1/namespaces",
                 {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "n"}}}})
              .status == 201);
  CHECK(s.MustWait(request(CmPath("default"), at)));
  REQUIRE(s.Call("POST", CmPath("default"), ConfigMap("late", "default", {})).status == 201);
  CHECK(!s.MustWait(request(CmPath("default"), at)));
  CHECK(Get(s, at).status == 200);
}

TEST_CASE("a limited list at resourceVersion N is etcd's snapshot at N") {
  Fixture f;
  ApiServer& s = *f.server;
  Populate(s, 1);
  std::string first = Page(s, "")["metadata"]["resourceVersion"];
  REQUIRE(s.Call("POST", CmPath("default"), ConfigMap("late", "default", {})).status == 201);
  Json exact = Page(s, "limit=5&resourceVersion=" + first);
  CHECK(exact["metadata"]["resourceVersion"] == first);
  CHECK(exact["items"].size() == 1);
  CHECK(Page(s, "limit=5&resourceVersion=" + first + "&resourceVersionMatch=NotOlderThan")["items"]
            .size() == 2);
  CHECK(Page(s, "resourceVersion=" + first)["items"].size() == 2);
}

TEST_CASE(
    "unparsable resourceVersions and resourceVersionMatch misuse, in kube-apiserver's words") {
  Fixture f;
  ApiServer& s = *f.server;
  const std::string abc =
      R"(resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax)";
  ApiResponse cached = Get(s, "resourceVersion=abc");
  CHECK(cached.status == 500);
  CHECK(Body(cached) == Json{{"kind", "Status"},
                             {"apiVersion", "v1"},
                             {"metadata", Json::object()},
                             {"status", "Failure"},
                             {"message", abc},
                             {"code", 500}});
  ApiResponse etcd = Get(s, "resourceVersion=abc&limit=1");
  CHECK(etcd.status == 400);
  CHECK(Body(etcd)["message"] == "invalid resource version: " + abc);
  CHECK(Body(Get(s, "resourceVersion=18446744073709551616"))["message"] ==
        R"(resourceVersion: Invalid value: "18446744073709551616": strconv.ParseUint: parsing )"
        R"("18446744073709551616": value out of range)");
  CHECK(Get(s, "resourceVersion=18446744073709551615").status == 504);

  ApiResponse zero = Get(s, "resourceVersion=0&resourceVersionMatch=Exact");
  CHECK(zero.status == 422);
  CHECK(Body(zero) == Json::parse(R"({"kind":"Status","apiVersion":"v1","metadata":{},
      "status":"Failure","message":"ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
      "reason":"Invalid","details":{"group":"meta.k8s.io","kind":"ListOptions","causes":[
        {"reason":"FieldValueForbidden","message":"Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"","field":"resourceVersionMatch"}]},
      "code":422})"));
  CHECK(Body(Get(s, "resourceVersionMatch=Bogus"))["message"] ==
        "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: "
        "resourceVersionMatch is forbidden unless resourceVersion is provided, "
        "resourceVersionMatch: Unsupported value: \"Bogus\": supported values: \"Exact\", "
        "\"NotOlderThan\", \"\"]");
}

TEST_CASE("continue tokens are refused as kube-apiserver refuses them") {
  Fixture f;
  ApiServer& s = *f.server;
  Populate(s, 3);
  auto token = [](const std::string& json) {
    std::string text = StandardToUrlSafe(EncodeBase64(json));
    while (text.back() == '=') text.pop_back();
    return text;
  };
  const std::string invalid = "invalid continue token: continue key is not valid: ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"abc$", "illegal base64 data at input byte 3"},
      {"abcde", "illegal base64 data at input byte 4"},
      {"ab\ncd$", "illegal base64 data at input byte 5"},
      {"garbage", R"(invalid character '\u0081' looking for beginning of value)"},
      {token("tru"), "invalid character ' ' in literal true (expecting 'e')"},
      {token(R"({"a" 1})"), "invalid character '1' after object key"},
      {token(R"({"a":1}x)"), "invalid character 'x' after top-level value"},
      {token(R"(["\q"])"), R"(invalid character 'q' in string escape code)"},
      {token("{\"a\":\"\t\"}"), R"(invalid character '\t' in string literal)"},
      {token(R"({"a":-x})"), "invalid character 'x' in numeric literal"},
      {token(R"({"a":1.})"), "invalid character '}' after decimal point in numeric literal"},
      {token(R"({"a":1e})"), "invalid character '}' in exponent of numeric literal"},
      {token(R"({1:2})"), "invalid character '1' looking for beginning of object key string"},
      {token(R"([1 2])"), "invalid character '2' after array element"},
      {token(R"({"v":"x","rv":1,)"), "unexpected end of JSON input"},
      {token(R"([1])"), "json: cannot unmarshal array into Go value of type storage.continueToken"},
      {token(R"({"v":1,"rv":"1"})"),
       "json: cannot unmarshal number into Go struct field continueToken.v of type string"},
      {token(R"({"rv":1.5,"start":{}})"),
       "json: cannot unmarshal number 1.5 into Go struct field continueToken.rv of type int64"},
      {token(R"({"START":"x","Rv":3})"), "server does not recognize this encoded version "},
      {token(R"({"v":"meta.k8s.io/v1","rv":0,"start":"a"})"),
       "incorrect encoded start resourceVersion (version meta.k8s.io/v1)"},
      {token(R"({"v":"meta.k8s.io/v1","rv":1,"start":""})"),
       "encoded start key empty (version meta.k8s.io/v1)"},
      {token(R"({"v":"meta.k8s.io/v1","rv":1,"start":"a//b"})"), "a//b"},
  };
  for (const auto& [text, why] : cases) {
    CAPTURE(text);
    ApiResponse r = Get(s, "limit=1&continue=" + text);
    CHECK(r.status == 400);
    CHECK(Body(r)["message"] == invalid + why);
  }
  // Keys match case-insensitively; a token below resourceVersion 0 lists the latest state.
  Json latest = Page(
      s, "limit=1&continue=" + token(R"({"V":"meta.k8s.io/v1","RV":-5,"Start":"default/cm-00"})"));
  CHECK(latest["items"][0]["metadata"]["name"] == "cm-01");
  CHECK(Page(s, "limit=1&resourceVersion=0&continue=" +
                    std::string(Page(s, "limit=1")["metadata"]["continue"]))["items"]
            .size() == 1);
  ApiResponse future =
      Get(s, "limit=1&continue=" + token(R"({"v":"meta.k8s.io/v1","rv":999,"start":"a"})"));
  CHECK(future.status == 500);
  CHECK(Body(future)["message"] == "etcdserver: mvcc: required revision is a future revision");
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
    REQUIRE(
        s.Call("POST", std::string("/apis/hive.openshift.io/v1/namespaces/") + ns + "/syncsets", ss)
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
