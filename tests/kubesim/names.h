// Name and key syntax checks of k8s.io/apimachinery/pkg/util/validation, returning the same
// messages (empty = valid). Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace syncbus::kubesim {

using Messages = std::vector<std::string>;

Messages IsDns1123Label(std::string_view value);
Messages IsDns1123Subdomain(std::string_view value);
Messages IsDns1035Label(std::string_view value);
// Label keys and annotation keys: [prefix/]name.
Messages IsQualifiedName(std::string_view value);
Messages IsValidLabelValue(std::string_view value);
// ConfigMap and Secret data keys.
Messages IsConfigMapKey(std::string_view value);
// Names of resources without a stricter rule (embedded resources in CRs).
Messages IsPathSegmentName(std::string_view value);
// metadata.name of most resources (generateName when `prefix`: a trailing '-' is fine).
Messages NameIsDnsSubdomain(std::string_view value, bool prefix);
Messages NameIsDnsLabel(std::string_view value, bool prefix);
Messages NameIsDns1035Label(std::string_view value, bool prefix);  // Services

}  // namespace syncbus::kubesim
