// Stable digests (SHA-256 via OpenSSL) for desired-state revisions and per-cluster jitter.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace syncbus {

// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);
// The first 8 bytes of SHA-256(data) as an integer: a stable, well-spread hash.
uint64_t StableHash64(std::string_view data);

}  // namespace syncbus
