#include "common/kube/api_error.h"

#include <doctest/doctest.h>

namespace syncbus::kube {
namespace {

using std::chrono::seconds;

TEST_CASE("api errors: 404 and 409 reasons from Status bodies") {
  Status not_found =
      ApiError(404, R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
    "message":"syncsets.hive.openshift.io \"a\" not found","reason":"NotFound",
    "details":{"name":"a","group":"hive.openshift.io","kind":"syncsets"},"code":404})");
  CHECK(not_found.code() == Code::kNotFound);
  CHECK(not_found.http_status() == 404);
  CHECK(not_found.message() == "syncsets.hive.openshift.io \"a\" not found");

  Status exists = ApiError(409, R"({"kind":"Status","apiVersion":"v1","status":"Failure",
    "message":"configmaps \"x\" already exists","reason":"AlreadyExists","code":409})");
  CHECK(exists.code() == Code::kAlreadyExists);
  CHECK(exists.http_status() == 409);

  Status conflict = ApiError(409, R"({"kind":"Status","apiVersion":"v1","status":"Failure",
    "message":"Operation cannot be fulfilled on clustersyncs.hiveinternal.openshift.io \"c1\": the object has been modified; please apply your changes to the latest version and try again",
    "reason":"Conflict","details":{"name":"c1","kind":"clustersyncs"},"code":409})");
  CHECK(conflict.code() == Code::kConflict);
  CHECK(conflict.message().find("the object has been modified") != std::string::npos);

  Status apply_conflict = ApiError(409, R"({"kind":"Status","status":"Failure",
    "message":"Apply failed with 1 conflict: conflict with \"kubectl\": .data.key","reason":"Conflict",
    "details":{"causes":[{"reason":"FieldManagerConflict","message":"conflict with \"kubectl\"","field":".data.key"}]},"code":409})");
  CHECK(apply_conflict.code() == Code::kConflict);
}

TEST_CASE("api errors: 422 carries the causes") {
  Status invalid = ApiError(422, R"({"kind":"Status","apiVersion":"v1","status":"Failure",
    "message":"SyncSet.hive.openshift.io \"s\" is invalid: spec.resources[0].metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain",
    "reason":"Invalid","details":{"name":"s","group":"hive.openshift.io","kind":"SyncSet","causes":[
      {"reason":"FieldValueInvalid","message":"Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain","field":"spec.resources[0].metadata.name"},
      {"reason":"FieldValueRequired","message":"Required value","field":"spec.clusterDeploymentRefs"}]},"code":422})");
  CHECK(invalid.code() == Code::kInvalidArgument);
  CHECK(invalid.http_status() == 422);
  // The first cause is already in the message; the second is appended.
  CHECK(
      invalid.message() ==
      "SyncSet.hive.openshift.io \"s\" is invalid: spec.resources[0].metadata.name: Invalid value: "
      "\"Bad_Name\": a lowercase RFC 1123 subdomain (spec.clusterDeploymentRefs: Required value)");

  Status bad_request = ApiError(400, R"({"kind":"Status","status":"Failure","message":"bad",
    "reason":"BadRequest","details":{"causes":[{"message":"unknown field \"x\"","field":"spec"}]},"code":400})");
  CHECK(bad_request.code() == Code::kInvalidArgument);
  CHECK(bad_request.message() == "bad (spec: unknown field \"x\")");
}

TEST_CASE("api errors: auth, gone, unsupported") {
  CHECK(ApiError(401,
                 R"({"kind":"Status","message":"Unauthorized","reason":"Unauthorized","code":401})")
            .code() == Code::kUnauthorized);
  Status forbidden = ApiError(
      403,
      R"({"kind":"Status","message":"secrets is forbidden: User \"x\" cannot list","reason":"Forbidden","code":403})");
  CHECK(forbidden.code() == Code::kUnauthorized);
  CHECK(forbidden.http_status() == 403);
  Status gone = ApiError(
      410,
      R"j({"kind":"Status","message":"too old resource version: 5 (900)","reason":"Expired","code":410})j");
  CHECK(gone.code() == Code::kGone);
  CHECK(gone.message() == "too old resource version: 5 (900)");
  CHECK(
      ApiError(
          415,
          R"({"kind":"Status","message":"the body of the request was in an unknown format","reason":"UnsupportedMediaType","code":415})")
          .code() == Code::kUnsupported);
  CHECK(ApiError(405, R"({"kind":"Status","reason":"MethodNotAllowed","code":405})").code() ==
        Code::kUnsupported);
}

TEST_CASE("api errors: 429 and 5xx with Retry-After") {
  Status throttled =
      ApiError(429, R"({"kind":"Status","message":"Too many requests, please try again later.",
    "reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429})",
               {{"Retry-After", "3"}});
  CHECK(throttled.code() == Code::kTooManyRequests);
  CHECK(throttled.retry_after() == seconds(3));  // the header wins
  Status from_details = ApiError(
      429,
      R"({"kind":"Status","reason":"TooManyRequests","details":{"retryAfterSeconds":2},"code":429})");
  CHECK(from_details.retry_after() == seconds(2));
  CHECK(from_details.message() == "TooManyRequests");

  Status unavailable = ApiError(503, "upstream connect error\n", {{"retry-after", "5"}});
  CHECK(unavailable.code() == Code::kUnavailable);
  CHECK(unavailable.http_status() == 503);
  CHECK(unavailable.message() == "upstream connect error");
  CHECK(unavailable.retry_after() == seconds(5));
  CHECK(
      ApiError(
          500,
          R"({"kind":"Status","message":"etcdserver: request timed out","reason":"InternalError","code":500})")
          .code() == Code::kUnavailable);
}

TEST_CASE("api errors: bodies that are not a Status") {
  Status empty = ApiError(502, "");
  CHECK(empty.code() == Code::kUnavailable);
  CHECK(empty.message() == "HTTP 502");
  Status odd = ApiError(302, "moved");
  CHECK(odd.code() == Code::kInternal);
  CHECK(odd.http_status() == 302);
  CHECK(odd.message() == "unexpected HTTP 302: moved");
  std::string huge(5000, 'x');
  CHECK(ApiError(500, huge).message().size() == 512);
}

TEST_CASE("api errors: a watch ERROR event's Status") {
  Json expired =
      Json::parse(R"j({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
    "message":"too old resource version: 100 (200)","reason":"Expired","code":410})j");
  Status gone = ApiErrorFromStatus(expired);
  CHECK(gone.code() == Code::kGone);
  CHECK(gone.http_status() == 410);
  Status internal =
      ApiErrorFromStatus(Json::parse(R"({"kind":"Status","message":"boom","code":500})"));
  CHECK(internal.code() == Code::kUnavailable);
  CHECK(ApiErrorFromStatus(Json::object(), 404).code() == Code::kNotFound);
}

}  // namespace
}  // namespace syncbus::kube
