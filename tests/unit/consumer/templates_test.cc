#include <doctest/doctest.h>

#include "consumer/templates.h"

using namespace syncbus;
using namespace syncbus::consumer;

TEST_CASE("templates: fromCDLabel expands to the label's value, empty when absent") {
  hive::Labels labels = {{"region", "eu"}, {"a/b", "x"}};
  CHECK(*ExpandTemplate(R"({{ fromCDLabel "region" }})", labels) == "eu");
  CHECK(*ExpandTemplate(R"(r={{fromCDLabel "region"}}, {{ fromCDLabel `a/b` }}.)", labels) == "r=eu, x.");
  CHECK(*ExpandTemplate(R"([{{ fromCDLabel "none" }}])", labels) == "[]");
  CHECK(*ExpandTemplate("no actions", labels) == "no actions");
  CHECK(*ExpandTemplate(R"(a  {{- fromCDLabel "region" -}}  b)", labels) == "aeub");
}

TEST_CASE("templates: anything but fromCDLabel \"key\" is an error") {
  hive::Labels labels;
  CHECK_FALSE(ExpandTemplate(R"({{ env "HOME" }})", labels).ok());
  CHECK_FALSE(ExpandTemplate(R"({{ fromCDLabel region }})", labels).ok());
  CHECK_FALSE(ExpandTemplate(R"({{ fromCDLabel "region" )", labels).ok());
  CHECK_FALSE(ExpandTemplate(R"({{ fromCDLabelx "region" }})", labels).ok());
}

TEST_CASE("templates: every string value of a document, keys untouched") {
  hive::Labels labels = {{"tier", "gold"}};
  Json doc = {{"metadata", {{"name", R"(n-{{ fromCDLabel "tier" }})"}}},
              {"data", {{R"({{ fromCDLabel "tier" }})", R"({{ fromCDLabel "tier" }})"}}},
              {"list", Json::array({R"({{ fromCDLabel "tier" }})", 3, true})}};
  REQUIRE(ExpandTemplates(doc, labels).ok());
  CHECK(doc["metadata"]["name"] == "n-gold");
  CHECK(doc["data"][R"({{ fromCDLabel "tier" }})"] == "gold");
  CHECK(doc["list"][0] == "gold");
  CHECK(doc["list"][1] == 3);
}
