#include "common/kube/list_splitter.h"

#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "common/json.h"

namespace syncbus::kube {
namespace {

struct Split {
  std::vector<std::string> items;
  std::vector<std::string> metadata;
  Status status;
};

// Splits `body` fed in chunks of `chunk` bytes (0: all at once).
Split SplitBody(const std::string& body, size_t chunk = 0) {
  Split out;
  ListSplitter splitter(
      [&](std::string_view item) {
        out.items.emplace_back(item);
        return Status();
      },
      [&](std::string_view metadata) {
        out.metadata.emplace_back(metadata);
        return Status();
      });
  const size_t step = chunk == 0 ? body.size() : chunk;
  for (size_t at = 0; at < body.size() && out.status.ok(); at += step) {
    out.status = splitter.Feed(std::string_view(body).substr(at, step));
  }
  if (out.status.ok()) out.status = splitter.Finish();
  return out;
}

// What the API server sends, with the strings a splitter can trip on: brackets, braces, commas
// and escaped quotes and backslashes inside strings, a key named "items" inside an item.
const std::string kList =
    R"( {"kind":"ClusterDeploymentList","apiVersion":"hive.openshift.io/v1",)"
    R"("metadata":{"resourceVersion":"4711","continue":""},)"
    "\n"
    R"("items":[{"metadata":{"name":"a","annotations":{"x":"}]{[,\"\\"}}},)"
    R"( {"metadata":{"name":"b"},"spec":{"items":[1,2,{"k":[]}],"s":"\u00e9\\\""}},)"
    R"({"metadata":{"name":"c"},"n":-1.5e3,"t":true,"z":null}]})"
    "\n";

TEST_CASE("list splitter: metadata and each item, whole, at every chunk boundary") {
  const Split whole = SplitBody(kList);
  REQUIRE(whole.status.ok());
  REQUIRE(whole.metadata.size() == 1);
  CHECK(Json::parse(whole.metadata[0])["resourceVersion"] == "4711");
  REQUIRE(whole.items.size() == 3);
  CHECK(Json::parse(whole.items[0])["metadata"]["annotations"]["x"] == "}]{[,\"\\");
  CHECK(Json::parse(whole.items[1])["spec"]["items"].size() == 3);
  CHECK(Json::parse(whole.items[1])["spec"]["s"] == "\xc3\xa9\\\"");
  CHECK(Json::parse(whole.items[2])["n"] == -1500.0);
  for (size_t chunk = 1; chunk < kList.size(); ++chunk) {
    CAPTURE(chunk);
    const Split split = SplitBody(kList, chunk);
    REQUIRE(split.status.ok());
    CHECK(split.items == whole.items);
    CHECK(split.metadata == whole.metadata);
  }
}

TEST_CASE("list splitter: metadata after the items, scalars as items, empty and null lists") {
  const Split late = SplitBody(R"({"items":[1,"two",[3],{"four":4},null],"metadata":{"a":1}})", 2);
  REQUIRE(late.status.ok());
  CHECK(late.items == std::vector<std::string>{"1", "\"two\"", "[3]", R"({"four":4})", "null"});
  CHECK(late.metadata == std::vector<std::string>{R"({"a":1})"});

  for (const char* body : {R"({"items":[],"metadata":{}})", R"({"items":null})", "{}",
                           R"({"other":{"items":[1]},"x":[{"items":[2]}]})"}) {
    CAPTURE(body);
    const Split split = SplitBody(body, 1);
    REQUIRE(split.status.ok());
    CHECK(split.items.empty());
  }
}

TEST_CASE("list splitter: a malformed or cut body is an error, never a shorter list") {
  for (const std::string& body :
       {std::string(kList.substr(0, kList.size() / 2)), std::string(""), std::string("[]"),
        std::string(R"({"items":[1,,2]})"), std::string(R"({"items":[1 2]})"),
        std::string(R"({"items" [1]})"), std::string(R"({"items":[1]} x)"),
        std::string(R"({"items":[1],})"), std::string(R"({"items":[{"a":1}}]})"),
        std::string(R"({"items":[1],"items":[2]})"), std::string(R"({"metadata":})"),
        std::string(R"({"it\u0065ms":[1]})")}) {
    CAPTURE(body);
    for (size_t chunk : {size_t{0}, size_t{1}, size_t{3}}) {
      CHECK_FALSE(SplitBody(body, chunk).status.ok());
    }
  }
}

TEST_CASE("list splitter: an error from a callback ends the split with it") {
  int items = 0;
  ListSplitter splitter(
      [&](std::string_view) {
        ++items;
        return Status(Code::kInvalidArgument, "bad item");
      },
      [](std::string_view) { return Status(); });
  Status s = splitter.Feed(R"({"items":[{"a":1},{"b":2}]})");
  CHECK(s.code() == Code::kInvalidArgument);
  CHECK(items == 1);
  CHECK(splitter.Feed("]}").message() == "bad item");
  CHECK_FALSE(splitter.Finish().ok());
}

}  // namespace
}  // namespace syncbus::kube
