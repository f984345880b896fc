#include "common/hive/label_selector.h"

#include <doctest/doctest.h>

using namespace syncbus;
using namespace syncbus::hive;

namespace {
LabelSelector Sel(const char* json) {
  auto s = LabelSelector::FromJson(Json::parse(json));
  REQUIRE(s.ok());
  return *s;
}
}  // namespace

TEST_CASE("empty selector matches everything") {
  CHECK(Sel("{}").Matches({}));
  CHECK(Sel("{}").Matches({{"a", "b"}}));
  CHECK(Sel("null").Matches({{"a", "b"}}));
}

TEST_CASE("matchLabels requires every pair") {
  auto s = Sel(R"({"matchLabels":{"region":"eu","tier":"gold"}})");
  CHECK(s.Matches({{"region", "eu"}, {"tier", "gold"}, {"x", "y"}}));
  CHECK_FALSE(s.Matches({{"region", "eu"}}));
  CHECK_FALSE(s.Matches({{"region", "us"}, {"tier", "gold"}}));
}

TEST_CASE("each matchExpressions operator") {
  auto in = Sel(R"({"matchExpressions":[{"key":"region","operator":"In","values":["eu","us"]}]})");
  CHECK(in.Matches({{"region", "us"}}));
  CHECK_FALSE(in.Matches({{"region", "ap"}}));
  CHECK_FALSE(in.Matches({}));

  auto notin = Sel(R"({"matchExpressions":[{"key":"region","operator":"NotIn","values":["eu"]}]})");
  CHECK(notin.Matches({{"region", "us"}}));
  CHECK(notin.Matches({}));  // absent key satisfies NotIn
  CHECK_FALSE(notin.Matches({{"region", "eu"}}));

  auto exists = Sel(R"({"matchExpressions":[{"key":"gpu","operator":"Exists"}]})");
  CHECK(exists.Matches({{"gpu", ""}}));
  CHECK_FALSE(exists.Matches({{"cpu", "x"}}));

  auto dne = Sel(R"({"matchExpressions":[{"key":"gpu","operator":"DoesNotExist"}]})");
  CHECK(dne.Matches({{"cpu", "x"}}));
  CHECK_FALSE(dne.Matches({{"gpu", "1"}}));
}

TEST_CASE("matchLabels and matchExpressions are ANDed") {
  auto s = Sel(
      R"({"matchLabels":{"fleet":"a"},"matchExpressions":[{"key":"tier","operator":"NotIn","values":["bronze"]}]})");
  CHECK(s.Matches({{"fleet", "a"}, {"tier", "gold"}}));
  CHECK_FALSE(s.Matches({{"fleet", "a"}, {"tier", "bronze"}}));
  CHECK_FALSE(s.Matches({{"fleet", "b"}, {"tier", "gold"}}));
}

TEST_CASE("invalid selectors are rejected with the field named") {
  const char* bad[] = {
      R"({"matchExpressions":[{"key":"a","operator":"Gt","values":["1"]}]})",
      R"({"matchExpressions":[{"key":"a","operator":"In"}]})",
      R"({"matchExpressions":[{"key":"a","operator":"In","values":[]}]})",
      R"({"matchExpressions":[{"key":"a","operator":"Exists","values":["x"]}]})",
      R"({"matchExpressions":[{"operator":"Exists"}]})",
      R"({"matchLabels":{"a":1}})",
      R"({"matchLabels":[]})",
  };
  for (const char* b : bad) {
    CAPTURE(b);
    auto s = LabelSelector::FromJson(Json::parse(b));
    REQUIRE_FALSE(s.ok());
    CHECK(s.status().message().find("selector.") == 0);
  }
}
