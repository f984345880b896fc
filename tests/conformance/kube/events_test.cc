// Conformance: core/v1 Events as the consumer writes them (client-go's recorder does the same): a
// create, a strategic merge patch of a repeat's count, the field selector `kubectl describe`
// lists an object's Events with, and what the server refuses.
#include <doctest/doctest.h>

#include "common/kube/client_impl.h"
#include "tests/conformance/kube/conformance_util.h"

namespace syncbus::conformance {
namespace {

using kube::Collection;
using kube::Object;
namespace resources = kube::resources;

Json ClusterSyncEvent(const std::string& ns, const std::string& name,
                      const std::string& object_ns) {
  return {{"apiVersion", "v1"},
          {"kind", "Event"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"involvedObject",
           {{"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
            {"kind", "ClusterSync"},
            {"namespace", object_ns},
            {"name", "cluster-1"},
            {"uid", "5e1f0000-0000-4000-8000-000000000001"}}},
          {"type", "Warning"},
          {"reason", "SyncFailed"},
          {"message", "SyncSet a: resources[0] ConfigMap default/x: boom"},
          {"source", {{"component", "syncbus-consumer"}, {"host", "consumer-1"}}},
          {"count", 1},
          {"firstTimestamp", "2026-01-02T03:04:05Z"},
          {"lastTimestamp", "2026-01-02T03:04:05Z"}};
}

TEST_CASE("an Event is created, its repeat patched, and kubectl's field selector finds it") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  std::unique_ptr<kube::ClientImpl> client = server.Admin();
  const std::string ns = server.NewNamespace("events");
  Result<Json> created = client->Create(Collection(resources::kEvents, ns),
                                        ClusterSyncEvent(ns, "cluster-1.187a1b2c3d4e5f60", ns));
  REQUIRE_MESSAGE(created.ok(), created.status().ToString());
  CHECK((*created)["count"] == 1);
  CHECK((*created)["reportingComponent"] == "");
  CHECK((*created)["reportingInstance"] == "");
  CHECK((*created)["involvedObject"]["kind"] == "ClusterSync");

  const kube::ObjectRef ref = Object(resources::kEvents, ns, "cluster-1.187a1b2c3d4e5f60");
  Result<Json> patched = client->Patch(
      ref, kube::PatchType::kStrategicMerge,
      R"({"count":2,"lastTimestamp":"2026-01-02T03:09:05Z","message":"SyncSet a: resources[0] ConfigMap default/x: boom"})");
  REQUIRE_MESSAGE(patched.ok(), patched.status().ToString());
  CHECK((*patched)["count"] == 2);
  CHECK((*patched)["firstTimestamp"] == "2026-01-02T03:04:05Z");
  CHECK((*patched)["lastTimestamp"] == "2026-01-02T03:09:05Z");
  CHECK(RvNumber(Rv(*patched)) > RvNumber(Rv(*created)));

  // kubectl describe: the Events whose involvedObject is the described object.
  kube::ListOptions options;
  options.field_selector =
      "involvedObject.name=cluster-1,involvedObject.namespace=" + ns +
      ",involvedObject.kind=ClusterSync,involvedObject.uid=5e1f0000-0000-4000-8000-000000000001";
  Result<kube::ObjectList> listed = client->List(Collection(resources::kEvents, ns), options);
  REQUIRE_MESSAGE(listed.ok(), listed.status().ToString());
  REQUIRE(listed->items.size() == 1);
  CHECK(listed->items[0]["metadata"]["name"] == "cluster-1.187a1b2c3d4e5f60");
  options.field_selector = "involvedObject.name=cluster-1,involvedObject.uid=another";
  listed = client->List(Collection(resources::kEvents, ns), options);
  REQUIRE(listed.ok());
  CHECK(listed->items.empty());
  options.field_selector = "reason=SyncFailed,type=Warning";
  listed = client->List(Collection(resources::kEvents, ns), options);
  REQUIRE(listed.ok());
  CHECK(listed->items.size() == 1);

  // A repeat of an Event the server no longer has (its TTL passed): 404, the recorder creates it.
  Result<Json> gone = client->Patch(Object(resources::kEvents, ns, "cluster-1.0"),
                                    kube::PatchType::kStrategicMerge, R"({"count":3})");
  CHECK(gone.status().code() == Code::kNotFound);
}

TEST_CASE("an Event about an object of another namespace is refused") {
  std::unique_ptr<ServerUnderTest> started = ServerUnderTest::Start();
  ServerUnderTest& server = *started;
  const std::string ns = server.NewNamespace("events-elsewhere");
  RawResponse refused = server.Raw("POST", "/api/v1/namespaces/" + ns + "/events",
                                   ClusterSyncEvent(ns, "cluster-1.1", "another-namespace").dump());
  CheckStatusBody(refused, 422, "Invalid");
  CHECK(refused.body["message"] ==
        "Event \"cluster-1.1\" is invalid: involvedObject.namespace: Invalid value: "
        "\"another-namespace\": does not match event.namespace");
}

}  // namespace
}  // namespace syncbus::conformance
