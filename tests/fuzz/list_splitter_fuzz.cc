// Fuzz target: the list response splitter must never crash; fed in two chunks it must hand out
// exactly what it hands out fed at once; and for a body that is valid JSON, the items and
// metadata it hands out must be the document's own.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/kube/list_splitter.h"

namespace {

struct Pieces {
  std::vector<std::string> items, metadata;
  bool ok = false;
};

Pieces Split(std::string_view body, size_t cut) {
  Pieces out;
  syncbus::kube::ListSplitter splitter(
      [&](std::string_view item) {
        out.items.emplace_back(item);
        return syncbus::Status();
      },
      [&](std::string_view metadata) {
        out.metadata.emplace_back(metadata);
        return syncbus::Status();
      });
  syncbus::Status s = splitter.Feed(body.substr(0, cut));
  if (s.ok()) s = splitter.Feed(body.substr(cut));
  if (s.ok()) s = splitter.Finish();
  if (!s.ok() && s.message().empty()) std::abort();  // every rejection says why
  out.ok = s.ok();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  const Pieces whole = Split(body, body.size());
  const Pieces cut = Split(body, size == 0 ? 0 : data[0] % (size + 1));
  if (whole.ok != cut.ok || whole.items != cut.items || whole.metadata != cut.metadata) {
    std::abort();
  }
  syncbus::Json doc = syncbus::Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!whole.ok || doc.is_discarded()) return 0;
  if (!doc.is_object()) std::abort();  // accepted a body that is not a list
  const syncbus::Json& items = doc.contains("items") ? doc["items"] : syncbus::Json();
  if (!items.is_array()) {
    if (!whole.items.empty()) std::abort();
    return 0;
  }
  if (items.size() != whole.items.size()) std::abort();
  for (size_t i = 0; i < items.size(); ++i) {
    if (syncbus::Json::parse(whole.items[i], nullptr, false) != items[i]) std::abort();
  }
  if (doc.contains("metadata") &&
      (whole.metadata.empty() ||
       syncbus::Json::parse(whole.metadata.back(), nullptr, false) != doc["metadata"])) {
    std::abort();
  }
  return 0;
}
