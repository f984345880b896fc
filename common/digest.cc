#include "common/digest.h"

#include <openssl/sha.h>

namespace syncbus {

std::string Sha256Hex(std::string_view data) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), md);
  static const char kHex[] = "0123456789abcdef";
  std::string out(size_t{2} * SHA256_DIGEST_LENGTH, '0');
  for (size_t i = 0; i < SHA256_DIGEST_LENGTH; ++i) {
    out[2 * i] = kHex[md[i] >> 4];
    out[2 * i + 1] = kHex[md[i] & 0xf];
  }
  return out;
}

uint64_t StableHash64(std::string_view data) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), md);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | md[i];
  return v;
}

}  // namespace syncbus
