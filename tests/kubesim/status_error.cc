#include "tests/kubesim/status_error.h"

#include <algorithm>

namespace syncbus::kubesim {

Json StatusError::ToJson() const {
  Json status = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", Json::object()},
                 {"status", "Failure"}, {"message", message}, {"code", code}};
  if (!reason.empty()) status["reason"] = reason;
  if (!list_continue.empty()) status["metadata"]["continue"] = list_continue;
  Json details = Json::object();
  if (!name.empty()) details["name"] = name;
  if (!group.empty()) details["group"] = group;
  if (!kind.empty()) details["kind"] = kind;
  if (!uid.empty()) details["uid"] = uid;
  if (!causes.empty()) {
    Json list = Json::array();
    for (const auto& c : causes) {
      Json cause = Json::object();
      if (!c.type.empty()) cause["reason"] = c.type;
      if (!c.message.empty()) cause["message"] = c.message;
      if (!c.field.empty()) cause["field"] = c.field;
      list.push_back(std::move(cause));
    }
    details["causes"] = std::move(list);
  }
  if (retry_after_seconds > 0) details["retryAfterSeconds"] = retry_after_seconds;
  if (!details.empty()) status["details"] = std::move(details);
  return status;
}

namespace {

// Go's rendering of a bad value in field errors: strings quoted, scalars plain, null "null".
std::string RenderValue(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_string() || v.is_number() || v.is_boolean()) return v.dump();
  return v.dump();
}

const char* TypeText(FieldError::Type t) {
  switch (t) {
    case FieldError::Type::kRequired: return "Required value";
    case FieldError::Type::kInvalid:
    case FieldError::Type::kTypeInvalid: return "Invalid value";
    case FieldError::Type::kNotSupported: return "Unsupported value";
    case FieldError::Type::kForbidden: return "Forbidden";
    case FieldError::Type::kDuplicate: return "Duplicate value";
    case FieldError::Type::kTooLong: return "Too long";
    case FieldError::Type::kTooMany: return "Too many";
  }
  return "Invalid value";
}

}  // namespace

const char* FieldError::CauseType() const {
  switch (type) {
    case Type::kRequired: return "FieldValueRequired";
    case Type::kInvalid: return "FieldValueInvalid";
    case Type::kTypeInvalid: return "FieldValueTypeInvalid";
    case Type::kNotSupported: return "FieldValueNotSupported";
    case Type::kForbidden: return "FieldValueForbidden";
    case Type::kDuplicate: return "FieldValueDuplicate";
    case Type::kTooLong: return "FieldValueTooLong";
    case Type::kTooMany: return "FieldValueTooMany";
  }
  return "FieldValueInvalid";
}

std::string FieldError::Body() const {
  std::string s = TypeText(type);
  switch (type) {
    case Type::kRequired:
    case Type::kForbidden:
    case Type::kTooLong: break;
    default: s += ": " + RenderValue(value);
  }
  if (type == Type::kNotSupported && !supported.empty()) {
    std::string list;
    for (const auto& v : supported) {
      if (!list.empty()) list += ", ";
      list += Json(v).dump();
    }
    s += ": supported values: " + list;
  }
  if (!detail.empty()) s += ": " + detail;
  return s;
}

std::string FieldError::ToString() const {
  return field + ": " + Body();
}

FieldError Required(std::string field, std::string detail) {
  return {FieldError::Type::kRequired, std::move(field), nullptr, std::move(detail), {}};
}
FieldError Invalid(std::string field, Json value, std::string detail) {
  return {FieldError::Type::kInvalid, std::move(field), std::move(value), std::move(detail), {}};
}
FieldError TypeInvalid(std::string field, Json value, std::string detail) {
  return {
      FieldError::Type::kTypeInvalid, std::move(field), std::move(value), std::move(detail), {}};
}
FieldError NotSupported(std::string field, Json value, std::vector<std::string> supported) {
  return {FieldError::Type::kNotSupported,
          std::move(field),
          std::move(value),
          {},
          std::move(supported)};
}
FieldError Forbidden(std::string field, std::string detail) {
  return {FieldError::Type::kForbidden, std::move(field), nullptr, std::move(detail), {}};
}
FieldError Duplicate(std::string field, Json value) {
  return {FieldError::Type::kDuplicate, std::move(field), std::move(value), {}, {}};
}
FieldError TooLong(std::string field, Json value, long long max) {
  return {FieldError::Type::kTooLong,
          std::move(field),
          std::move(value),
          "may not be longer than " + std::to_string(max),
          {}};
}
FieldError TooMany(std::string field, long long actual, long long max) {
  return {FieldError::Type::kTooMany,
          std::move(field),
          actual,
          "must have at most " + std::to_string(max) + " items",
          {}};
}

std::string GoQuote(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (size_t i = 0; i < text.size();) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      // A well-formed UTF-8 sequence stays as it is; any other byte is \xNN.
      size_t len = c >= 0xc2 && c <= 0xdf   ? 2
                   : c >= 0xe0 && c <= 0xef ? 3
                   : c >= 0xf0 && c <= 0xf4 ? 4
                                            : 0;
      bool whole = len > 0 && i + len <= text.size();
      for (size_t k = 1; whole && k < len; ++k) {
        whole = (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80;
      }
      if (whole) {
        out.append(text.substr(i, len));
        i += len;
        continue;
      }
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\a': out += "\\a"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\v': out += "\\v"; break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 0xf];
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  return out + "\"";
}

std::string Qualified(const std::string& name, const std::string& group) {
  return group.empty() ? name : name + "." + group;
}

StatusError NotFoundError(const std::string& resource, const std::string& group,
                          const std::string& name) {
  StatusError e;
  e.code = 404;
  e.reason = "NotFound";
  e.message = Qualified(resource, group) + " " + Json(name).dump() + " not found";
  e.name = name;
  e.group = group;
  e.kind = resource;
  return e;
}

StatusError AlreadyExistsError(const std::string& resource, const std::string& group,
                               const std::string& name) {
  StatusError e;
  e.code = 409;
  e.reason = "AlreadyExists";
  e.message = Qualified(resource, group) + " " + Json(name).dump() + " already exists";
  e.name = name;
  e.group = group;
  e.kind = resource;
  return e;
}

StatusError ConflictError(const std::string& resource, const std::string& group,
                          const std::string& name, const std::string& detail) {
  StatusError e;
  e.code = 409;
  e.reason = "Conflict";
  e.message = "Operation cannot be fulfilled on " + Qualified(resource, group) + " " +
              Json(name).dump() + ": " + detail;
  e.name = name;
  e.group = group;
  e.kind = resource;
  return e;
}

StatusError ModifiedConflict(const std::string& resource, const std::string& group,
                             const std::string& name) {
  return ConflictError(resource, group, name,
                       "the object has been modified; please apply your changes to the latest "
                       "version and try again");
}

StatusError InvalidError(const std::string& kind, const std::string& group, const std::string& name,
                         const std::vector<FieldError>& errors) {
  StatusError e;
  e.code = 422;
  e.reason = "Invalid";
  e.name = name;
  e.group = group;
  e.kind = kind;
  e.message = Qualified(kind, group) + " " + Json(name).dump() + " is invalid";
  std::vector<std::string> texts;
  for (const auto& fe : errors) {
    e.causes.push_back({fe.CauseType(), fe.Body(), fe.field});
    std::string text = fe.ToString();
    if (std::find(texts.begin(), texts.end(), text) == texts.end()) texts.push_back(text);
  }
  if (texts.size() == 1) {
    e.message += ": " + texts[0];
  } else if (texts.size() > 1) {
    std::string joined;
    for (const auto& t : texts) joined += (joined.empty() ? "" : ", ") + t;
    e.message += ": [" + joined + "]";
  }
  return e;
}

StatusError BadRequest(std::string message) {
  StatusError e;
  e.code = 400;
  e.reason = "BadRequest";
  e.message = std::move(message);
  return e;
}

StatusError MethodNotAllowed() {
  StatusError e;
  e.code = 405;
  e.reason = "MethodNotAllowed";
  e.message = "the server does not allow this method on the requested resource";
  return e;
}

StatusError UnsupportedMediaType(const std::vector<std::string>& accepted) {
  StatusError e;
  e.code = 415;
  e.reason = "UnsupportedMediaType";
  std::string list;
  for (const auto& a : accepted) list += (list.empty() ? "" : ", ") + a;
  e.message =
      "the body of the request was in an unknown format - accepted media types include: " + list;
  return e;
}

StatusError Expired(std::string message) {
  StatusError e;
  e.code = 410;
  e.reason = "Expired";
  e.message = std::move(message);
  return e;
}

StatusError Forbidden403(std::string message) {
  StatusError e;
  e.code = 403;
  e.reason = "Forbidden";
  e.message = std::move(message);
  return e;
}

StatusError TooLargeResourceVersion(unsigned long long requested, unsigned long long current,
                                    int retry_after_seconds) {
  StatusError e;
  e.code = 504;
  e.reason = "Timeout";
  e.message = "Timeout: Too large resource version: " + std::to_string(requested) +
              ", current: " + std::to_string(current);
  e.causes.push_back({"ResourceVersionTooLarge", "Too large resource version", ""});
  e.retry_after_seconds = retry_after_seconds;
  return e;
}

StatusError UnclassifiedError(std::string message) {
  StatusError e;
  e.code = 500;
  e.message = std::move(message);
  return e;
}

}  // namespace syncbus::kubesim
