// Small JSON and time helpers shared by the simulator's engine: type names as the apiserver's
// validators print them, RFC 3339 timestamps, compact serialisation and random UUIDs.
// Thread-safe.
#pragma once

#include <string>

#include "common/clock.h"
#include "common/json.h"

namespace syncbus::kubesim {

// OpenAPI validator names: "string", "integer", "number", "boolean", "object", "array", "null".
const char* JsonTypeName(const Json& v);
// encoding/json names in "cannot unmarshal X into ...": "string", "number", "bool", ...
const char* GoJsonTypeName(const Json& v);
// The OpenAPI "date-time" format (RFC 3339 with a zone; fractional seconds allowed).
bool IsDateTime(const std::string& text);
// The OpenAPI "date" format (YYYY-MM-DD, a real calendar date).
bool IsDate(const std::string& text);
// metav1.Time: "2026-01-02T03:04:05Z".
std::string FormatTime(WallTime t);
// A random (version 4) UUID, as kube-apiserver makes for metadata.uid and Audit-Id.
std::string NewUid();

}  // namespace syncbus::kubesim
