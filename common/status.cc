#include "common/status.h"

namespace syncbus {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "InvalidArgument";
    case Code::kNotFound: return "NotFound";
    case Code::kAlreadyExists: return "AlreadyExists";
    case Code::kConflict: return "Conflict";
    case Code::kGone: return "Gone";
    case Code::kUnauthorized: return "Unauthorized";
    case Code::kUnsupported: return "Unsupported";
    case Code::kTooManyRequests: return "TooManyRequests";
    case Code::kUnavailable: return "Unavailable";
    case Code::kTimeout: return "Timeout";
    case Code::kCancelled: return "Cancelled";
    case Code::kInternal: return "Internal";
  }
  return "Unknown";
}

bool IsTransient(Code code) {
  switch (code) {
    case Code::kConflict:
    case Code::kTooManyRequests:
    case Code::kUnavailable:
    case Code::kTimeout: return true;
    default: return false;
  }
}

Status Status::Annotate(const std::string& context) const {
  if (ok()) return *this;
  Status s(code_, context + ": " + message_);
  s.http_status_ = http_status_;
  s.retry_after_ = retry_after_;
  return s;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

}  // namespace syncbus
