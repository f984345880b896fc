#include "common/bus/preview_message.h"

#include <doctest/doctest.h>

using namespace syncbus;

namespace {

Json PreviewSelectorSet() {
  return {{"apiVersion", "hive.openshift.io/v1"},
          {"kind", "SelectorSyncSet"},
          {"metadata", {{"name", "fleet-cm"}}},
          {"spec", {{"clusterDeploymentSelector", {{"matchLabels", {{"env", "prod"}}}}}}}};
}

PreviewRequest PreviewRequestFixture() {
  return {"pv-0123456789abcdef", PreviewSelectorSet(), {{"c1", "c1"}, {"c2", "c2"}}};
}

PreviewReply PreviewReplyFixture() {
  PreviewReply r;
  r.preview_id = "pv-0123456789abcdef";
  r.cluster = {"c1", "c1"};
  r.objects = {
      {"v1", "ConfigMap", "app", "a", ObjectOutcome::kCreated, {}, ""},
      {"v1", "ConfigMap", "app", "b", ObjectOutcome::kChanged, {"data.x: \"1\" -> \"2\""}, ""},
      {"v1", "Namespace", "", "app", ObjectOutcome::kUnchanged, {}, ""},
      {"v1", "Secret", "app", "s", ObjectOutcome::kRefused, {}, "admission webhook said no"},
      {"v1", "ConfigMap", "app", "c", ObjectOutcome::kNotReached, {}, ""},
      {"v1", "ConfigMap", "app", "d", ObjectOutcome::kDeleted, {}, ""},
  };
  return r;
}

std::string PreviewRequestError(Json body) {
  auto decoded = DecodePreviewRequest(body.dump());
  REQUIRE_FALSE(decoded.ok());
  return decoded.status().message();
}

std::string PreviewReplyError(Json body) {
  auto decoded = DecodePreviewReply(body.dump());
  REQUIRE_FALSE(decoded.ok());
  return decoded.status().message();
}

}  // namespace

TEST_CASE("preview requests and replies survive a round trip") {
  auto request = DecodePreviewRequest(EncodePreviewRequest(PreviewRequestFixture()));
  REQUIRE_MESSAGE(request.ok(), request.status().ToString());
  CHECK(*request == PreviewRequestFixture());
  auto reply = DecodePreviewReply(EncodePreviewReply(PreviewReplyFixture()));
  REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
  CHECK(*reply == PreviewReplyFixture());
  PreviewReply failed;
  failed.preview_id = "p";
  failed.cluster = {"ns", "c"};
  failed.error = "the cluster is unreachable";
  auto again = DecodePreviewReply(EncodePreviewReply(failed));
  REQUIRE(again.ok());
  CHECK(*again == failed);
}

TEST_CASE("outcomes have their wire names") {
  CHECK(std::string(ObjectOutcomeName(ObjectOutcome::kCreated)) == "created");
  CHECK(std::string(ObjectOutcomeName(ObjectOutcome::kNotReached)) == "not-reached");
  Json body = Json::parse(EncodePreviewReply(PreviewReplyFixture()));
  CHECK(body["objects"][3]["outcome"] == "refused");
  CHECK(body["objects"][3]["message"] == "admission webhook said no");
  CHECK(body["objects"][1]["diff"][0] == "data.x: \"1\" -> \"2\"");
}

TEST_CASE("a preview request is decoded strictly, saying what is wrong") {
  Json good = Json::parse(EncodePreviewRequest(PreviewRequestFixture()));
  CHECK(DecodePreviewRequest("{").status().message() == "preview request: body is not valid JSON");
  CHECK(DecodePreviewRequest("[]").status().message() ==
        "preview request: body is not a JSON object");
  CHECK(DecodePreviewRequest(std::string(kMaxPreviewRequestBytes + 1, ' ')).status().message() ==
        "preview request: body of 2097153 bytes exceeds the limit of 2097152");
  Json j = good;
  j["version"] = 2;
  CHECK(PreviewRequestError(j) == "preview request: unsupported version 2 (this build reads 1)");
  j = good;
  j.erase("previewId");
  CHECK(PreviewRequestError(j) == "preview request: missing field \"previewId\"");
  j = good;
  j["previewId"] = "";
  CHECK(PreviewRequestError(j) == "preview request: field \"previewId\" is empty");
  j = good;
  j["set"]["kind"] = "ConfigMap";
  CHECK(PreviewRequestError(j) ==
        "preview request: set is a hive.openshift.io/v1 ConfigMap, not a hive.openshift.io/v1 "
        "SyncSet or SelectorSyncSet");
  j = good;
  j["set"]["kind"] = "SyncSet";  // a SyncSet needs its namespace
  CHECK(PreviewRequestError(j) == "preview request: missing field \"set.metadata.namespace\"");
  j = good;
  j["set"]["metadata"]["name"] = "Bad_Name";
  CHECK(PreviewRequestError(j) ==
        "preview request: set.metadata.name \"Bad_Name\" is not a valid object name");
  j = good;
  j["set"]["spec"] = "x";
  CHECK(PreviewRequestError(j) == "preview request: field \"set.spec\" must be an object");
  j = good;
  j["clusters"] = Json::array();
  CHECK(PreviewRequestError(j) ==
        "preview request: field \"clusters\" has 0 entries; a request names 1 to 1000");
  j = good;
  j["clusters"][1]["namespace"] = "NS";
  CHECK(PreviewRequestError(j) ==
        "preview request: clusters[1].namespace \"NS\" is not a valid namespace name");
  j = good;
  j["clusters"][0].erase("name");
  CHECK(PreviewRequestError(j) == "preview request: missing field \"clusters[0].name\"");
  j = good;
  j["clusters"] = Json::array();
  for (size_t i = 0; i <= kMaxPreviewClusters; ++i)
    j["clusters"].push_back({{"namespace", "n"}, {"name", "c" + std::to_string(i)}});
  CHECK(PreviewRequestError(j) ==
        "preview request: field \"clusters\" has 1001 entries; a request names 1 to 1000");
}

TEST_CASE("a preview reply is decoded strictly, saying what is wrong") {
  Json good = Json::parse(EncodePreviewReply(PreviewReplyFixture()));
  Json j = good;
  j["objects"][2]["outcome"] = "exploded";
  CHECK(PreviewReplyError(j) == "preview reply: objects[2].outcome: unknown outcome \"exploded\"");
  j = good;
  j["objects"][1]["diff"] = Json::array({1});
  CHECK(PreviewReplyError(j) ==
        "preview reply: field \"objects[1].diff\" must be an array of strings");
  j = good;
  j["objects"] = Json::object();
  CHECK(PreviewReplyError(j) == "preview reply: field \"objects\" must be an array");
  j = good;
  j.erase("cluster");
  CHECK(PreviewReplyError(j) == "preview reply: missing field \"cluster\"");
  j = good;
  j["error"] = "unreachable";
  CHECK(PreviewReplyError(j) == "preview reply: a reply with an error lists no objects");
  j = good;
  j["objects"][0]["kind"] = 7;
  CHECK(PreviewReplyError(j) == "preview reply: field \"objects[0].kind\" must be a string");
}

TEST_CASE("a preview request's AMQP message names its reply queue and correlates the replies") {
  const WallTime at = WallTime(std::chrono::seconds(1700000000));
  amqp::Message m = ToAmqpMessage(PreviewRequestFixture(), "syncbusctl", "pv-0123456789abcdef/0",
                                  "amq.gen-x", at);
  CHECK(m.reply_to == "amq.gen-x");
  CHECK(m.correlation_id == "pv-0123456789abcdef");
  CHECK(m.message_id == "pv-0123456789abcdef/0");
  CHECK(m.content_type == "application/json");
  CHECK(m.type == "syncbus.preview-request.v1");
  CHECK(m.timestamp == 1700000000);
  CHECK(m.persistent);
  CHECK(DecodePreviewRequest(m.body).ok());
  amqp::Message r = ToAmqpMessage(PreviewReplyFixture(), "syncbus-consumer", at);
  CHECK(r.correlation_id == "pv-0123456789abcdef");
  CHECK(r.reply_to.empty());
  CHECK_FALSE(r.persistent);
  CHECK(DecodePreviewReply(r.body).ok());
}
