// Conformance: create, read, update, delete, their error bodies, optimistic concurrency, delete
// preconditions and Leases — the same assertions against the simulator and kube-apiserver.
#include <doctest/doctest.h>

#include "common/kube/client_impl.h"
#include "tests/conformance/kube/conformance_util.h"

namespace syncbus::conformance {
namespace {

using kube::Collection;
using kube::Object;
namespace resources = kube::resources;

TEST_CASE("create, get, update and delete, with the error bodies of each failure") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("crud");
  const kube::ObjectRef ref = Object(resources::kConfigMaps, ns, "a");

  Result<Json> created =
      client->Create(Collection(resources::kConfigMaps, ns), ConfigMap(ns, "a", {{"k", "1"}}));
  REQUIRE_MESSAGE(created.ok(), created.status().ToString());
  CHECK((*created)["data"]["k"] == "1");
  CHECK((*created)["metadata"]["uid"].get<std::string>().size() == 36);
  CHECK((*created)["metadata"].contains("creationTimestamp"));
  CHECK_FALSE(Rv(*created).empty());

  RawResponse again = server.Raw("POST", ConfigMapsPath(ns), ConfigMap(ns, "a", {}).dump());
  CheckStatusBody(again, 409, "AlreadyExists");
  CHECK(again.body["message"] == "configmaps \"a\" already exists");
  CHECK(again.body["details"] == Json{{"name", "a"}, {"kind", "configmaps"}});

  RawResponse missing = server.Raw("GET", ConfigMapsPath(ns) + "/missing");
  CheckStatusBody(missing, 404, "NotFound");
  CHECK(missing.body["message"] == "configmaps \"missing\" not found");
  CHECK(missing.body["details"] == Json{{"name", "missing"}, {"kind", "configmaps"}});

  Result<Json> got = client->Get(ref);
  REQUIRE(got.ok());
  CHECK(Rv(*got) == Rv(*created));
  Json update = *got;
  update["data"]["k"] = "2";
  Result<Json> updated = client->Update(ref, update);
  REQUIRE(updated.ok());
  CHECK(RvNumber(Rv(*updated)) > RvNumber(Rv(*got)));

  // `update` still carries the old resourceVersion.
  RawResponse stale = server.Raw("PUT", ConfigMapsPath(ns) + "/a", update.dump());
  CheckStatusBody(stale, 409, "Conflict");
  CHECK(stale.body["message"] ==
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please "
        "apply your changes to the latest version and try again");
  CHECK(client->Update(ref, update).status().code() == Code::kConflict);

  // Without a resourceVersion an update is unconditional.
  update["metadata"].erase("resourceVersion");
  update["data"]["k"] = "3";
  Result<Json> forced = client->Update(ref, update);
  REQUIRE(forced.ok());
  CHECK((*forced)["data"]["k"] == "3");

  CHECK(client->Delete(ref, {}).ok());
  CHECK(client->Get(ref).status().code() == Code::kNotFound);
  CHECK(client->Delete(ref, {}).code() == Code::kNotFound);
}

TEST_CASE("an object in a namespace that does not exist is NotFound naming the namespace") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  RawResponse response = server.Raw("POST", ConfigMapsPath("no-such-namespace"),
                                    ConfigMap("no-such-namespace", "a", {}).dump());
  CheckStatusBody(response, 404, "NotFound");
  CHECK(response.body["message"] == "namespaces \"no-such-namespace\" not found");
  CHECK(response.body["details"] == Json{{"name", "no-such-namespace"}, {"kind", "namespaces"}});
}

TEST_CASE("a wrong bearer token is 401 Unauthorized") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.WithToken("not-a-token");
  Result<kube::ObjectList> list = client->List(Collection(resources::kNamespaces), {});
  CHECK(list.status().code() == Code::kUnauthorized);
  CHECK(list.status().http_status() == 401);
}

TEST_CASE("an invalid name is 422 Invalid with the field's cause") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  const std::string ns = server.NewNamespace("invalid");
  RawResponse response =
      server.Raw("POST", ConfigMapsPath(ns), ConfigMap(ns, "Bad_Name", {}).dump());
  CheckStatusBody(response, 422, "Invalid");
  CHECK(response.body["details"]["name"] == "Bad_Name");
  CHECK(response.body["details"]["kind"] == "ConfigMap");
  REQUIRE(response.body["details"]["causes"].size() == 1);
  CHECK(response.body["details"]["causes"][0]["field"] == "metadata.name");
  CHECK(response.body["details"]["causes"][0]["reason"] == "FieldValueInvalid");
  CHECK(response.body["message"].get<std::string>().starts_with(
      "ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase "
      "RFC 1123 subdomain"));
  Result<Json> made =
      server.Admin()->Create(Collection(resources::kConfigMaps, ns), ConfigMap(ns, "Bad_Name", {}));
  CHECK(made.status().code() == Code::kInvalidArgument);
}

TEST_CASE("an embedded resource's metadata is validated like an object's own") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  const std::string ns = server.NewNamespace("embedded");
  // Hive's SyncSet marks spec.resources[] as x-kubernetes-embedded-resource.
  Json set = {{"apiVersion", "hive.openshift.io/v1"},
              {"kind", "SyncSet"},
              {"metadata", {{"name", "s"}, {"namespace", ns}}},
              {"spec",
               {{"clusterDeploymentRefs", {{{"name", "c"}}}},
                {"resources", {ConfigMap("Not_A_Namespace", "{{ name }}", {})}}}}};
  RawResponse response =
      server.Raw("POST", "/apis/hive.openshift.io/v1/namespaces/" + ns + "/syncsets", set.dump());
  CheckStatusBody(response, 422, "Invalid");
  CHECK(response.body["details"]["name"] == "s");
  CHECK(response.body["details"]["group"] == "hive.openshift.io");
  CHECK(response.body["details"]["kind"] == "SyncSet");
  // Its namespace must be a DNS label; its name is not checked (templates may fill it in).
  REQUIRE(response.body["details"]["causes"].size() == 1);
  const Json& cause = response.body["details"]["causes"][0];
  CHECK(cause["field"] == "spec.resources[0].metadata.namespace");
  CHECK(cause["reason"] == "FieldValueInvalid");
  CHECK(cause["message"].get<std::string>().starts_with(
      "Invalid value: \"Not_A_Namespace\": a lowercase RFC 1123 label must consist of"));
  CHECK(response.body["message"].get<std::string>().starts_with(
      "SyncSet.hive.openshift.io \"s\" is invalid: spec.resources[0].metadata.namespace: "
      "Invalid value: \"Not_A_Namespace\""));

  // Without apiVersion and kind an embedded resource is refused too.
  set["spec"]["resources"] = Json::array({{{"metadata", {{"name", "x"}}}}});
  RawResponse bare =
      server.Raw("POST", "/apis/hive.openshift.io/v1/namespaces/" + ns + "/syncsets", set.dump());
  CheckStatusBody(bare, 422, "Invalid");
  CHECK(bare.body["message"] ==
        "SyncSet.hive.openshift.io \"s\" is invalid: [spec.resources[0].apiVersion: Required "
        "value: must not be empty, spec.resources[0].kind: Required value: must not be empty]");
  REQUIRE(bare.body["details"]["causes"].size() == 2);
  CHECK(bare.body["details"]["causes"][0]["field"] == "spec.resources[0].apiVersion");
  CHECK(bare.body["details"]["causes"][1]["field"] == "spec.resources[0].kind");
  for (const Json& c : bare.body["details"]["causes"]) {
    CHECK(c["reason"] == "FieldValueRequired");
    CHECK(c["message"] == "Required value: must not be empty");
  }
}

TEST_CASE(
    "a custom resource is never updated unconditionally: no resourceVersion is 422, status too") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  const std::string ns = server.NewNamespace("cr-update");
  const std::string path =
      "/apis/hiveinternal.openshift.io/v1alpha1/namespaces/" + ns + "/clustersyncs";
  Json cs = {{"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
             {"kind", "ClusterSync"},
             {"metadata", {{"name", "c"}, {"namespace", ns}}},
             {"spec", Json::object()}};
  RawResponse created = server.Raw("POST", path, cs.dump());
  REQUIRE(created.status == 201);
  const std::string message =
      "clustersyncs.hiveinternal.openshift.io \"c\" is invalid: metadata.resourceVersion: Invalid "
      "value: 0x0: "
      "must be specified for an update";
  for (const char* sub : {"", "/status"}) {
    INFO("PUT " << path << "/c" << sub);
    RawResponse unconditional = server.Raw("PUT", path + "/c" + std::string(sub), cs.dump());
    CheckStatusBody(unconditional, 422, "Invalid");
    CHECK(unconditional.body["message"] == message);
    CHECK(unconditional.body["details"]["causes"] ==
          Json::array({{{"reason", "FieldValueInvalid"},
                        {"message", "Invalid value: 0x0: must be specified for an update"},
                        {"field", "metadata.resourceVersion"}}}));
  }
  // With it, the update goes through.
  Json with_rv = cs;
  with_rv["metadata"]["resourceVersion"] = created.body["metadata"]["resourceVersion"];
  CHECK(server.Raw("PUT", path + "/c", with_rv.dump()).status == 200);
}

TEST_CASE("delete preconditions: a wrong uid or resourceVersion is a Conflict") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("precond");
  const kube::ObjectRef ref = Object(resources::kConfigMaps, ns, "p");
  Result<Json> created =
      client->Create(Collection(resources::kConfigMaps, ns), ConfigMap(ns, "p", {{"k", "v"}}));
  REQUIRE(created.ok());

  kube::DeleteOptions wrong_uid;
  wrong_uid.precondition_uid = "00000000-0000-0000-0000-000000000000";
  Status refused = client->Delete(ref, wrong_uid);
  CHECK(refused.code() == Code::kConflict);
  CHECK(refused.http_status() == 409);

  kube::DeleteOptions wrong_rv;
  wrong_rv.precondition_resource_version = "1";
  CHECK(client->Delete(ref, wrong_rv).code() == Code::kConflict);
  CHECK(client->Get(ref).ok());

  kube::DeleteOptions right;
  right.precondition_uid = (*created)["metadata"]["uid"];
  right.precondition_resource_version = Rv(*created);
  CHECK(client->Delete(ref, right).ok());
  CHECK(client->Get(ref).status().code() == Code::kNotFound);
}

TEST_CASE("a Lease is taken, renewed with its resourceVersion, and a stale renewal conflicts") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("lease");
  const kube::ObjectRef ref = Object(resources::kLeases, ns, "leader");
  Json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", {{"name", "leader"}, {"namespace", ns}}},
                {"spec",
                 {{"holderIdentity", "replica-a"},
                  {"leaseDurationSeconds", 15},
                  {"acquireTime", "2026-01-02T03:04:05.123456Z"},
                  {"renewTime", "2026-01-02T03:04:05.123456Z"},
                  {"leaseTransitions", 0}}}};
  Result<Json> taken = client->Create(Collection(resources::kLeases, ns), lease);
  REQUIRE_MESSAGE(taken.ok(), taken.status().ToString());
  CHECK((*taken)["spec"]["renewTime"] == "2026-01-02T03:04:05.123456Z");
  CHECK(client->Create(Collection(resources::kLeases, ns), lease).status().code() ==
        Code::kAlreadyExists);

  Json renewed = *taken;
  renewed["spec"]["renewTime"] = "2026-01-02T03:04:10.000000Z";
  Result<Json> first = client->Update(ref, renewed);
  REQUIRE(first.ok());
  CHECK((*first)["spec"]["renewTime"] == "2026-01-02T03:04:10.000000Z");

  // Another replica that read the Lease before the renewal cannot take it over.
  Json takeover = *taken;
  takeover["spec"]["holderIdentity"] = "replica-b";
  takeover["spec"]["leaseTransitions"] = 1;
  CHECK(client->Update(ref, takeover).status().code() == Code::kConflict);
  Result<Json> now = client->Get(ref);
  REQUIRE(now.ok());
  CHECK((*now)["spec"]["holderIdentity"] == "replica-a");

  // A bad timestamp is refused by validation.
  Json bad = *now;
  bad["spec"]["renewTime"] = "yesterday";
  CHECK(client->Update(ref, bad).status().code() == Code::kInvalidArgument);
}

}  // namespace
}  // namespace syncbus::conformance
