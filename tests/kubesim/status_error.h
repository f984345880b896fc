// StatusError: a failed API request as a kube-apiserver reports it (metav1.Status with reason,
// details and causes), the field errors behind 422 Invalid, and Outcome<T> to carry either.
// Value types; thread-compatible.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/json.h"

namespace syncbus::kubesim {

struct StatusCause {
  std::string type;  // "FieldValueInvalid", "FieldManagerConflict", ...
  std::string message;
  std::string field;
};

struct StatusError {
  int code = 500;
  std::string reason;  // "NotFound", "Conflict", ... (empty for reason Unknown)
  std::string message;
  // details (omitted when all empty)
  std::string name, group, kind, uid;
  std::vector<StatusCause> causes;
  int retry_after_seconds = 0;
  std::string list_continue;  // metadata.continue (410 on an expired continue token)

  Json ToJson() const;
};

// Field errors as k8s.io/apimachinery/pkg/util/validation/field reports them.
struct FieldError {
  enum class Type {
    kRequired,
    kInvalid,
    kTypeInvalid,
    kNotSupported,
    kForbidden,
    kDuplicate,
    kTooLong,
    kTooMany
  };
  Type type = Type::kInvalid;
  std::string field;  // "spec.resources[0].metadata.name"
  Json value;         // the bad value (kInvalid, kNotSupported, ...)
  std::string detail;
  std::vector<std::string> supported;  // kNotSupported

  // "Invalid value: \"x\": detail" (the cause message).
  std::string Body() const;
  // "field: Body()".
  std::string ToString() const;
  const char* CauseType() const;
};

FieldError Required(std::string field, std::string detail = {});
FieldError Invalid(std::string field, Json value, std::string detail);
FieldError TypeInvalid(std::string field, Json value, std::string detail);
FieldError NotSupported(std::string field, Json value, std::vector<std::string> supported);
FieldError Forbidden(std::string field, std::string detail);
FieldError Duplicate(std::string field, Json value);
FieldError TooLong(std::string field, Json value, long long max);
FieldError TooMany(std::string field, long long actual, long long max);

// Go's strconv.Quote, as kube-apiserver's messages quote a value with %q: double quotes, C-style
// escapes for control characters, \xNN for bytes that are not UTF-8.
std::string GoQuote(std::string_view text);

// A qualified resource or kind: "configmaps" / "syncsets.hive.openshift.io".
std::string Qualified(const std::string& name, const std::string& group);

StatusError NotFoundError(const std::string& resource, const std::string& group,
                          const std::string& name);
StatusError AlreadyExistsError(const std::string& resource, const std::string& group,
                               const std::string& name);
// 409 "Operation cannot be fulfilled on <resource> \"name\": <detail>".
StatusError ConflictError(const std::string& resource, const std::string& group,
                          const std::string& name, const std::string& detail);
StatusError ModifiedConflict(const std::string& resource, const std::string& group,
                             const std::string& name);
// 422 "<Kind> \"name\" is invalid: <errors>".
StatusError InvalidError(const std::string& kind, const std::string& group, const std::string& name,
                         const std::vector<FieldError>& errors);
StatusError BadRequest(std::string message);
StatusError MethodNotAllowed();
StatusError UnsupportedMediaType(const std::vector<std::string>& accepted);
StatusError Expired(std::string message);       // 410 reason Expired
StatusError Forbidden403(std::string message);  // 403 reason Forbidden
// 504 Timeout "Timeout: Too large resource version: N, current: M" with the
// ResourceVersionTooLarge cause; `retry_after_seconds` 0 leaves retryAfterSeconds out.
StatusError TooLargeResourceVersion(unsigned long long requested, unsigned long long current,
                                    int retry_after_seconds);
// An error kube-apiserver passes on without classifying it (reason Unknown): 500 with just the
// message, e.g. etcd's "etcdserver: mvcc: required revision is a future revision".
StatusError UnclassifiedError(std::string message);

// Either a value or the StatusError of a failed request.
template <typename T>
class [[nodiscard]] Outcome {
 public:
  Outcome(T value) : v_(std::move(value)) {}            // NOLINT: implicit by design
  Outcome(StatusError error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return std::holds_alternative<T>(v_); }
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
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const StatusError& error() const {
    assert(!ok());
    return std::get<StatusError>(v_);
  }
  StatusError&& take_error() {
    assert(!ok());
    return std::get<StatusError>(std::move(v_));
  }

 private:
  std::variant<T, StatusError> v_;
};

}  // namespace syncbus::kubesim
