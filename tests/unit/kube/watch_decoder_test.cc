#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "common/kube/client_impl.h"

namespace syncbus::kube {
namespace {

const std::string kBody =
    R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"11"}}})"
    "\n"
    R"({"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"12"},"data":{"k":"v\n"}}})"
    "\n"
    R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"15"}}})"
    "\n"
    R"({"type":"DELETED","object":{"metadata":{"name":"a","resourceVersion":"16"}}})"
    "\n";

std::vector<WatchEvent> Values(const std::vector<Result<WatchEvent>>& results) {
  std::vector<WatchEvent> events;
  for (const auto& r : results) {
    REQUIRE(r.ok());
    events.push_back(*r);
  }
  return events;
}

void CheckFourEvents(const std::vector<WatchEvent>& events) {
  REQUIRE(events.size() == 4);
  CHECK(events[0].type == WatchEventType::kAdded);
  CHECK(events[0].object["metadata"]["resourceVersion"] == "11");
  CHECK(events[1].type == WatchEventType::kModified);
  CHECK(events[1].object["data"]["k"] == "v\n");
  CHECK(events[2].type == WatchEventType::kBookmark);
  CHECK(events[3].type == WatchEventType::kDeleted);
  CHECK(events[3].object["metadata"]["name"] == "a");
}

TEST_CASE("watch decoder: several events in one chunk") {
  WatchDecoder decoder;
  std::vector<Result<WatchEvent>> out;
  decoder.Feed(kBody, out);
  CheckFourEvents(Values(out));
}

TEST_CASE("watch decoder: every split point of two chunks") {
  for (size_t split = 0; split <= kBody.size(); ++split) {
    CAPTURE(split);
    WatchDecoder decoder;
    std::vector<Result<WatchEvent>> out;
    decoder.Feed(std::string_view(kBody).substr(0, split), out);
    decoder.Feed(std::string_view(kBody).substr(split), out);
    CheckFourEvents(Values(out));
  }
}

TEST_CASE("watch decoder: one byte at a time, with blank and CRLF lines") {
  std::string body =
      "\n" + kBody.substr(0, kBody.find('\n')) + "\r\n\r\n" + kBody.substr(kBody.find('\n') + 1);
  WatchDecoder decoder;
  std::vector<Result<WatchEvent>> out;
  for (char c : body) decoder.Feed(std::string_view(&c, 1), out);
  CheckFourEvents(Values(out));
}

TEST_CASE("watch decoder: an incomplete line waits for more input") {
  WatchDecoder decoder;
  std::vector<Result<WatchEvent>> out;
  decoder.Feed(R"({"type":"ADDED","object":{"metadata":{"name":"a"}}})", out);
  CHECK(out.empty());
  decoder.Feed("\n", out);
  CHECK(out.size() == 1);
}

TEST_CASE("watch decoder: an ERROR event with a 410 Status is kGone and ends the stream") {
  WatchDecoder decoder;
  std::vector<Result<WatchEvent>> out;
  decoder.Feed(
      R"({"type":"ADDED","object":{"metadata":{"name":"a"}}})"
      "\n"
      R"j({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (50)","reason":"Expired","code":410}})j"
      "\n"
      R"({"type":"ADDED","object":{"metadata":{"name":"b"}}})"
      "\n",
      out);
  REQUIRE(out.size() == 2);
  CHECK(out[0].ok());
  CHECK(out[1].status().code() == Code::kGone);
  CHECK(out[1].status().message().find("too old resource version") != std::string::npos);
  decoder.Feed(R"({"type":"ADDED","object":{"metadata":{"name":"c"}}})"
               "\n",
               out);
  CHECK(out.size() == 2);
}

TEST_CASE("watch decoder: malformed lines and unknown types are errors") {
  for (std::string line : {"not json", R"({"type":"ADDED"})", R"({"type":"RENAMED","object":{}})",
                           R"({"type":"ADDED","object":"x"})"}) {
    CAPTURE(line);
    WatchDecoder decoder;
    std::vector<Result<WatchEvent>> out;
    decoder.Feed(line + "\n", out);
    REQUIRE(out.size() == 1);
    CHECK(out[0].status().code() == Code::kInternal);
  }
}

}  // namespace
}  // namespace syncbus::kube
