#include "consumer/rest_mapper.h"

#include <doctest/doctest.h>

#include "common/kube/client_impl.h"
#include "tests/unit/consumer/apply_test_fixture.h"

using namespace syncbus;
using namespace syncbus::consumer;
using namespace syncbus::consumer::testing;

namespace {

// A RestMapper over the simulated target cluster.
struct MapperFixture {
  static kube::ClusterConfig TargetConfig() {
    kube::ClusterConfig cc;
    cc.server = std::string("http://sim.invalid/clusters/") + kCluster;
    return cc;
  }
  ApplyFixture f;
  kube::ClientImpl client{TargetConfig(), f.transport};
  RestMapper mapper{client};
};

}  // namespace

TEST_CASE(
    "rest mapper: discovery is cached per group-version and refreshed once for an unknown kind") {
  MapperFixture m;
  ApplyFixture& f = m.f;
  RestMapper& mapper = m.mapper;

  uint64_t before = f.target().stats().requests;
  auto cm = mapper.Map("v1", "ConfigMap");
  REQUIRE(cm.ok());
  CHECK(cm->resource == "configmaps");
  CHECK(cm->namespaced);
  auto ns = mapper.Map("v1", "Namespace");
  REQUIRE(ns.ok());
  CHECK_FALSE(ns->namespaced);
  CHECK(f.target().stats().requests == before + 1);  // one discovery for v1

  auto unknown = mapper.Map("v1", "Nope");
  CHECK(unknown.status().code() == Code::kNotFound);
  CHECK(f.target().stats().requests == before + 2);  // refreshed once

  auto group = mapper.Map("apps/v1", "Deployment");
  REQUIRE(group.ok());
  CHECK(group->group == "apps");
  CHECK(group->resource == "deployments");
  CHECK(mapper.Map("example.com/v1", "Widget").status().code() == Code::kNotFound);
}

TEST_CASE(
    "rest mapper: Prefetch discovers every uncached group-version once and Map then needs no "
    "request") {
  MapperFixture m;
  ApplyFixture& f = m.f;
  RestMapper& mapper = m.mapper;

  REQUIRE(mapper.Map("v1", "ConfigMap").ok());
  uint64_t before = f.target().stats().requests;
  // v1 is cached already; example.com/v1 is not served (its failure is left for Map).
  mapper.Prefetch({"v1", "apps/v1", "rbac.authorization.k8s.io/v1", "example.com/v1", ""});
  CHECK(f.target().stats().requests == before + 3);

  before = f.target().stats().requests;
  CHECK(mapper.Map("apps/v1", "Deployment").ok());
  CHECK(mapper.Map("rbac.authorization.k8s.io/v1", "ClusterRole").ok());
  CHECK(f.target().stats().requests == before);
  CHECK(mapper.Map("example.com/v1", "Widget").status().code() == Code::kNotFound);
  CHECK(f.target().stats().requests == before + 1);  // the failed group-version is asked again
}

TEST_CASE(
    "rest mapper: Prefetch says whether the cluster answered: an error status is an answer, a "
    "dropped connection is not") {
  CHECK(Answered(Unavailable("503").WithHttpStatus(503)));
  CHECK(Answered(NotFound("no such group-version")));
  CHECK_FALSE(Answered(Unavailable("connection refused")));
  CHECK_FALSE(Answered(Status(Code::kTimeout, "timed out")));

  MapperFixture m;
  kubesim::FaultSpec errors;
  errors.error_rate = 1;  // every request answered 500 or 503
  REQUIRE(m.f.sim->faults().Set(kCluster, errors).ok());
  CHECK(m.mapper.Prefetch({"v1"}) == std::optional<bool>(true));
  kubesim::FaultSpec dropped;
  dropped.drop_rate = 1;  // every connection dropped without an answer
  REQUIRE(m.f.sim->faults().Set(kCluster, dropped).ok());
  CHECK(m.mapper.Prefetch({"apps/v1"}) == std::optional<bool>(false));
  REQUIRE(m.f.sim->faults().Set(kCluster, {}).ok());
  REQUIRE(m.mapper.Map("v1", "ConfigMap").ok());
  CHECK(m.mapper.Prefetch({"v1"}) == std::nullopt);  // cached: nothing asked
}
