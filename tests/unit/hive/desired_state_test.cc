#include "common/hive/desired_state.h"

#include <doctest/doctest.h>

using namespace syncbus;
using namespace syncbus::hive;

namespace {

ClusterDeployment Cd(const std::string& name, Labels labels = {}) {
  ClusterDeployment cd;
  cd.meta.name = name;
  cd.meta.ns = name;
  cd.meta.uid = "uid-" + name;
  cd.meta.labels = std::move(labels);
  cd.installed = true;
  Condition reachable;
  reachable.type = "Unreachable";
  reachable.status = "False";
  cd.conditions.push_back(reachable);
  return cd;
}

SyncSet Ss(const std::string& ns, const std::string& name, std::vector<std::string> refs,
           int64_t gen = 1) {
  SyncSet s;
  s.meta.name = name;
  s.meta.ns = ns;
  s.meta.generation = gen;
  s.cluster_deployment_refs = std::move(refs);
  return s;
}

SelectorSyncSet Sss(const std::string& name, const char* selector, int64_t gen = 1) {
  SelectorSyncSet s;
  s.meta.name = name;
  s.meta.generation = gen;
  s.selector = *LabelSelector::FromJson(Json::parse(selector));
  return s;
}

}  // namespace

TEST_CASE("desired sets: references, selectors, order") {
  auto cd = Cd("c1", {{"region", "eu"}});
  auto a = Ss("c1", "b-set", {"c1"}), b = Ss("c1", "a-set", {"c1", "c2"}),
       other = Ss("c1", "z", {"c2"});
  auto wrong_ns = Ss("c2", "a-set", {"c1"});
  auto eu = Sss("eu", R"({"matchLabels":{"region":"eu"}})"),
       us = Sss("us", R"({"matchLabels":{"region":"us"}})");
  auto all = Sss("all", "{}");
  auto d = ComputeDesired(cd, {&a, &b, &other, &wrong_ns}, {&eu, &us, &all});
  std::vector<DesiredSet> expect = {{SetKind::kSyncSet, "a-set", 1},
                                    {SetKind::kSyncSet, "b-set", 1},
                                    {SetKind::kSelectorSyncSet, "all", 1},
                                    {SetKind::kSelectorSyncSet, "eu", 1}};
  CHECK(d.sets == expect);
  CHECK(d.skip_reason.empty());
}

TEST_CASE("revision is stable and moves with every input that matters") {
  auto cd = Cd("c1", {{"region", "eu"}});
  auto a = Ss("c1", "a", {"c1"});
  auto eu = Sss("eu", R"({"matchLabels":{"region":"eu"}})");
  std::string base = ComputeDesired(cd, {&a}, {&eu}).revision;
  CHECK(base.size() == 32);
  CHECK(ComputeDesired(cd, {&a}, {&eu}).revision == base);

  auto a2 = Ss("c1", "a", {"c1"}, 2);
  CHECK(ComputeDesired(cd, {&a2}, {&eu}).revision != base);  // generation
  CHECK(ComputeDesired(cd, {}, {&eu}).revision != base);     // set removed
  auto relabeled = Cd("c1", {{"region", "us"}});
  CHECK(ComputeDesired(relabeled, {&a}, {&eu}).revision != base);  // selector stops matching
  auto recreated = cd;
  recreated.meta.uid = "other";
  CHECK(ComputeDesired(recreated, {&a}, {&eu}).revision != base);            // cluster re-created
  CHECK(ComputeDesired(cd, {&a}, {&eu}, {{"ns/s", "7"}}).revision != base);  // secret changed
  CHECK(ComputeDesired(cd, {&a}, {&eu}, {{"ns/s", "7"}}).revision ==
        ComputeDesired(cd, {&a}, {&eu}, {{"ns/s", "7"}}).revision);
}

TEST_CASE("sets being deleted are still desired (as in Hive), skip reason carried") {
  auto cd = Cd("c1");
  cd.meta.annotations[kSyncSetPauseAnnotation] = "true";
  auto a = Ss("c1", "a", {"c1"});
  a.meta.deleting = true;
  auto d = ComputeDesired(cd, {&a}, {});
  CHECK(d.sets.size() == 1);
  CHECK(d.skip_reason == "paused");
}
