// PATCH bodies applied to a stored object: JSON merge patch (RFC 7386), JSON patch (RFC 6902,
// including test/move/copy), and strategic merge patch for built-in types (patch strategies and
// merge keys from the type's Schema; directives $patch: replace|delete|merge, $retainKeys,
// $deleteFromPrimitiveList/<field>, $setElementOrder/<field>). Errors are the apiserver's:
// 400 for an undecodable patch, 422 when a JSON patch does not apply. Pure functions.
#pragma once

#include <string_view>

#include "common/json.h"
#include "tests/kubesim/schema.h"
#include "tests/kubesim/status_error.h"

namespace syncbus::kubesim {

Outcome<Json> ApplyMergePatch(const Json& doc, std::string_view patch);
Outcome<Json> ApplyJsonPatch(const Json& doc, std::string_view patch);
Outcome<Json> ApplyStrategicMergePatch(const Json& doc, std::string_view patch,
                                       const Schema& schema);

// RFC 7386 merge of an already-parsed patch (null deletes, objects merge, others replace).
Json MergePatchValue(const Json& doc, const Json& patch);

}  // namespace syncbus::kubesim
