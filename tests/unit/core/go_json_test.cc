#include "common/go_json.h"

#include <doctest/doctest.h>

using namespace syncbus;

TEST_CASE("GoJsonEncode writes what Go's encoding/json writes") {
  CHECK(GoJsonEncode(Json::parse(R"({"b":1,"a":[true,null,"x"],"c":{}})")) ==
        R"({"a":[true,null,"x"],"b":1,"c":{}})");
  CHECK(GoJsonEncode("<&>") == R"("\u003c\u0026\u003e")");
  CHECK(GoJsonEncode("a\nb\tc\x01") == R"("a\nb\tc\u0001")");
  CHECK(GoJsonEncode("\xE2\x80\xA8") == R"("\u2028")");
  CHECK(GoJsonEncode("é") == "\"é\"");
  CHECK(GoJsonEncode(Json(1.5)) == "1.5");
  CHECK(GoJsonEncode(Json(100.0)) == "100");
  CHECK(GoJsonEncode(Json(1e21)) == "1e+21");
  CHECK(GoJsonEncode(Json(1e-7)) == "1e-7");
  CHECK(GoJsonEncode(Json(-3)) == "-3");
}
