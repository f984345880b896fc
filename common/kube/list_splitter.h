// ListSplitter: splits a Kubernetes list response body ({"metadata":{...},"items":[...]}),
// arriving in chunks with arbitrary boundaries, into its top-level "metadata" value and each
// element of its top-level "items" array, as JSON text, without ever holding the whole body or
// parsing it into one tree: what a whole-collection list (served unpaged from the API server's
// watch cache) needs to stay within the memory of one item. It checks the document's structure
// (nesting, strings, escapes), not the grammar of scalars: each piece it hands out is parsed on
// its own. A top-level key with an escape in it (which no API server writes) is an error, so
// that a key is never misread. Not thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace syncbus::kube {

class ListSplitter {
 public:
  // `on_item` gets each element of "items" in order; `on_metadata` the "metadata" object. An
  // error either returns ends the split with that error.
  ListSplitter(std::function<Status(std::string_view item)> on_item,
               std::function<Status(std::string_view metadata)> on_metadata);

  // Takes the next chunk. After an error every later call returns it again.
  Status Feed(std::string_view chunk);
  // The body has ended: an error unless it was one complete JSON object.
  Status Finish();

 private:
  enum class Where {
    kBeforeDocument,  // leading whitespace
    kKey,             // top level: before a key, a ',' or the closing '}'
    kColon,           // top level: after a key
    kValue,           // top level: before a value
    kItems,           // inside "items": before an element, a ',' or the closing ']'
    kAfterDocument,   // trailing whitespace
  };
  enum class Capture { kNone, kMetadata, kItem, kSkip };

  Status Fail(std::string message);
  Status Char(char c);
  // A value of the top level or of "items" starts with `c`; `capture` says where its text goes.
  Status BeginValue(char c, Capture capture);
  // The value being read ended; hands out its text if it was captured.
  Status EndValue();

  std::function<Status(std::string_view)> on_item_, on_metadata_;
  Where where_ = Where::kBeforeDocument;
  Capture capture_ = Capture::kNone;
  std::string key_;  // the top-level key being read, or the last one read
  bool in_key_ = false;
  std::string text_;  // the captured value so far
  size_t depth_ = 0;  // brackets open inside the value being read
  bool in_string_ = false;
  bool escaped_ = false;
  bool scalar_ = false;       // the value being read is a number, true, false or null
  bool after_value_ = false;  // top level or "items": a value was read, a ',' or the end is next
  bool first_ = false;        // top level or "items": nothing read inside it yet
  bool seen_items_ = false;
  Status error_;
};

}  // namespace syncbus::kube
