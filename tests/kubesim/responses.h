// Building ApiResponses: JSON bodies with the apiserver's headers, metav1.Status errors and
// success Statuses, and Warning headers. Pure functions.
#pragma once

#include <string>
#include <vector>

#include "tests/kubesim/api_server.h"
#include "tests/kubesim/status_error.h"

namespace syncbus::kubesim {

ApiResponse JsonResponse(int status, std::string body,
                         const std::vector<std::string>& warnings = {});
// The Status as JSON, with Retry-After when it carries retryAfterSeconds.
ApiResponse ErrorResponse(const StatusError& error);
// {"kind":"Status",...,"status":"Success","details":{...}} for a completed delete.
ApiResponse SuccessStatus(const std::string& name, const std::string& group,
                          const std::string& kind, const std::string& uid);

}  // namespace syncbus::kubesim
