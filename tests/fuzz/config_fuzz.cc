// Fuzz target: the YAML config parser must never crash or throw, and every rejection names its
// input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/bus/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto config = syncbus::ParseConfig(text, "fuzz.yaml");
  if (!config.ok() && config.status().message().rfind("fuzz.yaml", 0) != 0) std::abort();
  return 0;
}
