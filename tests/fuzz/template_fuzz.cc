// Fuzz target: the Go-template engine (parser and evaluator, through the consumer's
// ExpandTemplate/ExpandTemplates) must never crash, hang or throw; every failure is one of
// Hive's messages, rendering is deterministic, and a rendered resource is valid JSON text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "consumer/templates.h"

namespace {

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  syncbus::hive::Labels labels = {{"region", "eu-west-1"}, {"tier", "gold"}, {"empty", ""}};
  auto first = syncbus::consumer::ExpandTemplate(text, labels);
  auto second = syncbus::consumer::ExpandTemplate(text, labels);
  if (first.ok() != second.ok()) std::abort();
  if (first.ok() && *first != *second) std::abort();
  if (!first.ok()) {
    const std::string& m = first.status().message();
    if (!StartsWith(m, "failed to parse template string ") &&
        !StartsWith(m, "failed to execute template on string ")) {
      std::abort();
    }
  }
  syncbus::Json doc = {{"metadata", {{"name", text}}},
                       {"list", syncbus::Json::array({text, 1, text})}};
  syncbus::Status s = syncbus::consumer::ExpandTemplates(doc, labels);
  if (s.ok()) {
    (void)doc.dump();  // throws (and so fails the target) on invalid UTF-8
  } else if (!StartsWith(s.message(), "Failed to apply template to value ")) {
    std::abort();
  }
  return 0;
}
