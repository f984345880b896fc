// Conformance: server-side apply (ownership, conflicts, force, removal of fields no longer
// applied), merge / JSON / strategic merge patches, and the status subresource of a custom
// resource.
#include <doctest/doctest.h>

#include "common/kube/client_impl.h"
#include "tests/conformance/kube/conformance_util.h"

namespace syncbus::conformance {
namespace {

using kube::Collection;
using kube::Object;
namespace resources = kube::resources;

// The fields `manager` owns through Apply in `object`, as the fieldsV1 JSON.
Json AppliedFields(const Json& object, const std::string& manager) {
  for (const Json& entry : object["metadata"].value("managedFields", Json::array())) {
    if (entry.value("manager", "") == manager && entry.value("operation", "") == "Apply") {
      return entry.value("fieldsV1", Json::object());
    }
  }
  return nullptr;
}

TEST_CASE("server-side apply: ownership, conflicts, force and fields no longer applied") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("apply");
  const kube::ObjectRef ref = Object(resources::kConfigMaps, ns, "s");

  Result<Json> created =
      client->Apply(ref, ConfigMap(ns, "s", {{"a", "1"}, {"b", "1"}}), {"alpha", /*force=*/false});
  REQUIRE_MESSAGE(created.ok(), created.status().ToString());
  CHECK((*created)["data"] == Json{{"a", "1"}, {"b", "1"}});
  CHECK(AppliedFields(*created, "alpha") ==
        Json{{"f:data", {{"f:a", Json::object()}, {"f:b", Json::object()}}}});

  // Applying the same value again is no change at all.
  Result<Json> same =
      client->Apply(ref, ConfigMap(ns, "s", {{"a", "1"}, {"b", "1"}}), {"alpha", false});
  REQUIRE(same.ok());
  CHECK(Rv(*same) == Rv(*created));

  const std::string beta_body = ConfigMap(ns, "s", {{"a", "2"}}).dump();
  RawResponse conflict = server.Raw("PATCH", ConfigMapsPath(ns) + "/s?fieldManager=beta", beta_body,
                                    "application/apply-patch+yaml");
  CheckStatusBody(conflict, 409, "Conflict");
  CHECK(conflict.body["message"] ==
        "Apply failed with 1 conflict: conflict with \"alpha\": .data.a");
  REQUIRE(conflict.body["details"]["causes"].size() == 1);
  CHECK(conflict.body["details"]["causes"][0] == Json{{"reason", "FieldManagerConflict"},
                                                      {"message", "conflict with \"alpha\""},
                                                      {"field", ".data.a"}});
  CHECK(client->Apply(ref, ConfigMap(ns, "s", {{"a", "2"}}), {"beta", false}).status().code() ==
        Code::kConflict);

  Result<Json> forced = client->Apply(ref, ConfigMap(ns, "s", {{"a", "2"}}), {"beta", true});
  REQUIRE(forced.ok());
  CHECK((*forced)["data"] == Json{{"a", "2"}, {"b", "1"}});
  CHECK(AppliedFields(*forced, "alpha") == Json{{"f:data", {{"f:b", Json::object()}}}});

  // alpha stops applying b: b goes (alpha was its only owner); a stays (beta owns it).
  Result<Json> dropped = client->Apply(ref, ConfigMap(ns, "s", Json::object()), {"alpha", false});
  REQUIRE(dropped.ok());
  CHECK((*dropped)["data"] == Json{{"a", "2"}});

  RawResponse no_manager =
      server.Raw("PATCH", ConfigMapsPath(ns) + "/s", beta_body, "application/apply-patch+yaml");
  CheckStatusBody(no_manager, 422, "Invalid");
}

TEST_CASE("merge, JSON and strategic merge patches") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("patch");
  const kube::ObjectRef ref = Object(resources::kConfigMaps, ns, "p");
  REQUIRE(client
              ->Create(Collection(resources::kConfigMaps, ns),
                       ConfigMap(ns, "p", {{"a", "1"}, {"z", "1"}}, {{"keep", "yes"}}))
              .ok());

  Result<Json> merged =
      client->Patch(ref, kube::PatchType::kMerge, R"({"data":{"x":"1","a":null}})");
  REQUIRE(merged.ok());
  CHECK((*merged)["data"] == Json{{"x", "1"}, {"z", "1"}});

  Result<Json> json_patched = client->Patch(ref, kube::PatchType::kJson, R"([
      {"op":"test","path":"/data/x","value":"1"},
      {"op":"replace","path":"/data/x","value":"2"},
      {"op":"add","path":"/data/y","value":"3"},
      {"op":"remove","path":"/data/z"}])");
  REQUIRE_MESSAGE(json_patched.ok(), json_patched.status().ToString());
  CHECK((*json_patched)["data"] == Json{{"x", "2"}, {"y", "3"}});

  RawResponse failed_test =
      server.Raw("PATCH", ConfigMapsPath(ns) + "/p",
                 R"([{"op":"test","path":"/data/x","value":"1"}])", "application/json-patch+json");
  CheckStatusBody(failed_test, 422, "Invalid");
  RawResponse missing_path =
      server.Raw("PATCH", ConfigMapsPath(ns) + "/p", R"([{"op":"remove","path":"/data/nope"}])",
                 "application/json-patch+json");
  CheckStatusBody(missing_path, 422, "Invalid");

  Result<Json> strategic = client->Patch(ref, kube::PatchType::kStrategicMerge,
                                         R"({"metadata":{"labels":{"added":"1"}}})");
  REQUIRE(strategic.ok());
  CHECK((*strategic)["metadata"]["labels"] == Json{{"keep", "yes"}, {"added", "1"}});

  CHECK(client->Patch(Object(resources::kConfigMaps, ns, "absent"), kube::PatchType::kMerge, "{}")
            .status()
            .code() == Code::kNotFound);
}

TEST_CASE("a custom resource's status subresource is written apart from the object") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("status");
  const Json cluster_sync = {{"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
                             {"kind", "ClusterSync"},
                             {"metadata", {{"name", "c1"}, {"namespace", ns}}},
                             {"spec", Json::object()},
                             {"status", {{"controlledByReplica", 3}}}};
  Result<Json> created = client->Create(Collection(resources::kClusterSyncs, ns), cluster_sync);
  REQUIRE_MESSAGE(created.ok(), created.status().ToString());
  CHECK_FALSE(created->contains("status"));  // status is not set through the main resource
  CHECK((*created)["metadata"]["generation"] == 1);

  Json with_status = *created;
  with_status["status"] = {{"syncSets",
                            {{{"name", "s1"},
                              {"observedGeneration", 4},
                              {"result", "Success"},
                              {"lastTransitionTime", "2026-01-02T03:04:05Z"}}}}};
  with_status["metadata"]["labels"] = {{"ignored", "yes"}};
  Result<Json> written =
      client->Update(kube::StatusOf(resources::kClusterSyncs, ns, "c1"), with_status);
  REQUIRE_MESSAGE(written.ok(), written.status().ToString());
  CHECK((*written)["status"]["syncSets"][0]["result"] == "Success");
  CHECK_FALSE((*written)["metadata"].contains("labels"));  // only status changes through /status
  CHECK((*written)["metadata"]["generation"] == 1);
  CHECK(RvNumber(Rv(*written)) > RvNumber(Rv(*created)));

  // A stale resourceVersion on /status conflicts like any update.
  CHECK(client->Update(kube::StatusOf(resources::kClusterSyncs, ns, "c1"), with_status)
            .status()
            .code() == Code::kConflict);

  // The status schema is enforced: result must be Success or Failure.
  Json bad = *written;
  bad["status"]["syncSets"][0]["result"] = "Maybe";
  RawResponse invalid = server.Raw(
      "PUT",
      "/apis/hiveinternal.openshift.io/v1alpha1/namespaces/" + ns + "/clustersyncs/c1/status",
      bad.dump());
  CheckStatusBody(invalid, 422, "Invalid");

  // Through the main resource the status is left as it was.
  Json main = *written;
  main["status"] = Json::object();
  main["metadata"]["labels"] = {{"kept", "yes"}};
  Result<Json> updated = client->Update(Object(resources::kClusterSyncs, ns, "c1"), main);
  REQUIRE(updated.ok());
  CHECK((*updated)["status"]["syncSets"][0]["name"] == "s1");
  CHECK((*updated)["metadata"]["labels"] == Json{{"kept", "yes"}});

  RawResponse strategic = server.Raw(
      "PATCH", "/apis/hiveinternal.openshift.io/v1alpha1/namespaces/" + ns + "/clustersyncs/c1",
      R"({"metadata":{"labels":{"a":"b"}}})", "application/strategic-merge-patch+json");
  CHECK(strategic.status == 415);
  CHECK(strategic.body.value("reason", "") == "UnsupportedMediaType");
}

}  // namespace
}  // namespace syncbus::conformance
