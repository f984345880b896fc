#include <doctest/doctest.h>

#include "tests/unit/kubesim/api_test_util.h"

namespace syncbus::kubesim::testing {
namespace {

ApiResponse PatchCm(ApiServer& s, const std::string& type, const std::string& body,
                    const std::string& query = {}) {
  return Raw(s, "PATCH", CmPath("default", "a"), body, type, query);
}

const std::string kDeployments = "/apis/apps/v1/namespaces/default/deployments";

Json Deployment() {
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata", {{"name", "d"}, {"namespace", "default"}}},
          {"spec",
           {{"selector", {{"matchLabels", {{"app", "d"}}}}},
            {"template",
             {{"metadata", {{"labels", {{"app", "d"}}}}},
              {"spec",
               {{"containers",
                 {{{"name", "a"}, {"image", "a:1"}, {"env", {{{"name", "X"}, {"value", "1"}}}}},
                  {{"name", "b"}, {"image", "b:1"}}}}}}}}}}};
}

TEST_CASE("merge patch (RFC 7386)") {
  Fixture f;
  REQUIRE(
      f.server->Call("POST", CmPath("default"), ConfigMap("a", "default", {{"x", "1"}, {"y", "2"}}))
          .status == 201);
  auto r = PatchCm(*f.server, "application/merge-patch+json",
                   R"({"data":{"x":null,"z":"3"},"metadata":{"labels":{"l":"v"}}})");
  REQUIRE(r.status == 200);
  Json obj = Body(r);
  CHECK(obj["data"] == Json{{"y", "2"}, {"z", "3"}});
  CHECK(obj["metadata"]["labels"]["l"] == "v");
  CHECK(PatchCm(*f.server, "application/merge-patch+json", "{bad").status == 400);
  CHECK(Raw(*f.server, "PATCH", CmPath("default", "missing"), "{}", "application/merge-patch+json")
            .status == 404);
  auto stale = PatchCm(*f.server, "application/merge-patch+json",
                       R"({"metadata":{"resourceVersion":"1"},"data":{"q":"1"}})");
  CHECK(stale.status == 409);
}

TEST_CASE("JSON patch (RFC 6902) including test, and its failures") {
  Fixture f;
  REQUIRE(
      f.server->Call("POST", CmPath("default"), ConfigMap("a", "default", {{"x", "1"}})).status ==
      201);
  auto ok = PatchCm(*f.server, "application/json-patch+json",
                    R"([{"op":"test","path":"/data/x","value":"1"},
                        {"op":"add","path":"/data/y","value":"2"},
                        {"op":"copy","from":"/data/y","path":"/data/z"},
                        {"op":"remove","path":"/data/x"},
                        {"op":"replace","path":"/data/y","value":"20"},
                        {"op":"move","from":"/data/z","path":"/data/w"},
                        {"op":"add","path":"/metadata/labels","value":{"a/b":"c"}}])");
  REQUIRE(ok.status == 200);
  CHECK(Body(ok)["data"] == Json{{"w", "2"}, {"y", "20"}});
  CHECK(Body(ok)["metadata"]["labels"]["a/b"] == "c");

  auto failed_test = PatchCm(*f.server, "application/json-patch+json",
                             R"([{"op":"test","path":"/data/y","value":"nope"}])");
  CHECK(failed_test.status == 422);
  CHECK(Body(failed_test)["reason"] == "Invalid");
  CHECK(Body(failed_test)["details"]["causes"][0]["message"] ==
        "testing value /data/y failed: test failed");
  auto missing = PatchCm(*f.server, "application/json-patch+json",
                         R"([{"op":"replace","path":"/data/nope","value":"x"}])");
  CHECK(missing.status == 422);
  CHECK(PatchCm(*f.server, "application/json-patch+json", R"({"op":"add"})").status == 400);
  CHECK(PatchCm(*f.server, "application/json-patch+json", "[{]").status == 400);
}

TEST_CASE("strategic merge patch on built-in types") {
  Fixture f;
  REQUIRE(f.server->Call("POST", kDeployments, Deployment()).status == 201);
  auto patch = [&](const std::string& body) {
    return Raw(*f.server, "PATCH", kDeployments + "/d", body,
               "application/strategic-merge-patch+json");
  };
  // Containers merge by name; env merges by name.
  auto r = patch(R"({"spec":{"template":{"spec":{"containers":[
      {"name":"a","env":[{"name":"Y","value":"2"}]},
      {"name":"c","image":"c:1"}]}}}})");
  REQUIRE(r.status == 200);
  Json containers = Body(r)["spec"]["template"]["spec"]["containers"];
  REQUIRE(containers.size() == 3);
  CHECK(containers[0]["image"] == "a:1");
  CHECK(containers[0]["env"].size() == 2);
  CHECK(containers[2]["name"] == "c");
  CHECK(Body(r)["metadata"]["generation"] == 2);

  // $patch: delete removes a list element; $patch: replace replaces a map.
  r = patch(R"({"spec":{"template":{"spec":{"containers":[{"name":"b","$patch":"delete"}]}}}})");
  REQUIRE(r.status == 200);
  CHECK(Body(r)["spec"]["template"]["spec"]["containers"].size() == 2);
  r = patch(
      R"({"spec":{"template":{"metadata":{"labels":{"$patch":"replace","app":"d","new":"x"}}}}})");
  REQUIRE(r.status == 200);
  CHECK(Body(r)["spec"]["template"]["metadata"]["labels"] == Json{{"app", "d"}, {"new", "x"}});

  // Finalizers merge as a set; $deleteFromPrimitiveList removes.
  r = patch(R"({"metadata":{"finalizers":["a.example.com/x"]}})");
  r = patch(R"({"metadata":{"finalizers":["b.example.com/y"]}})");
  CHECK(Body(r)["metadata"]["finalizers"].size() == 2);
  r = patch(R"({"metadata":{"$deleteFromPrimitiveList/finalizers":["a.example.com/x"]}})");
  CHECK(Body(r)["metadata"]["finalizers"] == Json::array({"b.example.com/y"}));

  // $retainKeys drops the keys it does not list.
  r = patch(R"({"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate"}}})");
  REQUIRE(r.status == 200);
  CHECK(Body(r)["spec"]["strategy"] == Json{{"type", "Recreate"}});

  // A list without a merge strategy is replaced.
  r = patch(R"({"spec":{"template":{"spec":{"containers":[{"name":"a","args":["1","2"]}]}}}})");
  r = patch(R"({"spec":{"template":{"spec":{"containers":[{"name":"a","args":["3"]}]}}}})");
  CHECK(Body(r)["spec"]["template"]["spec"]["containers"][0]["args"] == Json::array({"3"}));

  // A strategic patch on a ConfigMap merges data.
  REQUIRE(
      f.server->Call("POST", CmPath("default"), ConfigMap("a", "default", {{"x", "1"}})).status ==
      201);
  auto cm = PatchCm(*f.server, "application/strategic-merge-patch+json", R"({"data":{"y":"2"}})");
  CHECK(Body(cm)["data"] == Json{{"x", "1"}, {"y", "2"}});
}

TEST_CASE("strategic merge patch on a custom resource is 415, unknown patch types too") {
  Fixture f(true);
  REQUIRE(f.server
              ->Call("POST", "/api/v1/namespaces",
                     {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "ns"}}}})
              .status == 201);
  Json ss = {{"apiVersion", "hive.openshift.io/v1"},
             {"kind", "SyncSet"},
             {"metadata", {{"name", "s"}, {"namespace", "ns"}}},
             {"spec", {{"clusterDeploymentRefs", Json::array()}}}};
  const std::string path = "/apis/hive.openshift.io/v1/namespaces/ns/syncsets/s";
  REQUIRE(f.server->Call("POST", "/apis/hive.openshift.io/v1/namespaces/ns/syncsets", ss).status ==
          201);
  auto r =
      Raw(*f.server, "PATCH", path, R"({"spec":{}})", "application/strategic-merge-patch+json");
  CHECK(r.status == 415);
  CHECK(Body(r)["reason"] == "UnsupportedMediaType");
  CHECK(Body(r)["message"] ==
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml");
  CHECK(Raw(*f.server, "PATCH", path, "{}", "text/plain").status == 415);
  auto merge = Raw(*f.server, "PATCH", path, R"({"spec":{"resourceApplyMode":"Sync"}})",
                   "application/merge-patch+json");
  CHECK(merge.status == 200);
  CHECK(Body(merge)["metadata"]["generation"] == 2);
  auto force = Raw(*f.server, "PATCH", path, "{}", "application/merge-patch+json", "force=true");
  CHECK(force.status == 422);
}

}  // namespace
}  // namespace syncbus::kubesim::testing
