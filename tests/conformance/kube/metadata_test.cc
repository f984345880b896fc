// Conformance: reads in the metadata-only forms (PartialObjectMetadata and
// PartialObjectMetadataList of meta.k8s.io, asked for in the Accept header as client-go's
// metadata client does): lists, single objects, watches and their bookmarks carry the objects'
// metadata and never their bodies; the mismatches and unknown forms the server refuses (406).
#include <chrono>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include <doctest/doctest.h>

#include "common/base64.h"
#include "common/kube/client_impl.h"
#include "tests/conformance/kube/conformance_util.h"

namespace syncbus::conformance {
namespace {

using kube::Collection;
using kube::Object;
namespace resources = kube::resources;

constexpr char kListForm[] = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
constexpr char kObjectForm[] = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
constexpr char kOnlyAccepted[] =
    "only the following media types are accepted: application/json, application/yaml, "
    "application/vnd.kubernetes.protobuf";

std::string SecretsPath(const std::string& ns) {
  return "/api/v1/namespaces/" + ns + "/secrets";
}

// A Secret whose data is easy to look for in an answer.
Json Secret(const std::string& ns, const std::string& name, const std::string& value) {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata",
           {{"name", name},
            {"namespace", ns},
            {"labels", {{"app", "metadata-test"}}},
            {"annotations", {{"note", "kept"}}}}},
          {"data", {{"token", EncodeBase64(value)}}}};
}

// One PartialObjectMetadata as both servers send it: its metadata whole, nothing else.
void CheckPartial(const Json& item, const std::string& version = "v1") {
  INFO("item: " << item.dump());
  CHECK(item.value("kind", "") == "PartialObjectMetadata");
  CHECK(item.value("apiVersion", "") == "meta.k8s.io/" + version);
  REQUIRE(item.contains("metadata"));
  std::set<std::string> keys;
  for (const auto& [key, value] : item.items()) keys.insert(key);
  CHECK(keys == std::set<std::string>{"apiVersion", "kind", "metadata"});
  const Json& meta = item["metadata"];
  CHECK(meta.contains("name"));
  CHECK(meta.contains("uid"));
  CHECK(meta.contains("resourceVersion"));
  CHECK(meta.contains("creationTimestamp"));
  CHECK(meta.contains("managedFields"));
}

// The events of a watch body (one JSON object per line).
std::vector<Json> WatchLines(const std::string& text) {
  std::vector<Json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json event = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    REQUIRE_MESSAGE(event.is_object(), line);
    out.push_back(std::move(event));
  }
  return out;
}

TEST_CASE("a list asked for metadata only is a PartialObjectMetadataList without the bodies") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("metadata-list");
  for (int i = 0; i < 3; ++i) {
    std::string name = "s-" + std::to_string(i);
    REQUIRE(
        client->Create(Collection(resources::kSecrets, ns), Secret(ns, name, "value-of-" + name))
            .ok());
  }

  RawResponse page = server.Raw("GET", SecretsPath(ns) + "?limit=2", {}, {}, kListForm);
  INFO("body: " << page.text);
  REQUIRE(page.status == 200);
  CHECK(page.Header("Content-Type") == "application/json");
  CHECK(page.body["kind"] == "PartialObjectMetadataList");
  CHECK(page.body["apiVersion"] == "meta.k8s.io/v1");
  CHECK_FALSE(page.body["metadata"].value("resourceVersion", "").empty());
  CHECK(page.body["metadata"]["remainingItemCount"] == 1);
  REQUIRE(page.body["items"].size() == 2);
  CHECK(page.body["items"][0]["metadata"]["name"] == "s-0");
  for (const Json& item : page.body["items"]) {
    CheckPartial(item);
    CHECK(item["metadata"]["labels"]["app"] == "metadata-test");
    CHECK(item["metadata"]["annotations"]["note"] == "kept");
    CHECK(item["metadata"]["namespace"] == ns);
  }
  CHECK(page.text.find(EncodeBase64("value-of-s-0")) == std::string::npos);

  // The continue token pages on in the same form.
  std::string token = page.body["metadata"]["continue"].get<std::string>();
  RawResponse rest =
      server.Raw("GET", SecretsPath(ns) + "?limit=2&continue=" + token, {}, {}, kListForm);
  REQUIRE(rest.status == 200);
  REQUIRE(rest.body["items"].size() == 1);
  CheckPartial(rest.body["items"][0]);
  CHECK(rest.body["items"][0]["metadata"]["name"] == "s-2");
  CHECK_FALSE(rest.body["metadata"].contains("continue"));

  // client-go's metadata client: the form, then the object itself for servers without it.
  RawResponse client_go = server.Raw("GET", SecretsPath(ns), {}, {}, kube::kAcceptMetadataList);
  REQUIRE(client_go.status == 200);
  CHECK(client_go.body["kind"] == "PartialObjectMetadataList");
  CHECK(client_go.body["items"].size() == 3);
  // Preference goes by q, then by order.
  RawResponse preferred = server.Raw("GET", SecretsPath(ns), {}, {},
                                     std::string("application/json;q=0.5, ") + kListForm);
  CHECK(preferred.body["kind"] == "PartialObjectMetadataList");
  RawResponse v1beta1 =
      server.Raw("GET", SecretsPath(ns), {}, {},
                 "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1");
  REQUIRE(v1beta1.status == 200);
  CHECK(v1beta1.body["apiVersion"] == "meta.k8s.io/v1beta1");
  CheckPartial(v1beta1.body["items"][0], "v1beta1");

  // An empty list has no items at all (null), unlike the object form's [].
  const std::string empty = server.NewNamespace("metadata-empty");
  RawResponse none = server.Raw("GET", SecretsPath(empty), {}, {}, kListForm);
  REQUIRE(none.status == 200);
  CHECK(none.body["kind"] == "PartialObjectMetadataList");
  CHECK(none.body["items"].is_null());

  // The client's metadata-only list: every item a PartialObjectMetadata.
  kube::ListOptions options;
  options.metadata_only = true;
  options.limit = 2;
  Result<kube::ObjectList> listed = client->List(Collection(resources::kSecrets, ns), options);
  REQUIRE_MESSAGE(listed.ok(), listed.status().ToString());
  CHECK(listed->items.size() == 3);
  CHECK_FALSE(listed->resource_version.empty());
  for (const Json& item : listed->items) CheckPartial(item);
}

TEST_CASE(
    "one object asked for metadata only is a PartialObjectMetadata and mismatched forms are 406") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("metadata-get");
  REQUIRE(client->Create(Collection(resources::kSecrets, ns), Secret(ns, "one", "the-value")).ok());

  RawResponse one = server.Raw("GET", SecretsPath(ns) + "/one", {}, {}, kObjectForm);
  REQUIRE(one.status == 200);
  CheckPartial(one.body);
  CHECK(one.body["metadata"]["name"] == "one");
  CHECK(one.text.find(EncodeBase64("the-value")) == std::string::npos);

  // The server negotiates before it knows whether the answer is a list, then refuses the
  // mismatch, even when a fallback follows in the Accept header.
  RawResponse not_a_list = server.Raw("GET", SecretsPath(ns) + "/one", {}, {}, kListForm);
  CheckStatusBody(not_a_list, 406, "NotAcceptable");
  CHECK(not_a_list.body["message"] ==
        "you requested PartialObjectMetadataList, but the requested object is not a list "
        "(*core.Secret)");
  RawResponse a_list =
      server.Raw("GET", SecretsPath(ns), {}, {}, std::string(kObjectForm) + ", application/json");
  CheckStatusBody(a_list, 406, "NotAcceptable");
  CHECK(
      a_list.body["message"] ==
      "you requested PartialObjectMetadata, but the requested object is a list (*core.SecretList)");
  RawResponse leases = server.Raw(
      "GET", "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases", {}, {}, kObjectForm);
  CheckStatusBody(leases, 406, "NotAcceptable");
  CHECK(leases.body["message"] ==
        "you requested PartialObjectMetadata, but the requested object is a list "
        "(*coordination.LeaseList)");

  // A form without its group and version is no form the server offers.
  RawResponse no_group = server.Raw("GET", SecretsPath(ns), {}, {},
                                    "application/json;as=PartialObjectMetadataList;v=v1");
  CheckStatusBody(no_group, 406, "NotAcceptable");
  CHECK(no_group.body["message"] == kOnlyAccepted);
  RawResponse unknown_version =
      server.Raw("GET", SecretsPath(ns), {}, {},
                 "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v2");
  CheckStatusBody(unknown_version, 406, "NotAcceptable");
  // ... unless a media range the server can produce follows: then the object itself.
  RawResponse fallback = server.Raw(
      "GET", SecretsPath(ns), {}, {},
      "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v2, application/json");
  REQUIRE(fallback.status == 200);
  CHECK(fallback.body["kind"] == "SecretList");
  CHECK(fallback.body["items"][0]["data"]["token"] == EncodeBase64("the-value"));
}

TEST_CASE("a watch asked for metadata only sends PartialObjectMetadata events and bookmarks") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("metadata-watch");
  Result<Json> first = client->Create(Collection(resources::kSecrets, ns), Secret(ns, "w", "v1"));
  REQUIRE(first.ok());
  const kube::ObjectRef ref = Object(resources::kSecrets, ns, "w");
  Result<Json> patched = client->Patch(ref, kube::PatchType::kMerge,
                                       Json{{"data", {{"token", EncodeBase64("v2")}}}}.dump());
  REQUIRE(patched.ok());
  REQUIRE(client->Delete(ref, {}).ok());

  // On the wire, replayed from the first version: the change and the deletion as metadata.
  RawResponse raw = server.Raw(
      "GET",
      SecretsPath(ns) +
          "?watch=1&allowWatchBookmarks=true&timeoutSeconds=3&resourceVersion=" + Rv(*first),
      {}, {}, kObjectForm);
  INFO("body: " << raw.text);
  REQUIRE(raw.status == 200);
  std::vector<Json> changes;
  for (Json& e : WatchLines(raw.text)) {
    if (e["type"] != "BOOKMARK") changes.push_back(e);
  }
  REQUIRE(changes.size() == 2);
  CHECK(changes[0]["type"] == "MODIFIED");
  CHECK(Rv(changes[0]["object"]) == Rv(*patched));
  CHECK(changes[1]["type"] == "DELETED");
  CHECK(RvNumber(Rv(changes[1]["object"])) > RvNumber(Rv(*patched)));
  for (const Json& e : changes) {
    CheckPartial(e["object"]);
    CHECK(e["object"]["metadata"]["name"] == "w");
  }
  CHECK(raw.text.find(EncodeBase64("v2")) == std::string::npos);

  // The client's metadata-only watch decodes the same events, then a bookmark before the
  // server's timeout ends the watch. kube-apiserver 1.26 sends one (2 s before the timeout) only
  // once Secrets have moved past what the watch started from: a Secret written elsewhere while
  // it runs moves them. The simulator sends one every 5 s.
  kube::WatchOptions options;
  options.resource_version = Rv(*first);
  options.metadata_only = true;
  options.timeout_seconds = 8;
  Result<std::unique_ptr<kube::WatchStream>> watch =
      client->Watch(Collection(resources::kSecrets, ns), options);
  REQUIRE_MESSAGE(watch.ok(), watch.status().ToString());
  std::vector<kube::WatchEvent> decoded;
  std::optional<Json> bookmark;
  std::optional<uint64_t> written_elsewhere;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (!bookmark && std::chrono::steady_clock::now() < until) {
    Result<std::optional<kube::WatchEvent>> next = (*watch)->Next(std::chrono::milliseconds(200));
    REQUIRE_MESSAGE(next.ok(), next.status().ToString());
    if (!next->has_value()) continue;
    if ((*next)->type == kube::WatchEventType::kBookmark) {
      if (written_elsewhere) bookmark = (*next)->object;
      continue;
    }
    decoded.push_back(std::move(**next));
    if (decoded.size() == 2) {
      const std::string elsewhere = server.NewNamespace("metadata-watch-elsewhere");
      Result<Json> other =
          client->Create(Collection(resources::kSecrets, elsewhere), Secret(elsewhere, "x", "v"));
      REQUIRE(other.ok());
      written_elsewhere = RvNumber(Rv(*other));
    }
  }
  REQUIRE(decoded.size() == 2);
  CHECK(decoded[0].type == kube::WatchEventType::kModified);
  CHECK(decoded[1].type == kube::WatchEventType::kDeleted);
  for (const kube::WatchEvent& e : decoded) CheckPartial(e.object);
  REQUIRE(bookmark.has_value());
  CHECK((*bookmark)["kind"] == "PartialObjectMetadata");
  CHECK((*bookmark)["apiVersion"] == "meta.k8s.io/v1");
  CHECK(RvNumber(Rv(*bookmark)) >= *written_elsewhere);
  CHECK((*bookmark)["metadata"].contains("creationTimestamp"));
  CHECK((*bookmark)["metadata"]["creationTimestamp"].is_null());
  CHECK_FALSE((*bookmark)["metadata"].contains("name"));
}

TEST_CASE("a watch asked for the list form ends without an event") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("metadata-watch-list");
  REQUIRE(client->Create(Collection(resources::kSecrets, ns), Secret(ns, "x", "hidden")).ok());
  // Without a resourceVersion the watch starts with the existing object, which the server
  // cannot send as a list: it ends the 200 stream at once, long before its timeout.
  auto start = std::chrono::steady_clock::now();
  RawResponse raw =
      server.Raw("GET", SecretsPath(ns) + "?watch=1&timeoutSeconds=30", {}, {}, kListForm);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK(raw.status == 200);
  CHECK(raw.text.empty());
}

}  // namespace
}  // namespace syncbus::conformance
