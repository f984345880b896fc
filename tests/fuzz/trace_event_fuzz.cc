// Fuzz target: the trace stream's decoder (it reads a stream any broker user could write to) must
// never crash, and whatever it accepts must survive a round trip unchanged: a message's events
// batched again, and each alone in the form of older writers.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/bus/trace_event.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  auto decoded = syncbus::DecodeTraceMessage(body);
  if (!decoded.ok()) {
    if (decoded.status().message().empty()) std::abort();  // every rejection says why
    return 0;
  }
  std::vector<const syncbus::TraceEvent*> events;
  for (const auto& e : decoded->events) {
    events.push_back(&e);
    const std::string one = syncbus::EncodeTraceEvent(e);
    if (one.size() > syncbus::kMaxTraceEventBytes) continue;  // a batch's events may be larger
    auto alone = syncbus::DecodeTraceEvent(one);
    if (!alone.ok() || !(*alone == e)) std::abort();
  }
  std::vector<syncbus::TraceEvent> again;
  for (const auto& batch : syncbus::TraceBatches(events)) {
    auto read = syncbus::DecodeTraceMessage(batch.publication.message.body);
    if (!read.ok() || read->invalid != 0) std::abort();
    for (auto& e : read->events) again.push_back(std::move(e));
  }
  if (again != decoded->events) std::abort();
  return 0;
}
