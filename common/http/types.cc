#include "common/http/types.h"

#include <strings.h>

namespace syncbus::http {

std::optional<std::string> FindHeader(const Headers& headers, std::string_view name) {
  for (const auto& [key, value] : headers) {
    if (key.size() == name.size() && strncasecmp(key.data(), name.data(), name.size()) == 0) {
      return value;
    }
  }
  return std::nullopt;
}

}  // namespace syncbus::http
