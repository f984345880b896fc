#include "common/kube/list_splitter.h"

#include <utility>

namespace syncbus::kube {
namespace {

// An API server's object is at most 1.5 MiB in etcd; its JSON may be larger, not this large.
constexpr size_t kMaxValueBytes = size_t{64} << 20;

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

}  // namespace

ListSplitter::ListSplitter(std::function<Status(std::string_view item)> on_item,
                           std::function<Status(std::string_view metadata)> on_metadata)
    : on_item_(std::move(on_item)), on_metadata_(std::move(on_metadata)) {}

Status ListSplitter::Fail(std::string message) {
  error_ = Status(Code::kInvalidArgument, "list response: " + std::move(message));
  return error_;
}

Status ListSplitter::Feed(std::string_view chunk) {
  if (!error_.ok()) return error_;
  size_t i = 0;
  while (i < chunk.size()) {
    if (capture_ != Capture::kNone && in_string_ && !escaped_) {
      // Most of a body is string contents: take a run of them at once.
      size_t end = i;
      while (end < chunk.size() && chunk[end] != '"' && chunk[end] != '\\') ++end;
      if (end > i) {
        if (capture_ != Capture::kSkip) {
          if (text_.size() + (end - i) > kMaxValueBytes) return Fail("a value larger than 64 MiB");
          text_.append(chunk.substr(i, end - i));
        }
        i = end;
        continue;
      }
    }
    SYNCBUS_RETURN_IF_ERROR(Char(chunk[i]));
    ++i;
  }
  return Status();
}

Status ListSplitter::Finish() {
  if (!error_.ok()) return error_;
  if (where_ != Where::kAfterDocument) return Fail("the body ended before the list did");
  return Status();
}

Status ListSplitter::BeginValue(char c, Capture capture) {
  capture_ = capture;
  text_.clear();
  depth_ = 0;
  in_string_ = false;
  escaped_ = false;
  scalar_ = false;
  if (c == '{' || c == '[') {
    depth_ = 1;
  } else if (c == '"') {
    in_string_ = true;
  } else if (c == '}' || c == ']' || c == ',' || c == ':') {
    return Fail(std::string("unexpected '") + c + "' where a value belongs");
  } else {
    scalar_ = true;
  }
  if (capture_ != Capture::kSkip) text_.push_back(c);
  return Status();
}

Status ListSplitter::EndValue() {
  const Capture done = capture_;
  capture_ = Capture::kNone;
  after_value_ = true;
  Status s;
  if (done == Capture::kItem) {
    s = on_item_(text_);
  } else if (done == Capture::kMetadata) {
    s = on_metadata_(text_);
  }
  text_.clear();
  if (!s.ok()) error_ = s;
  return s;
}

Status ListSplitter::Char(char c) {
  if (capture_ != Capture::kNone) {  // inside a value
    if (scalar_) {
      if (IsSpace(c) || c == ',' || c == '}' || c == ']') {
        SYNCBUS_RETURN_IF_ERROR(EndValue());
        return Char(c);  // the character after the scalar belongs to what holds it
      }
    } else if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if (c == '}' || c == ']') {
      --depth_;
    }
    if (capture_ != Capture::kSkip) {
      if (text_.size() >= kMaxValueBytes) return Fail("a value larger than 64 MiB");
      text_.push_back(c);
    }
    if (!scalar_ && !in_string_ && depth_ == 0) return EndValue();
    return Status();
  }
  if (in_key_) {
    if (c == '\\') return Fail("an escaped character in a top-level key");  // never sent
    if (c == '"') {
      in_key_ = false;
      where_ = Where::kColon;
      return Status();
    }
    if (key_.size() < 64) key_.push_back(c);  // keys of interest are short; longer ones differ
    return Status();
  }
  if (IsSpace(c)) return Status();
  switch (where_) {
    case Where::kBeforeDocument:
      if (c != '{') return Fail("not a JSON object");
      where_ = Where::kKey;
      after_value_ = false;
      first_ = true;
      return Status();
    case Where::kKey:
      if (c == '}' && (after_value_ || first_)) {
        where_ = Where::kAfterDocument;
        return Status();
      }
      if (after_value_) {
        if (c != ',') return Fail(std::string("expected ',' or '}', got '") + c + "'");
        after_value_ = false;
        return Status();
      }
      if (c != '"') return Fail(std::string("expected a key, got '") + c + "'");
      first_ = false;
      in_key_ = true;
      key_.clear();
      return Status();
    case Where::kColon:
      if (c != ':') return Fail(std::string("expected ':', got '") + c + "'");
      where_ = Where::kValue;
      return Status();
    case Where::kValue:
      where_ = Where::kKey;
      if (key_ == "items" && c == '[') {
        if (seen_items_) return Fail("two \"items\" arrays");
        seen_items_ = true;
        where_ = Where::kItems;
        after_value_ = false;
        first_ = true;
        return Status();
      }
      return BeginValue(c, key_ == "metadata" ? Capture::kMetadata : Capture::kSkip);
    case Where::kItems:
      if (c == ']' && (after_value_ || first_)) {
        where_ = Where::kKey;
        after_value_ = true;
        return Status();
      }
      if (after_value_) {
        if (c != ',') return Fail(std::string("expected ',' or ']' in items, got '") + c + "'");
        after_value_ = false;
        return Status();
      }
      first_ = false;
      return BeginValue(c, Capture::kItem);
    case Where::kAfterDocument: return Fail("more after the list's end");
  }
  return Status();
}

}  // namespace syncbus::kube
