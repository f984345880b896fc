// Maps Kubernetes API failures (an HTTP status and usually a metav1.Status body) to
// syncbus::Status codes; http_status is always set. Stateless functions; thread-safe.
#pragma once

#include <string_view>

#include "common/http/types.h"
#include "common/json.h"
#include "common/status.h"

namespace syncbus::kube {

// 400/422 kInvalidArgument (details.causes appended), 401/403 kUnauthorized, 404 kNotFound,
// 405/406/415 kUnsupported, 408 kTimeout, 409 kAlreadyExists (reason AlreadyExists) or kConflict,
// 410 kGone, 413 kInvalidArgument, 429 kTooManyRequests, 5xx kUnavailable, anything else
// kInternal. Retry-After (header, else details.retryAfterSeconds) becomes retry_after().
Status ApiError(int http_status, std::string_view body, const http::Headers& headers = {});

// The same mapping for a metav1.Status object (a watch ERROR event); `http_status` 0 = use its
// `code` field.
Status ApiErrorFromStatus(const Json& status, int http_status = 0);

}  // namespace syncbus::kube
