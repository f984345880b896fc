// Fuzz target: the trace event decoder (it reads a stream any broker user could write to) must
// never crash, and whatever it accepts must survive a round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/bus/trace_event.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  auto decoded = syncbus::DecodeTraceEvent(body);
  if (decoded.ok()) {
    auto again = syncbus::DecodeTraceEvent(syncbus::EncodeTraceEvent(*decoded));
    if (!again.ok() || !(*again == *decoded)) std::abort();
  } else if (decoded.status().message().empty()) {
    std::abort();  // every rejection says why
  }
  return 0;
}
