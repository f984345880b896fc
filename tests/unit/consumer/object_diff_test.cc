#include "consumer/object_diff.h"

#include <doctest/doctest.h>

using namespace syncbus;
using namespace syncbus::consumer;

namespace {

Json Cm(const Json& data) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", "a"}, {"namespace", "default"}}},
          {"data", data}};
}

}  // namespace

TEST_CASE("object diff: one line per changed leaf, compact JSON, <none> for an absent side") {
  Json before = Cm({{"k", "v"}, {"gone", "x"}, {"same", "s"}});
  Json after = Cm({{"k", "w"}, {"new", 1}, {"same", "s"}});
  CHECK(ObjectDiff(before, after) == std::vector<std::string>{R"(data.gone: "x" -> <none>)",
                                                              R"(data.k: "v" -> "w")",
                                                              R"(data.new: <none> -> 1)"});
  CHECK(ObjectDiff(before, before).empty());
}

TEST_CASE("object diff: list elements by index, keys that are not words in brackets") {
  Json before = Cm({});
  before["metadata"]["labels"] = {{"app.kubernetes.io/name", "a"}};
  before["spec"] = {{"ports", {{{"port", 80}}, {{"port", 81}}}}};
  Json after = before;
  after["metadata"]["labels"]["app.kubernetes.io/name"] = "b";
  after["spec"]["ports"][1]["port"] = 82;
  after["spec"]["ports"].push_back({{"port", 83}});
  after["spec"]["empty"] = Json::object();
  CHECK(ObjectDiff(before, after) ==
        std::vector<std::string>{R"(metadata.labels["app.kubernetes.io/name"]: "a" -> "b")",
                                 "spec.empty: <none> -> {}", "spec.ports[1].port: 81 -> 82",
                                 "spec.ports[2].port: <none> -> 83"});
  // A value that changes type is one leaf.
  Json scalar = before;
  scalar["spec"]["ports"] = "none";
  CHECK(ObjectDiff(before, scalar) ==
        std::vector<std::string>{R"(spec.ports: [{"port":80},{"port":81}] -> "none")"});
}

TEST_CASE(
    "object diff: server-managed fields, the status and the last-applied annotation are noise") {
  Json before = Cm({{"k", "v"}});
  before["metadata"]["resourceVersion"] = "10";
  before["metadata"]["generation"] = 1;
  before["metadata"]["uid"] = "u1";
  before["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z";
  before["metadata"]["selfLink"] = "/x";
  before["metadata"]["managedFields"] = Json::array({{{"manager", "a"}}});
  before["metadata"]["annotations"] = {
      {"kubectl.kubernetes.io/last-applied-configuration", "{\"old\":1}"}};
  before["status"] = {{"phase", "Active"}};
  Json after = Cm({{"k", "v"}});
  after["metadata"]["resourceVersion"] = "11";
  after["metadata"]["generation"] = 2;
  after["metadata"]["managedFields"] = Json::array({{{"manager", "b"}}});
  after["metadata"]["annotations"] = {
      {"kubectl.kubernetes.io/last-applied-configuration", "{\"new\":1}"}};
  after["status"] = {{"phase", "Terminating"}};
  CHECK(ObjectDiff(before, after).empty());
  after["metadata"]["annotations"]["note"] = "n";
  CHECK(ObjectDiff(before, after) ==
        std::vector<std::string>{R"(metadata.annotations.note: <none> -> "n")"});
}
