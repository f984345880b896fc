#include "common/yaml_json.h"

#include <doctest/doctest.h>

namespace syncbus {
namespace {

TEST_CASE("YAML scalars resolve as the apiserver's YAML 1.1 reader does") {
  auto doc = YamlToJson(R"(
plainString: hello
quoted: "yes"
single: '0x10'
yes1: yes
off1: Off
hex: 0x1F
octal: 0755
neg: -12
float: 1.5
exp: 1e3
nothing: ~
empty:
list: [a, 1, true]
nested: {k: v}
1: numeric key
)");
  REQUIRE(doc.ok());
  const Json& j = *doc;
  CHECK(j["plainString"] == "hello");
  CHECK(j["quoted"] == "yes");
  CHECK(j["single"] == "0x10");
  CHECK(j["yes1"] == true);
  CHECK(j["off1"] == false);
  CHECK(j["hex"] == 31);
  CHECK(j["octal"] == 493);
  CHECK(j["neg"] == -12);
  CHECK(j["float"] == 1.5);
  CHECK(j["exp"] == 1000.0);
  CHECK(j["nothing"].is_null());
  CHECK(j["empty"].is_null());
  CHECK(j["list"] == Json::array({"a", 1, true}));
  CHECK(j["nested"]["k"] == "v");
  CHECK(j["1"] == "numeric key");
  CHECK(!YamlToJson("a: [unclosed").ok());
  auto docs = YamlDocumentsToJson("a: 1\n---\n---\nb: 2\n");
  REQUIRE(docs.ok());
  CHECK(docs->size() == 2);
}

}  // namespace
}  // namespace syncbus
