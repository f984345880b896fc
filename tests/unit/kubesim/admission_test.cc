// The simulator's stand-ins for what a real API server does that syncbus's tests rely on: a
// validating webhook whose endpoint cannot be called fails the request as kube-apiserver fails it,
// and a write that carries managedFields sets them.
#include <doctest/doctest.h>

#include "tests/unit/kubesim/api_test_util.h"

namespace syncbus::kubesim::testing {
namespace {

Json Webhook(const std::string& policy) {
  return {{"apiVersion", "admissionregistration.k8s.io/v1"},
          {"kind", "ValidatingWebhookConfiguration"},
          {"metadata", {{"name", "refuse"}}},
          {"webhooks", Json::array({{{"name", "refuse.example.com"},
                                     {"clientConfig", {{"url", "https://127.0.0.1:1/x"}}},
                                     {"rules", Json::array({{{"operations", {"DELETE"}},
                                                             {"apiGroups", {""}},
                                                             {"apiVersions", {"v1"}},
                                                             {"resources", {"configmaps"}}}})},
                                     {"objectSelector", {{"matchLabels", {{"refuse", "yes"}}}}},
                                     {"failurePolicy", policy},
                                     {"sideEffects", "None"},
                                     {"admissionReviewVersions", {"v1"}},
                                     {"timeoutSeconds", 2}}})}};
}

TEST_CASE(
    "a validating webhook that cannot be called fails the deletions it selects, as kube-apiserver "
    "does") {
  Fixture f;
  ApiServer& s = *f.server;
  REQUIRE(s.Call("POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                 Webhook("Fail"))
              .status == 201);
  REQUIRE(s.Call("POST", CmPath("default"),
                 ConfigMap("guarded", "default", Json::object(), {{"refuse", "yes"}}))
              .status == 201);
  REQUIRE(s.Call("POST", CmPath("default"), ConfigMap("free", "default", Json::object())).status ==
          201);
  ApiResponse refused = s.Call("DELETE", CmPath("default", "guarded"));
  CHECK(refused.status == 500);
  Json body = Body(refused);
  CHECK(body["reason"] == "InternalError");
  CHECK(body["message"] ==
        "Internal error occurred: failed calling webhook \"refuse.example.com\": failed to call "
        "webhook: Post "
        "\"https://127.0.0.1:1/x?timeout=2s\": dial tcp 127.0.0.1:1: connect: connection refused");
  CHECK(s.Call("GET", CmPath("default", "guarded")).status == 200);
  CHECK(s.Call("DELETE", CmPath("default", "free")).status == 200);
  // failurePolicy Ignore lets it through.
  Json ignore = Webhook("Ignore");
  ignore["metadata"]["resourceVersion"] = Body(
      s.Call("GET", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/refuse"))
      ["metadata"]["resourceVersion"];
  REQUIRE(s.Call("PUT",
                 "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/refuse",
                 ignore)
              .status == 200);
  CHECK(s.Call("DELETE", CmPath("default", "guarded")).status == 200);
}

TEST_CASE("a write that carries managedFields sets them, an empty list leaves them") {
  Fixture f;
  ApiServer& s = *f.server;
  REQUIRE(Raw(s, "POST", CmPath("default"), ConfigMap("cm", "default", {{"a", "1"}}).dump(),
              "application/json", "fieldManager=first")
              .status == 201);
  Json cm = Body(s.Call("GET", CmPath("default", "cm")));
  REQUIRE(cm["metadata"]["managedFields"].size() == 1);
  Json entry = cm["metadata"]["managedFields"][0];
  entry["manager"] = "renamed";
  Json patch = Json::array(
      {{{"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", Rv(cm)}},
       {{"op", "replace"}, {"path", "/metadata/managedFields"}, {"value", Json::array({entry})}}});
  ApiResponse patched =
      Raw(s, "PATCH", CmPath("default", "cm"), patch.dump(), "application/json-patch+json");
  REQUIRE_MESSAGE(patched.status == 200, patched.body);
  Json after = Body(patched);
  REQUIRE(after["metadata"]["managedFields"].size() == 1);
  CHECK(after["metadata"]["managedFields"][0]["manager"] == "renamed");
  Json empty = Json::array(
      {{{"op", "replace"}, {"path", "/metadata/managedFields"}, {"value", Json::array()}}});
  Json kept =
      Body(Raw(s, "PATCH", CmPath("default", "cm"), empty.dump(), "application/json-patch+json"));
  CHECK(kept["metadata"]["managedFields"][0]["manager"] == "renamed");
}

}  // namespace
}  // namespace syncbus::kubesim::testing
