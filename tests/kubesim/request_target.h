// RequestTarget: what a kube-apiserver URL path addresses (discovery documents, a collection,
// an object, a subresource), and the query-string parameters of a request. Value types; pure
// parsing functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace syncbus::kubesim {

struct RequestTarget {
  enum class Kind {
    kUnknown,
    kCoreVersions,  // /api
    kGroupList,     // /apis
    kGroup,         // /apis/<group>
    kResourceList,  // /api/v1, /apis/<group>/<version>
    kVersion,       // /version
    kHealth,        // /healthz, /livez, /readyz
    kResource,      // a collection or an object
  };
  Kind kind = Kind::kUnknown;
  std::string group, version, plural;
  std::string ns;  // from /namespaces/<ns>/...
  bool namespaced_path = false;
  std::string name;         // empty: the collection
  std::string subresource;  // "status", "finalize", ...
};

RequestTarget ParseTarget(std::string_view path);

// Query parameters, percent-decoded ('+' is a space), in order.
class QueryParams {
 public:
  explicit QueryParams(std::string_view raw);
  std::optional<std::string> Get(std::string_view name) const;
  // "true"/"1" style flags: present with a value other than "false"/"0".
  bool Flag(std::string_view name) const;

 private:
  std::vector<std::pair<std::string, std::string>> params_;
};

std::string PercentDecode(std::string_view in, bool plus_is_space);

}  // namespace syncbus::kubesim
