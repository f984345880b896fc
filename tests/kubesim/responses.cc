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
  return JsonResponse(error.code, error.ToJson().dump());
}

ApiResponse SuccessStatus(const std::string& name, const std::string& group,
                          const std::string& kind, const std::string& uid) {
  Json details = {{"name", name}, {"kind", kind}};
  if (!group.empty()) details["group"] = group;
  if (!uid.empty()) details["uid"] = uid;
  Json status = {{"kind", "Status"},  {"apiVersion", "v1"}, {"metadata", Json::object()},
                 {"status", "Success"}, {"details", details}};
  return JsonResponse(200, status.dump());
}

}  // namespace syncbus::kubesim
