#include "tests/kubesim/schema.h"

#include <doctest/doctest.h>

#include "tests/unit/kubesim/api_test_util.h"

namespace syncbus::kubesim::testing {
namespace {

const std::string kSyncSets = "/apis/hive.openshift.io/v1/namespaces/ns/syncsets";

struct HiveFixture : Fixture {
  HiveFixture() : Fixture(true) {
    REQUIRE(
        server
            ->Call("POST", "/api/v1/namespaces",
                   {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "ns"}}}})
            .status == 201);
  }
};

Json SyncSet(Json spec) {
  return {{"apiVersion", "hive.openshift.io/v1"},
          {"kind", "SyncSet"},
          {"metadata", {{"name", "s"}, {"namespace", "ns"}}},
          {"spec", std::move(spec)}};
}

Json Causes(const ApiResponse& r) {
  return Body(r)["details"]["causes"];
}

TEST_CASE("a SyncSet field of the wrong type is 422 Invalid with a cause per field") {
  HiveFixture f;
  auto r = f.server->Call("POST", kSyncSets,
                          SyncSet({{"clusterDeploymentRefs", "c1"}, {"resourceApplyMode", 5}}));
  REQUIRE(r.status == 422);
  Json status = Body(r);
  CHECK(status["reason"] == "Invalid");
  CHECK(status["details"]["kind"] == "SyncSet");
  CHECK(status["details"]["group"] == "hive.openshift.io");
  CHECK(status["details"]["name"] == "s");
  Json causes = status["details"]["causes"];
  REQUIRE(causes.size() == 2);
  CHECK(causes[0]["field"] == "spec.clusterDeploymentRefs");
  CHECK(causes[0]["reason"] == "FieldValueTypeInvalid");
  CHECK(causes[0]["message"] ==
        "Invalid value: \"string\": spec.clusterDeploymentRefs in body must be of type array: "
        "\"string\"");
  CHECK(causes[1]["field"] == "spec.resourceApplyMode");
  CHECK(status["message"].get<std::string>().rfind(
            "SyncSet.hive.openshift.io \"s\" is invalid: [spec.clusterDeploymentRefs: Invalid "
            "value: \"string\"",
            0) == 0);
}

TEST_CASE("required fields and enums") {
  HiveFixture f;
  auto r = f.server->Call("POST", kSyncSets, SyncSet({{"applyBehavior", "Sometimes"}}));
  REQUIRE(r.status == 422);
  Json causes = Causes(r);
  REQUIRE(causes.size() == 2);
  CHECK(causes[0]["field"] == "spec.applyBehavior");
  CHECK(causes[0]["reason"] == "FieldValueNotSupported");
  CHECK(causes[0]["message"] ==
        "Unsupported value: \"Sometimes\": supported values: \"\", \"Apply\", \"CreateOnly\", "
        "\"CreateOrUpdate\"");
  CHECK(causes[1]["field"] == "spec.clusterDeploymentRefs");
  CHECK(causes[1]["reason"] == "FieldValueRequired");
  CHECK(causes[1]["message"] == "Required value");
}

TEST_CASE("unknown fields are pruned silently and defaults applied") {
  HiveFixture f;
  Json spec = {{"clusterDeploymentRefs", {Json::object()}},
               {"bogus", true},
               {"secretMappings",
                {{{"sourceRef", {{"name", "a"}, {"extra", 1}}}, {"targetRef", {{"name", "b"}}}}}},
               {"resourceApplyMode", nullptr}};
  Json body = SyncSet(spec);
  body["topLevel"] = "x";
  body["metadata"]["madeUp"] = "y";
  auto r = f.server->Call("POST", kSyncSets, body);
  REQUIRE(r.status == 201);
  Json obj = Body(r);
  CHECK(!obj.contains("topLevel"));
  CHECK(!obj["metadata"].contains("madeUp"));
  CHECK(!obj["spec"].contains("bogus"));
  CHECK(!obj["spec"].contains("resourceApplyMode"));
  CHECK(obj["spec"]["secretMappings"][0]["sourceRef"] == Json{{"name", "a"}});
  CHECK(obj["spec"]["clusterDeploymentRefs"][0] == Json{{"name", ""}});
}

TEST_CASE("embedded resources keep their content and have their metadata validated") {
  HiveFixture f;
  Json resource = {
      {"apiVersion", "v1"},
      {"kind", "ConfigMap"},
      {"metadata", {{"name", "cm"}, {"namespace", "{{ fromCDLabel \"x\" }}"}, {"unknownMeta", 1}}},
      {"data", {{"k", "v"}}},
      {"anything", {{"goes", true}}}};
  auto r = f.server->Call("POST", kSyncSets,
                          SyncSet({{"clusterDeploymentRefs", Json::array()},
                                   {"resources", {resource, {{"metadata", {{"name", "x"}}}}}}}));
  REQUIRE(r.status == 422);
  Json causes = Causes(r);
  std::vector<std::string> fields;
  for (const auto& c : causes) fields.push_back(c["field"]);
  CHECK(std::find(fields.begin(), fields.end(), "spec.resources[0].metadata.namespace") !=
        fields.end());
  CHECK(std::find(fields.begin(), fields.end(), "spec.resources[1].apiVersion") != fields.end());
  CHECK(std::find(fields.begin(), fields.end(), "spec.resources[1].kind") != fields.end());

  resource["metadata"]["namespace"] = "target";
  auto ok = f.server->Call(
      "POST", kSyncSets,
      SyncSet({{"clusterDeploymentRefs", Json::array()}, {"resources", {resource}}}));
  REQUIRE(ok.status == 201);
  Json stored = Body(ok)["spec"]["resources"][0];
  CHECK(stored["anything"]["goes"] == true);
  CHECK(stored["data"]["k"] == "v");
  CHECK(!stored["metadata"].contains("unknownMeta"));
}

TEST_CASE("date-time format and required fields of a ClusterSyncLease") {
  HiveFixture f;
  const std::string path =
      "/apis/hiveinternal.openshift.io/v1alpha1/namespaces/ns/clustersyncleases";
  Json lease = {{"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
                {"kind", "ClusterSyncLease"},
                {"metadata", {{"name", "c"}, {"namespace", "ns"}}},
                {"spec", {{"renewTime", "not a time"}}}};
  auto r = f.server->Call("POST", path, lease);
  REQUIRE(r.status == 422);
  CHECK(Causes(r)[0]["message"] ==
        "Invalid value: \"not a time\": spec.renewTime in body must be of type date-time: "
        "\"not a time\"");
  lease["spec"] = Json::object();
  r = f.server->Call("POST", path, lease);
  REQUIRE(r.status == 422);
  CHECK(Causes(r)[0]["field"] == "spec.renewTime");
  lease["spec"]["renewTime"] = "2026-01-01T00:00:00.123456Z";
  CHECK(f.server->Call("POST", path, lease).status == 201);
}

TEST_CASE("custom resources need apiVersion and kind in the body") {
  HiveFixture f;
  Json body = SyncSet({{"clusterDeploymentRefs", Json::array()}});
  body.erase("kind");
  auto r = f.server->Call("POST", kSyncSets, body);
  CHECK(r.status == 400);
  CHECK(Body(r)["message"].get<std::string>().rfind("Object 'Kind' is missing in", 0) == 0);
}

TEST_CASE("schema keywords: bounds, patterns, int-or-string, nullable, list sets") {
  auto schema = Schema::Compile(Json::parse(R"({
    "type": "object",
    "properties": {
      "n": {"type": "integer", "minimum": 1, "maximum": 5},
      "s": {"type": "string", "maxLength": 3, "pattern": "^[a-z]+$"},
      "ios": {"x-kubernetes-int-or-string": true},
      "maybe": {"type": "string", "nullable": true},
      "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set",
               "maxItems": 2}
    }})"));
  REQUIRE(schema.ok());
  auto errors = [&](const Json& v) {
    std::vector<FieldError> out;
    (*schema)->Validate(v, "", &out);
    return out;
  };
  CHECK(errors({{"n", 3}, {"s", "abc"}, {"ios", "50%"}, {"maybe", nullptr}, {"tags", {"a"}}})
            .empty());
  auto e = errors({{"n", 9}});
  REQUIRE(e.size() == 1);
  CHECK(e[0].ToString() == "n: Invalid value: 9: n in body should be less than or equal to 5");
  e = errors({{"s", "abcd"}});
  REQUIRE(e.size() == 1);
  CHECK(e[0].ToString() == "s: Too long: may not be longer than 3");
  CHECK(errors({{"s", "AB"}}).size() == 1);
  CHECK(errors({{"ios", true}}).size() == 1);
  e = errors({{"tags", {"a", "a"}}});
  REQUIRE(e.size() == 1);
  CHECK(e[0].field == "tags[1]");
  CHECK(errors({{"tags", {"a", "b", "c"}}})[0].type == FieldError::Type::kTooMany);
}

}  // namespace
}  // namespace syncbus::kubesim::testing
