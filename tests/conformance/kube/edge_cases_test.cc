// Conformance: the edges of reads by resourceVersion (future and unparsable versions, which reads
// kube-apiserver serves from its watch cache and which from etcd, resourceVersionMatch rules),
// bad continue tokens, and the headers on every answer.
#include <chrono>
#include <future>
#include <memory>
#include <regex>
#include <set>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "common/base64.h"
#include "common/kube/client_impl.h"
#include "tests/conformance/kube/conformance_util.h"

namespace syncbus::conformance {
namespace {

using kube::Collection;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
namespace resources = kube::resources;

// The resourceVersion of a list of `path` (from etcd: the server's latest).
uint64_t CurrentRv(ServerUnderTest& server, const std::string& path) {
  RawResponse list = server.Raw("GET", path);
  REQUIRE(list.status == 200);
  return RvNumber(list.body["metadata"]["resourceVersion"].get<std::string>());
}

double SecondsSince(steady_clock::time_point start) {
  return std::chrono::duration<double>(steady_clock::now() - start).count();
}

// A failure kube-apiserver passes on without classifying it: 500, a message, no reason.
void CheckUnclassified(const RawResponse& response, const std::string& message) {
  CheckStatusBody(response, 500, "");
  CHECK(response.body.value("message", "") == message);
  CHECK_FALSE(response.body.contains("reason"));
  CHECK_FALSE(response.body.contains("details"));
}

// 504 "Timeout: Too large resource version: <requested>, current: N"; returns N.
uint64_t CheckTooLarge(const RawResponse& response, uint64_t requested, int retry_after_seconds) {
  CheckStatusBody(response, 504, "Timeout");
  const std::string prefix =
      "Timeout: Too large resource version: " + std::to_string(requested) + ", current: ";
  const std::string message = response.body.value("message", "");
  REQUIRE_MESSAGE(message.starts_with(prefix), message);
  const Json& details = response.body["details"];
  CHECK(details["causes"] == Json::parse(R"([{"reason":"ResourceVersionTooLarge",
                                             "message":"Too large resource version"}])"));
  if (retry_after_seconds > 0) {
    CHECK(details.value("retryAfterSeconds", 0) == retry_after_seconds);
    CHECK(response.Header("Retry-After") == std::to_string(retry_after_seconds));
  } else {
    CHECK_FALSE(details.contains("retryAfterSeconds"));
    CHECK(response.Header("Retry-After").empty());
  }
  return RvNumber(message.substr(prefix.size()));
}

// A 422 on ListOptions whose only field is resourceVersionMatch; `errors` are the causes'
// messages, as (reason, message) pairs.
void CheckListOptionsInvalid(const RawResponse& response,
                             const std::vector<std::pair<std::string, std::string>>& errors) {
  CheckStatusBody(response, 422, "Invalid");
  std::vector<std::string> texts;
  Json causes = Json::array();
  for (const auto& [reason, message] : errors) {
    texts.push_back("resourceVersionMatch: " + message);
    causes.push_back({{"reason", reason}, {"message", message}, {"field", "resourceVersionMatch"}});
  }
  std::string joined = texts.front();
  if (texts.size() > 1) {
    joined = "[" + texts.front();
    for (size_t i = 1; i < texts.size(); ++i) joined += ", " + texts[i];
    joined += "]";
  }
  CHECK(response.body.value("message", "") == "ListOptions.meta.k8s.io \"\" is invalid: " + joined);
  CHECK(response.body["details"] ==
        Json{{"group", "meta.k8s.io"}, {"kind", "ListOptions"}, {"causes", causes}});
}

// kube-apiserver's continue token for `token`: URL-safe base64 without padding.
std::string ContinueToken(const std::string& token) {
  std::string text = EncodeBase64(token);
  while (!text.empty() && text.back() == '=') text.pop_back();
  for (char& c : text) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return text;
}

TEST_CASE("a watch from a future resourceVersion waits silently, then sends what follows it") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("future-watch");
  const uint64_t current = CurrentRv(server, ConfigMapsPath(ns));

  // Far ahead: a 200 stream without a single event, ended cleanly at timeoutSeconds.
  auto start = steady_clock::now();
  RawResponse silent = server.Raw(
      "GET", ConfigMapsPath(ns) +
                 "?watch=1&timeoutSeconds=2&resourceVersion=" + std::to_string(current + 1000000));
  CHECK(silent.status == 200);
  CHECK(silent.Header("Content-Type") == "application/json");
  CHECK_MESSAGE(silent.text.empty(), silent.text);
  CHECK(SecondsSince(start) >= 1.5);

  // A little ahead: the events after that resourceVersion arrive once writes pass it.
  const uint64_t future = current + 3;
  kube::WatchOptions options;
  options.resource_version = std::to_string(future);
  options.allow_bookmarks = false;
  Result<std::unique_ptr<kube::WatchStream>> watch =
      client->Watch(Collection(resources::kConfigMaps, ns), options);
  REQUIRE_MESSAGE(watch.ok(), watch.status().ToString());
  std::vector<std::string> expected;  // names of the writes past `future`
  for (int i = 0; expected.size() < 2 && i < 20; ++i) {
    const std::string name = "cm-" + std::to_string(i);
    Result<Json> created =
        client->Create(Collection(resources::kConfigMaps, ns), ConfigMap(ns, name, {}));
    REQUIRE(created.ok());
    if (RvNumber(Rv(*created)) > future) expected.push_back(name);
  }
  REQUIRE(expected.size() == 2);
  std::vector<std::string> seen;
  auto until = steady_clock::now() + std::chrono::seconds(10);
  while (seen.size() < expected.size() && steady_clock::now() < until) {
    Result<std::optional<kube::WatchEvent>> next = (*watch)->Next(milliseconds(200));
    REQUIRE_MESSAGE(next.ok(), next.status().ToString());
    if (!next->has_value()) continue;
    CHECK((*next)->type == kube::WatchEventType::kAdded);
    seen.push_back((*next)->object["metadata"]["name"].get<std::string>());
  }
  CHECK(seen == expected);
}

TEST_CASE("a list from a future resourceVersion: 500 from etcd, 504 from the watch cache") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  const std::string ns = server.NewNamespace("future-list");
  const std::string path = ConfigMapsPath(ns);
  const uint64_t current = CurrentRv(server, path);
  const uint64_t future = current + 1000000;
  const std::string at = "?resourceVersion=" + std::to_string(future);

  // Read by etcd at exactly that revision: Exact, or a limited list.
  const std::string kFuture = "etcdserver: mvcc: required revision is a future revision";
  CheckUnclassified(server.Raw("GET", path + at + "&resourceVersionMatch=Exact"), kFuture);
  CheckUnclassified(server.Raw("GET", path + at + "&limit=5"), kFuture);
  // Read by etcd at its latest revision, then found too old: 504 at once, no retry advice.
  uint64_t latest = CheckTooLarge(
      server.Raw("GET", path + at + "&resourceVersionMatch=NotOlderThan&limit=5"), future, 0);
  CHECK(latest >= current);
  CHECK(latest < future);

  // Served from the watch cache, which is waited for (3 s) before the 504; a get as a list.
  auto start = steady_clock::now();
  std::future<RawResponse> get =
      std::async(std::launch::async, [&] { return server.Raw("GET", path + "/absent" + at); });
  RawResponse list = server.Raw("GET", path + at);
  RawResponse got = get.get();
  CHECK(SecondsSince(start) >= 2.5);
  uint64_t cache_rv = CheckTooLarge(list, future, 1);
  // The type's cache is never ahead of etcd (it may lag: it moves with that type's events; and
  // other tests may write meanwhile, so compare with a read made after the answer).
  CHECK(cache_rv <= CurrentRv(server, path));
  CheckTooLarge(got, future, 1);
}

TEST_CASE("a list from the watch cache waits for a resourceVersion it has not reached yet") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("wait-list");
  const uint64_t next = CurrentRv(server, ConfigMapsPath(ns)) + 1;
  auto start = steady_clock::now();
  std::future<RawResponse> list = std::async(std::launch::async, [&] {
    return server.Raw("GET", ConfigMapsPath(ns) + "?resourceVersion=" + std::to_string(next));
  });
  std::this_thread::sleep_for(milliseconds(500));
  REQUIRE(client->Create(Collection(resources::kConfigMaps, ns), ConfigMap(ns, "late", {})).ok());
  RawResponse answer = list.get();
  INFO("body: " << answer.text);
  REQUIRE(answer.status == 200);
  CHECK(SecondsSince(start) < 2.9);
  CHECK(RvNumber(answer.body["metadata"]["resourceVersion"].get<std::string>()) >= next);
}

TEST_CASE(
    "a limited list at resourceVersion N reads exactly N, and NotOlderThan reads the latest") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("exact-read");
  Result<Json> first =
      client->Create(Collection(resources::kConfigMaps, ns), ConfigMap(ns, "first", {}));
  REQUIRE(first.ok());
  REQUIRE(client->Create(Collection(resources::kConfigMaps, ns), ConfigMap(ns, "second", {})).ok());

  RawResponse exact =
      server.Raw("GET", ConfigMapsPath(ns) + "?limit=10&resourceVersion=" + Rv(*first));
  REQUIRE(exact.status == 200);
  CHECK(exact.body["metadata"]["resourceVersion"] == Rv(*first));
  REQUIRE(exact.body["items"].size() == 1);
  CHECK(exact.body["items"][0]["metadata"]["name"] == "first");

  RawResponse latest =
      server.Raw("GET", ConfigMapsPath(ns) + "?limit=10&resourceVersion=" + Rv(*first) +
                            "&resourceVersionMatch=NotOlderThan");
  REQUIRE(latest.status == 200);
  CHECK(latest.body["items"].size() == 2);
  CHECK(RvNumber(latest.body["metadata"]["resourceVersion"].get<std::string>()) >
        RvNumber(Rv(*first)));
}

TEST_CASE("an unparsable resourceVersion: 500 from the watch cache, 400 from etcd") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  const std::string ns = server.NewNamespace("bad-rv");
  const std::string path = ConfigMapsPath(ns);
  const std::string kAbc =
      R"(resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax)";
  CheckUnclassified(server.Raw("GET", path + "?resourceVersion=abc"), kAbc);
  CheckUnclassified(server.Raw("GET", path + "?watch=1&resourceVersion=abc"), kAbc);
  CheckUnclassified(server.Raw("GET", path + "/absent?resourceVersion=abc"), kAbc);
  CheckUnclassified(server.Raw("GET", path + "?resourceVersion=%2B5"),
                    R"(resourceVersion: Invalid value: "+5": strconv.ParseUint: parsing "+5": )"
                    "invalid syntax");
  CheckUnclassified(server.Raw("GET", path + "?resourceVersion=99999999999999999999"),
                    R"(resourceVersion: Invalid value: "99999999999999999999": )"
                    R"(strconv.ParseUint: parsing "99999999999999999999": value out of range)");
  for (const char* query :
       {"?resourceVersion=abc&resourceVersionMatch=Exact", "?resourceVersion=abc&limit=2"}) {
    CAPTURE(query);
    RawResponse bad = server.Raw("GET", path + query);
    CheckStatusBody(bad, 400, "BadRequest");
    CHECK(bad.body.value("message", "") == "invalid resource version: " + kAbc);
  }
}

TEST_CASE("resourceVersionMatch needs a resourceVersion other than 0, no continue and no watch") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  const std::string ns = server.NewNamespace("rv-match");
  const std::string path = ConfigMapsPath(ns);
  const std::pair<std::string, std::string> kUnlessRv = {
      "FieldValueForbidden",
      "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"};
  CheckListOptionsInvalid(
      server.Raw("GET", path + "?resourceVersion=0&resourceVersionMatch=Exact"),
      {{"FieldValueForbidden",
        R"(Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0")"}});
  CheckListOptionsInvalid(server.Raw("GET", path + "?resourceVersionMatch=Exact"), {kUnlessRv});
  CheckListOptionsInvalid(server.Raw("GET", path + "?resourceVersionMatch=NotOlderThan"),
                          {kUnlessRv});
  const std::pair<std::string, std::string> kBogus = {
      "FieldValueNotSupported",
      R"(Unsupported value: "Bogus": supported values: "Exact", "NotOlderThan", "")"};
  CheckListOptionsInvalid(server.Raw("GET", path + "?resourceVersion=5&resourceVersionMatch=Bogus"),
                          {kBogus});
  CheckListOptionsInvalid(server.Raw("GET", path + "?resourceVersionMatch=Bogus"),
                          {kUnlessRv, kBogus});
  CheckListOptionsInvalid(
      server.Raw("GET", path + "?resourceVersion=5&resourceVersionMatch=NotOlderThan&continue=x"),
      {{"FieldValueForbidden",
        "Forbidden: resourceVersionMatch is forbidden when continue is provided"}});
  CheckListOptionsInvalid(
      server.Raw("GET", path + "?watch=1&resourceVersion=5&resourceVersionMatch=NotOlderThan"),
      {{"FieldValueForbidden", "Forbidden: resourceVersionMatch is forbidden for watch"}});
}

TEST_CASE("a bad continue token is a 400 that says why, in kube-apiserver's words") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("bad-continue");
  const std::string path = ConfigMapsPath(ns);
  for (const char* name : {"a", "b", "c"}) {
    REQUIRE(client->Create(Collection(resources::kConfigMaps, ns), ConfigMap(ns, name, {})).ok());
  }
  RawResponse page = server.Raw("GET", path + "?limit=1");
  REQUIRE(page.status == 200);
  const std::string token = page.body["metadata"]["continue"].get<std::string>();
  const uint64_t current = RvNumber(page.body["metadata"]["resourceVersion"].get<std::string>());

  const std::string kInvalid = "invalid continue token: continue key is not valid";
  const std::vector<std::pair<std::string, std::string>> cases = {
      // Go's base64 decoder names the first byte it could not use.
      {"abc$", kInvalid + ": illegal base64 data at input byte 3"},
      {"a", kInvalid + ": illegal base64 data at input byte 0"},
      {"abcde", kInvalid + ": illegal base64 data at input byte 4"},
      {token + "=",
       kInvalid + ": illegal base64 data at input byte " + std::to_string(token.size())},
      // Then Go's JSON decoder, then the token's own fields.
      {"garbage", kInvalid + R"(: invalid character '\u0081' looking for beginning of value)"},
      {ContinueToken(R"({"v":"meta.k8s.io/v1","rv":1,)"),
       kInvalid + ": unexpected end of JSON input"},
      {ContinueToken(R"({"v":"meta.k8s.io/v1","rv":"1","start":"a"})"),
       kInvalid + ": json: cannot unmarshal string into Go struct field continueToken.rv of type "
                  "int64"},
      {ContinueToken("{}"), kInvalid + ": server does not recognize this encoded version "},
      {ContinueToken(R"({"v":"v9","rv":1,"start":"a"})"),
       kInvalid + ": server does not recognize this encoded version v9"},
      {ContinueToken(R"({"v":"meta.k8s.io/v1","rv":0,"start":"a"})"),
       kInvalid + ": incorrect encoded start resourceVersion (version meta.k8s.io/v1)"},
      {ContinueToken(R"({"v":"meta.k8s.io/v1","rv":1,"start":""})"),
       kInvalid + ": encoded start key empty (version meta.k8s.io/v1)"},
      {ContinueToken(R"({"v":"meta.k8s.io/v1","rv":1,"start":"a/../b"})"), kInvalid + ": a/../b"},
  };
  for (const auto& [bad, message] : cases) {
    CAPTURE(bad);
    RawResponse answer = server.Raw("GET", path + "?limit=1&continue=" + bad);
    CheckStatusBody(answer, 400, "BadRequest");
    CHECK(answer.body.value("message", "") == message);
  }

  // A token from the future is read by etcd at that revision.
  CheckUnclassified(
      server.Raw("GET", path + "?limit=1&continue=" +
                            ContinueToken(R"({"v":"meta.k8s.io/v1","rv":)" +
                                          std::to_string(current + 1000000) + R"(,"start":"a"})")),
      "etcdserver: mvcc: required revision is a future revision");
  // resourceVersion "0" goes with a continue token; any other does not.
  RawResponse zero = server.Raw("GET", path + "?limit=1&resourceVersion=0&continue=" + token);
  CHECK(zero.status == 200);
  RawResponse other = server.Raw("GET", path + "?limit=1&resourceVersion=5&continue=" + token);
  CheckStatusBody(other, 400, "BadRequest");
  CHECK(other.body.value("message", "") ==
        "specifying resource version is not allowed when using continue");
}

TEST_CASE("every answer carries Cache-Control: no-cache, private and its own Audit-Id") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  const std::string ns = server.NewNamespace("headers");
  const std::regex uuid("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");
  std::set<std::string> audit_ids;
  const std::vector<std::pair<std::string, int>> requests = {
      {"/api", 200},
      {"/version", 200},
      {ConfigMapsPath(ns), 200},
      {ConfigMapsPath(ns) + "/absent", 404},
      {ConfigMapsPath(ns) + "?resourceVersionMatch=Exact", 422},
      {ConfigMapsPath(ns) + "?watch=1&timeoutSeconds=1", 200},
  };
  for (const auto& [path, status] : requests) {
    CAPTURE(path);
    RawResponse answer = server.Raw("GET", path);
    CHECK(answer.status == status);
    CHECK(answer.Header("Cache-Control") == "no-cache, private");
    const std::string audit_id = answer.Header("Audit-Id");
    CHECK_MESSAGE(std::regex_match(audit_id, uuid), audit_id);
    audit_ids.insert(audit_id);
  }
  CHECK(audit_ids.size() == requests.size());
}

}  // namespace
}  // namespace syncbus::conformance
