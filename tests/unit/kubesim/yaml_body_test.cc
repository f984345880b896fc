// The simulator reads YAML request bodies as the apiserver does.
#include <doctest/doctest.h>

#include "tests/unit/kubesim/api_test_util.h"

namespace syncbus::kubesim::testing {
namespace {

TEST_CASE("objects can be created from YAML bodies") {
  Fixture f;
  auto r = Raw(
      *f.server, "POST", CmPath("default"),
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  enabled: \"true\"\n",
      "application/yaml");
  REQUIRE_MESSAGE(r.status == 201, r.body);
  CHECK(Body(r)["data"]["enabled"] == "true");
  // YAML 1.1: an unquoted y is a boolean, which no name can be.
  auto norway = Raw(*f.server, "POST", CmPath("default"),
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\n", "application/yaml");
  CHECK(norway.status == 400);
  CHECK(Raw(*f.server, "POST", CmPath("default"), "{}", "application/vnd.kubernetes.protobuf")
            .status == 415);
}

}  // namespace
}  // namespace syncbus::kubesim::testing
