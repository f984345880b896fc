#include "common/kube/api_error.h"

#include <charconv>
#include <string>

namespace syncbus::kube {
namespace {

std::string StringField(const Json& object, const char* key) {
  if (!object.is_object()) return {};
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Code CodeFor(int http_status, const std::string& reason) {
  switch (http_status) {
    case 400:
    case 413:
    case 422: return Code::kInvalidArgument;
    case 401:
    case 403: return Code::kUnauthorized;
    case 404: return Code::kNotFound;
    case 405:
    case 406:
    case 415: return Code::kUnsupported;
    case 408: return Code::kTimeout;
    case 409: return reason == "AlreadyExists" ? Code::kAlreadyExists : Code::kConflict;
    case 410: return Code::kGone;
    case 429: return Code::kTooManyRequests;
    default: return http_status >= 500 && http_status <= 599 ? Code::kUnavailable : Code::kInternal;
  }
}

// "field: message" for every cause the message does not already spell out.
std::string CausesText(const Json& status, const std::string& message) {
  const Json* causes = nullptr;
  if (status.is_object() && status.contains("details") && status["details"].is_object() &&
      status["details"].contains("causes") && status["details"]["causes"].is_array()) {
    causes = &status["details"]["causes"];
  }
  if (causes == nullptr) return {};
  std::string text;
  for (const Json& cause : *causes) {
    std::string field = StringField(cause, "field");
    std::string what = StringField(cause, "message");
    if (what.empty()) what = StringField(cause, "reason");
    std::string one = field;
    if (!one.empty()) one += ": ";
    one += what;
    if (one.empty() || message.find(one) != std::string::npos) continue;
    if (!text.empty()) text += "; ";
    text += one;
  }
  return text;
}

std::chrono::milliseconds RetryAfter(const Json& status, const http::Headers& headers) {
  if (auto header = http::FindHeader(headers, "Retry-After")) {
    long long seconds = 0;
    auto [ptr, ec] = std::from_chars(header->data(), header->data() + header->size(), seconds);
    if (ec == std::errc() && seconds > 0) return std::chrono::seconds(seconds);
  }
  if (status.is_object() && status.contains("details") && status["details"].is_object()) {
    const Json& details = status["details"];
    auto it = details.find("retryAfterSeconds");
    if (it != details.end() && it->is_number_integer() && it->get<long long>() > 0) {
      return std::chrono::seconds(it->get<long long>());
    }
  }
  return std::chrono::milliseconds(0);
}

Status Build(int http_status, const Json& status, std::string message,
             const http::Headers& headers) {
  std::string reason = StringField(status, "reason");
  if (message.empty()) message = reason;
  if (message.empty()) message = "HTTP " + std::to_string(http_status);
  Code code = CodeFor(http_status, reason);
  if (code == Code::kInvalidArgument) {
    std::string causes = CausesText(status, message);
    if (!causes.empty()) message += " (" + causes + ")";
  }
  if (code == Code::kInternal)
    message = "unexpected HTTP " + std::to_string(http_status) + ": " + message;
  Status result(code, std::move(message));
  result.WithHttpStatus(http_status);
  if (auto delay = RetryAfter(status, headers); delay.count() > 0) result.WithRetryAfter(delay);
  return result;
}

}  // namespace

Status ApiError(int http_status, std::string_view body, const http::Headers& headers) {
  Json status = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (status.is_object() && status.value("kind", "") == "Status") {
    return Build(http_status, status, StringField(status, "message"), headers);
  }
  constexpr size_t kMaxQuoted = 512;
  std::string text(body.substr(0, kMaxQuoted));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return Build(http_status, Json(), std::move(text), headers);
}

Status ApiErrorFromStatus(const Json& status, int http_status) {
  if (http_status == 0 && status.is_object()) {
    auto it = status.find("code");
    if (it != status.end() && it->is_number_integer()) http_status = it->get<int>();
  }
  return Build(http_status, status, StringField(status, "message"), {});
}

}  // namespace syncbus::kube
