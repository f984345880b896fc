#include "common/kube/resource_version.h"

#include <charconv>

namespace syncbus::kube {

std::optional<uint64_t> ParseResourceVersion(std::string_view version) {
  if (version.empty() || version.size() > 20) return std::nullopt;
  uint64_t value = 0;
  auto [end, error] = std::from_chars(version.data(), version.data() + version.size(), value);
  if (error != std::errc() || end != version.data() + version.size()) return std::nullopt;
  return value;
}

bool ResourceVersionAtLeast(std::string_view have, std::string_view want) {
  if (want.empty()) return true;
  auto h = ParseResourceVersion(have);
  auto w = ParseResourceVersion(want);
  return h && w && *h >= *w;
}

}  // namespace syncbus::kube
