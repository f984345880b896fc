// HiveConfig's syncSetReapplyInterval, read from a simulated hub.
#include "publisher/hive_config.h"

#include <doctest/doctest.h>

#include "common/kube/client_impl.h"
#include "tests/fakes/common/http/in_process_transport.h"
#include "tests/support/hive_objects.h"
#include "tests/unit/kubesim/api_test_util.h"

using namespace syncbus;
using namespace syncbus::publisher;
using namespace std::chrono_literals;

TEST_CASE(
    "HiveConfig: syncSetReapplyInterval as Hive reads it, none without the CRD or the field") {
  auto sim = kubesim::testing::MakeSimulation({});
  auto transport = std::make_shared<fakes::InProcessTransport>(*sim);
  kube::ClusterConfig config;
  config.server = "http://sim.invalid";
  kube::ClientImpl hub(config, transport);

  auto none = ReadHiveReapplyInterval(hub);  // no such kind on this hub
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());

  Json crd = syncbus::testing::OpenCrd("hive.openshift.io", "HiveConfig", "hiveconfigs",
                                       /*namespaced=*/false);
  REQUIRE(sim->hub()
              .Call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
              .status == 201);
  auto no_object = ReadHiveReapplyInterval(hub);
  REQUIRE(no_object.ok());
  CHECK_FALSE(no_object->has_value());

  Json hc = {{"apiVersion", "hive.openshift.io/v1"},
             {"kind", "HiveConfig"},
             {"metadata", {{"name", "hive"}}},
             {"spec", {{"syncSetReapplyInterval", "1h30m"}}}};
  REQUIRE(sim->hub().Call("POST", "/apis/hive.openshift.io/v1/hiveconfigs", hc).status == 201);
  auto set = ReadHiveReapplyInterval(hub);
  REQUIRE(set.ok());
  CHECK(set->value() == 90min);

  hc = Json::parse(sim->hub().Call("GET", "/apis/hive.openshift.io/v1/hiveconfigs/hive").body);
  hc["spec"]["syncSetReapplyInterval"] = "soon";
  REQUIRE(sim->hub().Call("PUT", "/apis/hive.openshift.io/v1/hiveconfigs/hive", hc).status == 200);
  auto bad = ReadHiveReapplyInterval(hub);
  CHECK(bad.status().code() == Code::kInvalidArgument);
  CHECK(bad.status().message().find("syncSetReapplyInterval") != std::string::npos);
}
