// Standard base64 (RFC 4648) as Kubernetes Secrets and kubeconfig *-data fields use it.
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace syncbus {

std::string EncodeBase64(std::string_view data);
// Padding optional, ASCII whitespace ignored; nullopt on any other invalid input.
std::optional<std::string> DecodeBase64(std::string_view text);

}  // namespace syncbus
