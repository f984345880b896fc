// Fuzz target: the sync request decoder must never crash, and whatever it accepts must survive a
// round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/bus/sync_message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  auto decoded = syncbus::DecodeSyncRequest(body);
  if (decoded.ok()) {
    auto again = syncbus::DecodeSyncRequest(syncbus::EncodeSyncRequest(*decoded));
    if (!again.ok() || !(*again == *decoded)) std::abort();
  } else if (decoded.status().message().empty()) {
    std::abort();  // every rejection says why
  }
  return 0;
}
