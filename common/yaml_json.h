// YAML documents to Json the way the apiserver reads them (sigs.k8s.io/yaml over go-yaml v2):
// YAML 1.1 scalars for plain values (yes/no/on/off booleans, 0x/0o/octal integers), quoted
// values stay strings, mapping keys become strings. Pure functions; thread-safe.
#pragma once

#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace syncbus {

// The first document of `text` (null when empty). kInvalidArgument on a syntax error.
Result<Json> YamlToJson(std::string_view text);
// Every document of `text` (multi-document streams separated by ---), empty ones skipped.
Result<std::vector<Json>> YamlDocumentsToJson(std::string_view text);

}  // namespace syncbus
