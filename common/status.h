// Status and Result<T>: expected failures as values (no exceptions across module boundaries).
// Value types; thread-compatible (no shared state).
#pragma once

#include <cassert>
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace syncbus {

enum class Code {
  kOk = 0,
  kInvalidArgument,  // malformed input: bad config, bad message, invalid object (HTTP 400/422)
  kNotFound,         // HTTP 404
  kAlreadyExists,    // HTTP 409 reason AlreadyExists
  kConflict,         // HTTP 409 (resourceVersion or field-manager conflict)
  kGone,             // HTTP 410: resourceVersion too old, relist
  kUnauthorized,     // HTTP 401/403
  kUnsupported,      // HTTP 405/415, or a feature we do not handle
  kTooManyRequests,  // HTTP 429 (retry_after set when the server said so)
  kUnavailable,      // connection refused/reset, 5xx, broker down: transient
  kTimeout,          // deadline exceeded: transient
  kCancelled,        // shutdown in progress
  kInternal,         // a bug or an impossible state
};

const char* CodeName(Code code);

// True for failures that a retry may cure without anyone editing anything.
bool IsTransient(Code code);

class Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return {}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // HTTP status code when the failure came from an HTTP peer, else 0.
  int http_status() const { return http_status_; }
  // Server-requested delay before retrying (HTTP Retry-After), zero if none.
  std::chrono::milliseconds retry_after() const { return retry_after_; }

  Status& WithHttpStatus(int status) {
    http_status_ = status;
    return *this;
  }
  Status& WithRetryAfter(std::chrono::milliseconds d) {
    retry_after_ = d;
    return *this;
  }
  // Prefixes context: "reading ClusterSync ns/name: <message>".
  Status Annotate(const std::string& context) const;

  // "NotFound: message" (or "OK").
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
  int http_status_ = 0;
  std::chrono::milliseconds retry_after_{0};
};

inline Status InvalidArgument(std::string m) {
  return {Code::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) {
  return {Code::kNotFound, std::move(m)};
}
inline Status Unavailable(std::string m) {
  return {Code::kUnavailable, std::move(m)};
}
inline Status Internal(std::string m) {
  return {Code::kInternal, std::move(m)};
}

// Result<T>: either a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  // Implicit by design: a function that returns a Result<T> returns a T or a failed Status.
  Result(T value) : v_(std::move(value)) {}
  Result(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).ok()); }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & {
    assert(ok());
    return std::get<T>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

inline const Status& ToStatus(const Status& s) {
  return s;
}
template <typename T>
const Status& ToStatus(const Result<T>& r) {
  return r.status();
}

}  // namespace syncbus

// Returns early from the enclosing function (which returns Status or Result<U>) on failure.
#define SYNCBUS_RETURN_IF_ERROR(expr)                                       \
  do {                                                                      \
    const auto& syncbus_status_ = (expr);                                   \
    if (!syncbus_status_.ok()) return ::syncbus::ToStatus(syncbus_status_); \
  } while (0)
