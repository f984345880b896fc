// Test names ending in [concurrent] exercise cross-thread paths (run them under TSan too).
#include <atomic>
#include <thread>

#include <doctest/doctest.h>

#include "tests/unit/kubesim/api_test_util.h"

namespace syncbus::kubesim::testing {
namespace {

TEST_CASE("optimistic concurrency: racing read-modify-write loops lose no increment [concurrent]") {
  Fixture f;
  ApiServer& s = *f.server;
  REQUIRE(s.Call("POST", CmPath("default"), ConfigMap("counter", "default", {{"n", "0"}})).status ==
          201);
  constexpr int kThreads = 4;
  constexpr int kIncrements = 100;
  std::atomic<int> conflicts{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements;) {
        Json obj = Body(s.Call("GET", CmPath("default", "counter")));
        obj["data"]["n"] = std::to_string(std::stoi(obj["data"]["n"].get<std::string>()) + 1);
        auto r = s.Call("PUT", CmPath("default", "counter"), obj);
        if (r.status == 409) {
          ++conflicts;
          continue;
        }
        REQUIRE(r.status == 200);
        ++i;
      }
    });
  }
  for (auto& t : threads) t.join();
  Json final_obj = Body(s.Call("GET", CmPath("default", "counter")));
  CHECK(final_obj["data"]["n"] == std::to_string(kThreads * kIncrements));
  MESSAGE("conflicts retried: " << conflicts.load());
}

TEST_CASE("a watch sees every write of many threads once, in resourceVersion order [concurrent]") {
  Fixture f;
  ApiServer& s = *f.server;
  auto sink = std::make_shared<RecordingSink>();
  auto started = s.StartWatch(WatchRequest(CmPath("default"), ""), sink);
  REQUIRE(std::holds_alternative<uint64_t>(started));
  constexpr int kThreads = 4;
  constexpr int kObjects = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kObjects; ++i) {
        std::string name = "t" + std::to_string(t) + "-" + std::to_string(i);
        std::string body = R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")" + name +
                           R"("},"data":{"v":"1"}})";
        REQUIRE(Raw(s, "PATCH", CmPath("default", name), body, "application/apply-patch+yaml",
                    "fieldManager=t")
                    .status == 201);
        body.replace(body.find("\"1\""), 3, "\"2\"");
        REQUIRE(Raw(s, "PATCH", CmPath("default", name), body, "application/apply-patch+yaml",
                    "fieldManager=t")
                    .status == 200);
        if (i % 10 == 0) s.SendBookmarks();
      }
    });
  }
  for (auto& t : threads) t.join();
  uint64_t last = 0;
  size_t added = 0, modified = 0;
  for (const auto& e : sink->Events()) {
    uint64_t rv = std::stoull(e["object"]["metadata"]["resourceVersion"].get<std::string>());
    if (e["type"] == "BOOKMARK") {
      CHECK(rv >= last);
      continue;
    }
    CHECK(rv > last);
    last = rv;
    if (e["type"] == "ADDED") ++added;
    if (e["type"] == "MODIFIED") ++modified;
  }
  CHECK(added == kThreads * kObjects);
  CHECK(modified == kThreads * kObjects);
  CHECK(s.stats().objects >= kThreads * kObjects);
}

}  // namespace
}  // namespace syncbus::kubesim::testing
