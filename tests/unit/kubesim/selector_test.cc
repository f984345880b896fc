#include "tests/kubesim/selector.h"

#include <doctest/doctest.h>

#include "tests/unit/kubesim/api_test_util.h"

namespace syncbus::kubesim::testing {
namespace {

bool Selects(const std::string& selector, const LabelMap& labels) {
  auto parsed = LabelSelector::Parse(selector);
  REQUIRE(parsed.ok());
  return parsed->Matches(labels);
}

TEST_CASE("label selector operators") {
  LabelMap prod = {{"env", "prod"}, {"tier", "web"}, {"weight", "7"}};
  LabelMap dev = {{"env", "dev"}};
  LabelMap none;
  CHECK(Selects("", none));
  CHECK(Selects("env=prod", prod));
  CHECK(!Selects("env=prod", dev));
  CHECK(Selects("env==prod", prod));
  CHECK(Selects("env!=prod", dev));
  CHECK(Selects("env!=prod", none));  // absent keys satisfy !=
  CHECK(!Selects("env!=prod", prod));
  CHECK(Selects("env in (prod, staging)", prod));
  CHECK(!Selects("env in (prod,staging)", dev));
  CHECK(!Selects("env in (prod)", none));
  CHECK(Selects("env notin (prod,staging)", dev));
  CHECK(Selects("env notin (prod)", none));
  CHECK(!Selects("env notin (prod)", prod));
  CHECK(Selects("tier", prod));
  CHECK(!Selects("tier", dev));
  CHECK(Selects("!tier", dev));
  CHECK(!Selects("!tier", prod));
  CHECK(Selects("weight>5", prod));
  CHECK(!Selects("weight<5", prod));
  CHECK(Selects("env=prod,tier=web", prod));
  CHECK(!Selects("env=prod,tier=db", prod));
  CHECK(Selects("env=", LabelMap{{"env", ""}}));
}

TEST_CASE("label selector syntax errors") {
  for (const char* bad : {"env in prod", "env in ()", "env=a b", "!env=prod", "env notin (a", "=x",
                          "a/b/c=d", "env=bad!value", "weight>x"}) {
    auto parsed = LabelSelector::Parse(bad);
    CHECK_MESSAGE(!parsed.ok(), bad);
    if (!parsed.ok()) CHECK(parsed.error().code == 400);
  }
}

TEST_CASE("field selectors") {
  auto sel = FieldSelector::Parse("metadata.name=a,metadata.namespace!=kube-system",
                                  {"metadata.name", "metadata.namespace"});
  REQUIRE(sel.ok());
  auto lookup = [](std::string name, std::string ns) {
    return [=](const std::string& f) { return f == "metadata.name" ? name : ns; };
  };
  CHECK(sel->Matches(lookup("a", "default")));
  CHECK(!sel->Matches(lookup("a", "kube-system")));
  CHECK(!sel->Matches(lookup("b", "default")));
  auto unsupported = FieldSelector::Parse("spec.x=1", {"metadata.name"});
  REQUIRE(!unsupported.ok());
  CHECK(unsupported.error().message == "field label not supported: spec.x");
}

TEST_CASE("list filters by label and field selectors, bad selectors are 400") {
  Fixture f;
  ApiServer& s = *f.server;
  REQUIRE(
      s.Call("POST", CmPath("default"), ConfigMap("a", "default", {}, {{"env", "prod"}})).status ==
      201);
  REQUIRE(
      s.Call("POST", CmPath("default"), ConfigMap("b", "default", {}, {{"env", "dev"}})).status ==
      201);
  REQUIRE(s.Call("POST", CmPath("kube-system"), ConfigMap("c", "kube-system", {})).status == 201);
  auto names = [&](const std::string& path, const std::string& query) {
    Json list = Body(s.Call("GET", path, nullptr, "application/json", query));
    std::vector<std::string> out;
    for (const auto& item : list["items"]) out.push_back(item["metadata"]["name"]);
    return out;
  };
  CHECK(names(CmPath("default"), "labelSelector=env%3Dprod") == std::vector<std::string>{"a"});
  CHECK(names(CmPath("default"), "labelSelector=env+notin+%28prod%29") ==
        std::vector<std::string>{"b"});
  CHECK(names("/api/v1/configmaps", "labelSelector=%21env") == std::vector<std::string>{"c"});
  CHECK(names("/api/v1/configmaps", "fieldSelector=metadata.namespace%3Dkube-system") ==
        std::vector<std::string>{"c"});
  CHECK(names("/api/v1/configmaps", "fieldSelector=metadata.name!%3Da") ==
        std::vector<std::string>{"b", "c"});
  CHECK(s.Call("GET", CmPath("default"), nullptr, "application/json", "labelSelector=a+in+b")
            .status == 400);
  CHECK(s.Call("GET", CmPath("default"), nullptr, "application/json", "fieldSelector=data.x%3D1")
            .status == 400);
}

}  // namespace
}  // namespace syncbus::kubesim::testing
