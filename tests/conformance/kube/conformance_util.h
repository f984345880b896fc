// Small builders and checks shared by the conformance test files. Stateless; thread-safe.
#pragma once

#include <string>

#include <doctest/doctest.h>

#include "common/json.h"
#include "common/kube/client.h"
#include "tests/conformance/kube/server_under_test.h"

namespace syncbus::conformance {

inline Json ConfigMap(const std::string& ns, const std::string& name, const Json& data,
                      const Json& labels = Json::object()) {
  Json metadata = {{"name", name}, {"namespace", ns}};
  if (!labels.empty()) metadata["labels"] = labels;
  return {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", metadata}, {"data", data}};
}

inline std::string Rv(const Json& object) {
  return object["metadata"]["resourceVersion"].get<std::string>();
}

inline uint64_t RvNumber(const std::string& rv) {
  return std::stoull(rv);
}

inline std::string ConfigMapsPath(const std::string& ns) {
  return "/api/v1/namespaces/" + ns + "/configmaps";
}

// A metav1.Status failure body as both servers send it.
inline void CheckStatusBody(const RawResponse& response, int code, const std::string& reason) {
  INFO("body: " << response.text);
  CHECK(response.status == code);
  REQUIRE(response.body.is_object());
  CHECK(response.body.value("kind", "") == "Status");
  CHECK(response.body.value("apiVersion", "") == "v1");
  CHECK(response.body.value("status", "") == "Failure");
  CHECK(response.body.value("reason", "") == reason);
  CHECK(response.body.value("code", 0) == code);
  CHECK(response.body.contains("metadata"));
}

}  // namespace syncbus::conformance
