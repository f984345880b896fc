#include "tests/kubesim/responses.h"

namespace syncbus::kubesim {

ApiResponse JsonResponse(int status, std::string body, const std::vector<std::string>& warnings) {
  ApiResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json");
  for (const auto& w : warnings) {
    r.headers.emplace_back("Warning", "299 - " + Json(w).dump());
  }
  r.body = std::move(body);
  return r;
}

ApiResponse ErrorResponse(const StatusError& error) {
  ApiResponse r = JsonResponse(error.code, error.ToJson().dump());
  // As kube-apiserver's error writer: any Status asking for a retry says so in Retry-After too.
  if (error.retry_after_seconds > 0) {
    r.headers.emplace_back("Retry-After", std::to_string(error.retry_after_seconds));
  }
  return r;
}

ApiResponse SuccessStatus(const std::string& name, const std::string& group,
                          const std::string& kind, const std::string& uid) {
  Json details = {{"name", name}, {"kind", kind}};
  if (!group.empty()) details["group"] = group;
  if (!uid.empty()) details["uid"] = uid;
  Json status = {{"kind", "Status"},
                 {"apiVersion", "v1"},
                 {"metadata", Json::object()},
                 {"status", "Success"},
                 {"details", details}};
  return JsonResponse(200, status.dump());
}

}  // namespace syncbus::kubesim
