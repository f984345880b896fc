// Fuzz target: the preview request and reply decoders must never crash, and whatever either
// accepts must survive a round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/bus/preview_message.h"

namespace {

template <typename Decode, typename Encode>
void RoundTrip(std::string_view body, Decode decode, Encode encode) {
  auto decoded = decode(body);
  if (decoded.ok()) {
    auto again = decode(encode(*decoded));
    if (!again.ok() || !(*again == *decoded)) std::abort();
  } else if (decoded.status().message().empty()) {
    std::abort();  // every rejection says why
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  RoundTrip(body, syncbus::DecodePreviewRequest, syncbus::EncodePreviewRequest);
  RoundTrip(body, syncbus::DecodePreviewReply, syncbus::EncodePreviewReply);
  return 0;
}
