#include <doctest/doctest.h>

#include "tests/unit/kubesim/api_test_util.h"

namespace syncbus::kubesim::testing {
namespace {

ApiResponse Apply(ApiServer& s, const std::string& path, const std::string& body,
                  const std::string& manager, bool force = false) {
  std::string query = manager.empty() ? "" : "fieldManager=" + manager;
  if (force) query += "&force=true";
  return Raw(s, "PATCH", path, body, "application/apply-patch+yaml", query);
}

const Json* Entry(const Json& obj, const std::string& manager, const std::string& operation) {
  for (const auto& e : obj["metadata"]["managedFields"]) {
    if (e["manager"] == manager && e["operation"] == operation) return &e;
  }
  return nullptr;
}

const char kCm[] = R"(apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  namespace: default
  labels:
    team: x
data:
  one: "1"
  two: "2"
)";

TEST_CASE("apply creates the object and records an Apply entry in FieldsV1 form") {
  Fixture f;
  auto r = Apply(*f.server, CmPath("default", "a"), kCm, "alpha");
  REQUIRE(r.status == 201);
  Json obj = Body(r);
  CHECK(obj["data"] == Json{{"one", "1"}, {"two", "2"}});
  const Json* entry = Entry(obj, "alpha", "Apply");
  REQUIRE(entry != nullptr);
  CHECK((*entry)["apiVersion"] == "v1");
  CHECK((*entry)["fieldsType"] == "FieldsV1");
  CHECK((*entry)["time"] == "2026-01-01T00:00:00Z");
  CHECK(
      (*entry)["fieldsV1"] ==
      Json::parse(R"({"f:data":{"f:one":{},"f:two":{}},"f:metadata":{"f:labels":{"f:team":{}}}})"));
  CHECK(obj["metadata"]["managedFields"].size() == 1);
}

TEST_CASE("reapplying the same configuration changes nothing") {
  Fixture f;
  Json first = Body(Apply(*f.server, CmPath("default", "a"), kCm, "alpha"));
  f.clock.Advance(std::chrono::seconds(30));
  auto again = Apply(*f.server, CmPath("default", "a"), kCm, "alpha");
  REQUIRE(again.status == 200);
  CHECK(Rv(Body(again)) == Rv(first));
  CHECK(Body(again) == first);
}

TEST_CASE(
    "fields dropped from the applied configuration are removed unless someone else owns them") {
  Fixture f;
  ApiServer& s = *f.server;
  REQUIRE(Apply(s, CmPath("default", "a"), kCm, "alpha").status == 201);
  // beta co-owns "two" by applying the same value: no conflict.
  auto beta =
      Apply(s, CmPath("default", "a"),
            R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"two":"2"}})",
            "beta");
  REQUIRE(beta.status == 200);
  auto r = Apply(s, CmPath("default", "a"),
                 "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  three: \"3\"\n",
                 "alpha");
  REQUIRE(r.status == 200);
  Json obj = Body(r);
  CHECK(obj["data"] == Json{{"three", "3"}, {"two", "2"}});
  CHECK(!obj["metadata"].contains("labels"));
  CHECK((*Entry(obj, "alpha", "Apply"))["fieldsV1"] == Json::parse(R"({"f:data":{"f:three":{}}})"));
  CHECK((*Entry(obj, "beta", "Apply"))["fieldsV1"] == Json::parse(R"({"f:data":{"f:two":{}}})"));
}

TEST_CASE("a conflicting apply is a 409 with FieldManagerConflict causes, force takes ownership") {
  Fixture f;
  ApiServer& s = *f.server;
  REQUIRE(Apply(s, CmPath("default", "a"), kCm, "alpha").status == 201);
  const std::string change =
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"one":"uno","two":"dos"}})";
  auto conflict = Apply(s, CmPath("default", "a"), change, "beta");
  REQUIRE(conflict.status == 409);
  Json status = Body(conflict);
  CHECK(status["reason"] == "Conflict");
  CHECK(status["message"] ==
        "Apply failed with 2 conflicts: conflicts with \"alpha\":\n- .data.one\n- .data.two");
  REQUIRE(status["details"]["causes"].size() == 2);
  CHECK(status["details"]["causes"][0]["reason"] == "FieldManagerConflict");
  CHECK(status["details"]["causes"][0]["message"] == "conflict with \"alpha\"");
  CHECK(status["details"]["causes"][0]["field"] == ".data.one");

  auto single =
      Apply(s, CmPath("default", "a"),
            R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"one":"x"}})",
            "gamma");
  CHECK(Body(single)["message"] ==
        "Apply failed with 1 conflict: conflict with \"alpha\": .data.one");

  auto forced = Apply(s, CmPath("default", "a"), change, "beta", true);
  REQUIRE(forced.status == 200);
  Json obj = Body(forced);
  CHECK(obj["data"]["one"] == "uno");
  CHECK((*Entry(obj, "alpha", "Apply"))["fieldsV1"] ==
        Json::parse(R"({"f:metadata":{"f:labels":{"f:team":{}}}})"));
  CHECK((*Entry(obj, "beta", "Apply"))["fieldsV1"] ==
        Json::parse(R"({"f:data":{"f:one":{},"f:two":{}}})"));
}

TEST_CASE("updates by other means record Update entries and take fields from appliers") {
  Fixture f;
  ApiServer& s = *f.server;
  Json obj = Body(Apply(s, CmPath("default", "a"), kCm, "alpha"));
  obj["data"]["one"] = "changed";
  obj["data"]["new"] = "n";
  ApiRequest put;
  put.method = "PUT";
  put.path = CmPath("default", "a");
  put.body = obj.dump();
  put.headers = {{"Content-Type", "application/json"}, {"User-Agent", "kubectl/v1.26.0 (linux)"}};
  Json updated = Body(s.Handle(put));
  const Json* update = Entry(updated, "kubectl", "Update");
  REQUIRE(update != nullptr);
  CHECK((*update)["fieldsV1"] == Json::parse(R"({"f:data":{"f:new":{},"f:one":{}}})"));
  CHECK((*Entry(updated, "alpha", "Apply"))["fieldsV1"] ==
        Json::parse(R"({"f:data":{"f:two":{}},"f:metadata":{"f:labels":{"f:team":{}}}})"));
  // The applier re-asserting its value conflicts with the updater.
  auto conflict = Apply(s, CmPath("default", "a"), kCm, "alpha");
  CHECK(conflict.status == 409);
  CHECK(Body(conflict)["details"]["causes"][0]["message"] ==
        "conflict with \"kubectl\" using v1 at 2026-01-01T00:00:00Z");
}

TEST_CASE("a create records the creator's fields, maps it created carry the '.' member") {
  Fixture f(true);
  REQUIRE(f.server
              ->Call("POST", "/api/v1/namespaces",
                     {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "ns"}}}})
              .status == 201);
  Json ss = {{"apiVersion", "hive.openshift.io/v1"},
             {"kind", "SyncSet"},
             {"metadata", {{"name", "s"}, {"namespace", "ns"}, {"labels", {{"a", "b"}}}}},
             {"spec", {{"clusterDeploymentRefs", {{{"name", "c1"}}}}}}};
  ApiRequest post;
  post.method = "POST";
  post.path = "/apis/hive.openshift.io/v1/namespaces/ns/syncsets";
  post.query = "fieldManager=creator";
  post.body = ss.dump();
  post.headers = {{"Content-Type", "application/json"}};
  Json created = Body(f.server->Handle(post));
  const Json* entry = Entry(created, "creator", "Update");
  REQUIRE(entry != nullptr);
  CHECK((*entry)["fieldsV1"] == Json::parse(R"({"f:metadata":{"f:labels":{".":{},"f:a":{}}},
                        "f:spec":{".":{},"f:clusterDeploymentRefs":{}}})"));
}

TEST_CASE("apply on the status subresource and required fieldManager") {
  Fixture f(true);
  ApiServer& s = *f.server;
  REQUIRE(s.Call("POST", "/api/v1/namespaces",
                 {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "ns"}}}})
              .status == 201);
  const std::string path = "/apis/hiveinternal.openshift.io/v1alpha1/namespaces/ns/clustersyncs/c";
  const std::string cs = R"({"apiVersion":"hiveinternal.openshift.io/v1alpha1","kind":"ClusterSync",
                            "metadata":{"name":"c","namespace":"ns"},"status":{"controlledByReplica":1}})";
  auto missing_status = Apply(s, path + "/status", cs, "syncer");
  CHECK(missing_status.status == 404);
  auto no_manager = Apply(s, path, cs, "");
  CHECK(no_manager.status == 422);
  CHECK(Body(no_manager)["message"] ==
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for "
        "apply patch");
  auto created = Apply(s, path, cs, "syncer");
  REQUIRE(created.status == 201);
  CHECK(!Body(created).contains("status"));
  auto status = Apply(s, path + "/status", cs, "syncer");
  REQUIRE(status.status == 200);
  Json obj = Body(status);
  CHECK(obj["status"]["controlledByReplica"] == 1);
  const Json* entry = nullptr;
  for (const auto& e : obj["metadata"]["managedFields"]) {
    if (e.value("subresource", "") == "status") entry = &e;
  }
  REQUIRE(entry != nullptr);
  CHECK((*entry)["fieldsV1"] == Json::parse(R"({"f:status":{"f:controlledByReplica":{}}})"));
}

TEST_CASE("apply merges associative lists by key, with defaulted keys, and reapplies as no-ops") {
  Fixture f;
  ApiServer& s = *f.server;
  const std::string path = "/apis/apps/v1/namespaces/default/deployments/d";
  const std::string deploy = R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},
    "spec":{"selector":{"matchLabels":{"app":"d"}},"template":{"metadata":{"labels":{"app":"d"}},
    "spec":{"containers":[{"name":"web","image":"nginx:1","ports":[{"containerPort":80}]}]}}}})";
  auto created = Apply(s, path, deploy, "ci");
  REQUIRE(created.status == 201);
  Json obj = Body(created);
  CHECK(obj["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"] == "TCP");
  auto again = Apply(s, path, deploy, "ci");
  REQUIRE(again.status == 200);
  CHECK(Rv(Body(again)) == Rv(obj));
  CHECK(Body(again)["spec"]["template"]["spec"]["containers"][0]["ports"].size() == 1);
  const Json* entry = Entry(obj, "ci", "Apply");
  REQUIRE(entry != nullptr);
  Json containers =
      entry->at("fieldsV1").at("f:spec").at("f:template").at("f:spec").at("f:containers");
  CHECK(containers["k:{\"name\":\"web\"}"]["."] == Json::object());
  CHECK(containers["k:{\"name\":\"web\"}"]["f:ports"].contains(
      "k:{\"containerPort\":80,\"protocol\":\"TCP\"}"));
  // A second manager adds a container without disturbing the first one's.
  auto sidecar =
      Apply(s, path, R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},
    "spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox:1"}]}}}})",
            "mesh");
  REQUIRE(sidecar.status == 200);
  CHECK(Body(sidecar)["spec"]["template"]["spec"]["containers"].size() == 2);
}

TEST_CASE("ten thousand config map applies") {
  Fixture f;
  ApiServer& s = *f.server;
  for (int i = 0; i < 10000; ++i) {
    std::string name = "cm-" + std::to_string(i % 1000);
    std::string body = R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")" + name +
                       R"(","labels":{"hive.openshift.io/managed":"true"}},"data":{"key":"value-)" +
                       std::to_string(i / 1000) + R"("}})";
    auto r = Apply(s, CmPath("default", name), body, "hive", true);
    REQUIRE(r.status < 300);
  }
  Json list = Body(s.Call("GET", CmPath("default")));
  CHECK(list["items"].size() == 1000);
  CHECK(list["items"][0]["data"]["key"] == "value-9");
}

}  // namespace
}  // namespace syncbus::kubesim::testing
