#include "tests/kubesim/continue_token.h"

#include <optional>
#include <variant>
#include <vector>

#include "common/base64.h"
#include "common/json.h"

namespace syncbus::kubesim {
namespace {

// base64.RawURLEncoding.DecodeString: no padding, '\r' and '\n' skipped, the unused bits of a
// partial last group ignored. Fails with the offset Go's CorruptInputError reports.
std::variant<std::string, size_t> DecodeRawUrlBase64(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return -1;
  };
  std::string out;
  size_t si = 0;
  while (true) {
    uint32_t group = 0;
    size_t got = 0;
    while (got < 4) {
      if (si == text.size()) {
        if (got == 0) return out;
        if (got == 1) return si - 1;
        break;
      }
      char c = text[si++];
      int v = value(c);
      if (v >= 0) {
        group |= static_cast<uint32_t>(v) << (18 - 6 * got);
        ++got;
      } else if (c != '\n' && c != '\r') {
        return si - 1;
      }
    }
    out.push_back(static_cast<char>(group >> 16));
    if (got > 2) out.push_back(static_cast<char>((group >> 8) & 0xff));
    if (got > 3) out.push_back(static_cast<char>(group & 0xff));
    if (got < 4) return out;
  }
}

// Go's quoteChar in encoding/json's syntax errors: 'x', '\'', '"', '\n', '\x00', '\u0081'.
std::string QuoteChar(unsigned char c) {
  if (c == '\'') return R"('\'')";
  if (c == '"') return R"('"')";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string inner;
  if (c >= 0x80) {
    // strconv.Quote of the rune U+0080..U+00FF: printable ones as UTF-8, the rest as \u00XX.
    if (c < 0xa1 || c == 0xad) {
      inner = std::string("\\u00") + kHex[c >> 4] + kHex[c & 0xf];
    } else {
      inner = {static_cast<char>(0xc0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3f))};
    }
  } else {
    inner = GoQuote(std::string(1, static_cast<char>(c)));
    inner = inner.substr(1, inner.size() - 2);
  }
  return "'" + inner + "'";
}

// encoding/json's checkValid: the first syntax error of `data` in Go's words, if any.
std::optional<std::string> GoJsonSyntaxError(std::string_view data) {
  enum class State {
    kBeginValue,
    kBeginValueOrEmpty,
    kBeginStringOrEmpty,
    kBeginString,
    kEndValue,
    kEndTop,
    kInString,
    kInStringEsc,
    kInStringEscU,
    kNeg,
    kOne,
    kZero,
    kDot,
    kDotZero,
    kE,
    kESign,
    kEZero,
    kLiteral,
  };
  enum class Parse { kObjectKey, kObjectValue, kArrayValue };
  State state = State::kBeginValue;
  std::vector<Parse> stack;
  std::string_view literal;  // the rest of true/false/null
  std::string_view literal_name;
  int hex_left = 0;
  std::optional<std::string> error;
  auto fail = [&](unsigned char c, const std::string& context) {
    if (!error) error = "invalid character " + QuoteChar(c) + " " + context;
  };
  auto space = [](unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  auto digit = [](unsigned char c) { return c >= '0' && c <= '9'; };
  bool end_top = false;

  // One step of Go's scanner; false once it failed.
  auto step = [&](unsigned char c) -> bool {
    while (true) {
      switch (state) {
        case State::kBeginValueOrEmpty:
          if (space(c)) return true;
          if (c == ']') {
            state = State::kEndValue;
            continue;
          }
          [[fallthrough]];
        case State::kBeginValue:
          if (space(c)) return true;
          switch (c) {
            case '{':
              state = State::kBeginStringOrEmpty;
              stack.push_back(Parse::kObjectKey);
              return true;
            case '[':
              state = State::kBeginValueOrEmpty;
              stack.push_back(Parse::kArrayValue);
              return true;
            case '"': state = State::kInString; return true;
            case '-': state = State::kNeg; return true;
            case '0': state = State::kZero; return true;
            case 't':
              literal = "rue";
              literal_name = "true";
              state = State::kLiteral;
              return true;
            case 'f':
              literal = "alse";
              literal_name = "false";
              state = State::kLiteral;
              return true;
            case 'n':
              literal = "ull";
              literal_name = "null";
              state = State::kLiteral;
              return true;
            default: break;
          }
          if (c >= '1' && c <= '9') {
            state = State::kOne;
            return true;
          }
          fail(c, "looking for beginning of value");
          return false;
        case State::kBeginStringOrEmpty:
          if (space(c)) return true;
          if (c == '}') {
            stack.back() = Parse::kObjectValue;
            state = State::kEndValue;
            continue;
          }
          [[fallthrough]];
        case State::kBeginString:
          if (space(c)) return true;
          if (c == '"') {
            state = State::kInString;
            return true;
          }
          fail(c, "looking for beginning of object key string");
          return false;
        case State::kEndValue:
          if (stack.empty()) {
            end_top = true;
            state = State::kEndTop;
            continue;
          }
          if (space(c)) return true;
          switch (stack.back()) {
            case Parse::kObjectKey:
              if (c == ':') {
                stack.back() = Parse::kObjectValue;
                state = State::kBeginValue;
                return true;
              }
              fail(c, "after object key");
              return false;
            case Parse::kObjectValue:
              if (c == ',') {
                stack.back() = Parse::kObjectKey;
                state = State::kBeginString;
                return true;
              }
              if (c == '}') {
                stack.pop_back();
                return true;
              }
              fail(c, "after object key:value pair");
              return false;
            case Parse::kArrayValue:
              if (c == ',') {
                state = State::kBeginValue;
                return true;
              }
              if (c == ']') {
                stack.pop_back();
                return true;
              }
              fail(c, "after array element");
              return false;
          }
          return false;
        case State::kEndTop:
          if (!space(c)) fail(c, "after top-level value");
          return !error;
        case State::kInString:
          if (c == '"') {
            state = State::kEndValue;
          } else if (c == '\\') {
            state = State::kInStringEsc;
          } else if (c < 0x20) {
            fail(c, "in string literal");
            return false;
          }
          return true;
        case State::kInStringEsc:
          if (c == 'u') {
            hex_left = 4;
            state = State::kInStringEscU;
            return true;
          }
          if (std::string_view("bfnrt\\/\"").find(static_cast<char>(c)) != std::string_view::npos) {
            state = State::kInString;
            return true;
          }
          fail(c, "in string escape code");
          return false;
        case State::kInStringEscU:
          if (digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) {
            if (--hex_left == 0) state = State::kInString;
            return true;
          }
          fail(c, "in \\u hexadecimal character escape");
          return false;
        case State::kNeg:
          if (c == '0') {
            state = State::kZero;
            return true;
          }
          if (c >= '1' && c <= '9') {
            state = State::kOne;
            return true;
          }
          fail(c, "in numeric literal");
          return false;
        case State::kOne:
          if (digit(c)) return true;
          [[fallthrough]];
        case State::kZero:
          if (c == '.') {
            state = State::kDot;
            return true;
          }
          if (c == 'e' || c == 'E') {
            state = State::kE;
            return true;
          }
          state = State::kEndValue;
          continue;
        case State::kDot:
          if (digit(c)) {
            state = State::kDotZero;
            return true;
          }
          fail(c, "after decimal point in numeric literal");
          return false;
        case State::kDotZero:
          if (digit(c)) return true;
          if (c == 'e' || c == 'E') {
            state = State::kE;
            return true;
          }
          state = State::kEndValue;
          continue;
        case State::kE:
          if (c == '+' || c == '-') {
            state = State::kESign;
            return true;
          }
          [[fallthrough]];
        case State::kESign:
          if (digit(c)) {
            state = State::kEZero;
            return true;
          }
          fail(c, "in exponent of numeric literal");
          return false;
        case State::kEZero:
          if (digit(c)) return true;
          state = State::kEndValue;
          continue;
        case State::kLiteral:
          if (c == static_cast<unsigned char>(literal.front())) {
            literal.remove_prefix(1);
            if (literal.empty()) state = State::kEndValue;
            return true;
          }
          fail(c, "in literal " + std::string(literal_name) + " (expecting '" + literal.front() +
                      "')");
          return false;
      }
    }
  };
  for (char c : data) {
    if (!step(static_cast<unsigned char>(c))) return error;
  }
  if (error) return error;
  if (!end_top) step(' ');  // the end of the input, as Go's scanner.eof() sees it
  if (error) return error;
  if (!end_top) return "unexpected end of JSON input";
  return std::nullopt;
}

// Reads values of JSON text that GoJsonSyntaxError accepted, as encoding/json decodes them.
class GoJsonReader {
 public:
  explicit GoJsonReader(std::string_view data) : data_(data) {}

  // The next value's first byte, after blanks.
  char Peek() {
    while (pos_ < data_.size() && (data_[pos_] == ' ' || data_[pos_] == '\t' ||
                                   data_[pos_] == '\r' || data_[pos_] == '\n')) {
      ++pos_;
    }
    return pos_ < data_.size() ? data_[pos_] : '\0';
  }
  void Expect() { ++pos_; }  // the '{', ':', ',' or '}' that Peek() showed

  // The name encoding/json gives the next value's kind in "cannot unmarshal X".
  const char* KindName() {
    switch (Peek()) {
      case '{': return "object";
      case '[': return "array";
      case '"': return "string";
      case 't':
      case 'f': return "bool";
      case 'n': return "null";
      default: return "number";
    }
  }

  // A string value, unescaped; bad UTF-8 and lone surrogates become U+FFFD, as in Go.
  std::string String() {
    Peek();
    ++pos_;
    std::string raw;
    while (data_[pos_] != '"') {
      char c = data_[pos_++];
      if (c != '\\') {
        raw.push_back(c);
        continue;
      }
      char e = data_[pos_++];
      switch (e) {
        case 'b': raw.push_back('\b'); break;
        case 'f': raw.push_back('\f'); break;
        case 'n': raw.push_back('\n'); break;
        case 'r': raw.push_back('\r'); break;
        case 't': raw.push_back('\t'); break;
        case 'u': AppendEscapedRune(raw); break;
        default: raw.push_back(e);
      }
    }
    ++pos_;
    return ValidUtf8(raw);
  }

  // A number, true, false or null as written.
  std::string_view Literal() {
    Peek();
    size_t start = pos_;
    while (pos_ < data_.size() &&
           std::string_view(",]} \t\r\n").find(data_[pos_]) == std::string_view::npos) {
      ++pos_;
    }
    return data_.substr(start, pos_ - start);
  }

  void Skip() {
    char c = Peek();
    if (c == '"') {
      String();
    } else if (c == '{' || c == '[') {
      ++pos_;
      while (Peek() != (c == '{' ? '}' : ']')) {
        if (c == '{') {
          String();
          Peek();
          ++pos_;  // ':'
        }
        Skip();
        if (Peek() == ',') ++pos_;
      }
      ++pos_;
    } else {
      Literal();
    }
  }

 private:
  static void AppendUtf8(std::string& out, uint32_t rune) {
    if (rune < 0x80) {
      out.push_back(static_cast<char>(rune));
    } else if (rune < 0x800) {
      out.push_back(static_cast<char>(0xc0 | (rune >> 6)));
      out.push_back(static_cast<char>(0x80 | (rune & 0x3f)));
    } else if (rune < 0x10000) {
      out.push_back(static_cast<char>(0xe0 | (rune >> 12)));
      out.push_back(static_cast<char>(0x80 | ((rune >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (rune & 0x3f)));
    } else {
      out.push_back(static_cast<char>(0xf0 | (rune >> 18)));
      out.push_back(static_cast<char>(0x80 | ((rune >> 12) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | ((rune >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (rune & 0x3f)));
    }
  }

  uint32_t Hex4() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = data_[pos_++];
      v = v * 16 + static_cast<uint32_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return v;
  }

  // After "\u": the rune, joined with a following low surrogate escape when it is a high one.
  void AppendEscapedRune(std::string& out) {
    uint32_t rune = Hex4();
    if (rune >= 0xd800 && rune < 0xdc00 && data_.substr(pos_, 2) == "\\u") {
      size_t back = pos_;
      pos_ += 2;
      uint32_t low = Hex4();
      if (low >= 0xdc00 && low < 0xe000) {
        AppendUtf8(out, 0x10000 + ((rune - 0xd800) << 10) + (low - 0xdc00));
        return;
      }
      pos_ = back;
    }
    AppendUtf8(out, rune >= 0xd800 && rune < 0xe000 ? 0xfffd : rune);
  }

  static std::string ValidUtf8(const std::string& raw) {
    std::string out;
    for (size_t i = 0; i < raw.size();) {
      auto c = static_cast<unsigned char>(raw[i]);
      size_t len = c < 0x80                 ? 1
                   : c >= 0xc2 && c <= 0xdf ? 2
                   : c >= 0xe0 && c <= 0xef ? 3
                   : c >= 0xf0 && c <= 0xf4 ? 4
                                            : 0;
      bool ok = len > 0 && i + len <= raw.size();
      for (size_t k = 1; ok && k < len; ++k) {
        auto next = static_cast<unsigned char>(raw[i + k]);
        ok = (next & 0xc0) == 0x80;
        if (k == 1) {  // no overlong forms, surrogates or runes past U+10FFFF
          ok = ok && !(c == 0xe0 && next < 0xa0) && !(c == 0xed && next >= 0xa0) &&
               !(c == 0xf0 && next < 0x90) && !(c == 0xf4 && next >= 0x90);
        }
      }
      if (ok) {
        out.append(raw, i, len);
        i += len;
      } else {
        out += "\xef\xbf\xbd";
        ++i;
      }
    }
    return out;
  }

  std::string_view data_;
  size_t pos_ = 0;
};

// Go's case-insensitive match of a key against a lower-case field name.
bool EqualFoldAscii(std::string_view key, std::string_view name) {
  if (key.size() != name.size()) return false;
  for (size_t i = 0; i < key.size(); ++i) {
    char c = key[i] >= 'A' && key[i] <= 'Z' ? static_cast<char>(key[i] | 0x20) : key[i];
    if (c != name[i]) return false;
  }
  return true;
}

// strconv.ParseInt(text, 10, 64) for a JSON number.
std::optional<int64_t> ParseInt64(std::string_view text) {
  bool negative = !text.empty() && text.front() == '-';
  if (negative) text.remove_prefix(1);
  if (text.empty()) return std::nullopt;
  uint64_t v = 0;
  const uint64_t limit = negative ? 9223372036854775808ULL : 9223372036854775807ULL;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    auto digit = static_cast<uint64_t>(c - '0');
    if (v > (limit - digit) / 10) return std::nullopt;
    v = v * 10 + digit;
  }
  return negative ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
}

// The token's fields as json.Unmarshal fills storage.continueToken (its keys matched
// case-insensitively, null leaving a field alone), or the first UnmarshalTypeError's text.
struct RawToken {
  std::string version;
  int64_t rv = 0;
  std::string start;
};

std::variant<RawToken, std::string> UnmarshalToken(std::string_view json) {
  GoJsonReader reader(json);
  RawToken token;
  if (reader.Peek() == 'n') return token;
  if (reader.Peek() != '{') {
    return std::string("json: cannot unmarshal ") + reader.KindName() +
           " into Go value of type storage.continueToken";
  }
  std::optional<std::string> error;
  auto mismatch = [&](const std::string& what, const char* field, const char* type) {
    if (!error) {
      error = "json: cannot unmarshal " + what + " into Go struct field continueToken." + field +
              " of type " + type;
    }
  };
  reader.Expect();
  while (reader.Peek() != '}') {
    std::string key = reader.String();
    reader.Peek();
    reader.Expect();  // ':'
    const char* field = nullptr;
    for (const char* name : {"v", "rv", "start"}) {
      if (key == name) field = name;
    }
    for (const char* name : {"v", "rv", "start"}) {
      if (field == nullptr && EqualFoldAscii(key, name)) field = name;
    }
    char first = reader.Peek();
    if (field == nullptr || first == 'n') {
      reader.Skip();
    } else if (std::string_view(field) == "rv") {
      if (first == '"' || first == '{' || first == '[' || first == 't' || first == 'f') {
        mismatch(reader.KindName(), field, "int64");
        reader.Skip();
      } else {
        std::string_view literal = reader.Literal();
        std::optional<int64_t> rv = ParseInt64(literal);
        if (rv) {
          token.rv = *rv;
        } else {
          mismatch("number " + std::string(literal), field, "int64");
        }
      }
    } else if (first == '"') {
      (std::string_view(field) == "v" ? token.version : token.start) = reader.String();
    } else {
      mismatch(reader.KindName(), field, "string");
      reader.Skip();
    }
    if (reader.Peek() == ',') reader.Expect();
  }
  if (error) return *error;
  return token;
}

// Whether "/" + `key` (unless it starts with '/') is what Go's path.Clean makes of it.
bool IsCleanPath(const std::string& key) {
  std::string path = key.starts_with('/') ? key : "/" + key;
  if (path == "/") return true;
  if (path.back() == '/') return false;
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string_view part(path.data() + start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

StatusError InvalidToken(const std::string& why) {
  return BadRequest("invalid continue token: continue key is not valid" + why);
}

}  // namespace

std::string EncodeContinue(int64_t rv, const std::string& start) {
  Json token = {{"v", "meta.k8s.io/v1"}, {"rv", rv}, {"start", start}};
  std::string text = EncodeBase64(token.dump());
  while (!text.empty() && text.back() == '=') text.pop_back();
  for (char& c : text) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return text;
}

Outcome<ContinueToken> DecodeContinue(std::string_view text) {
  auto decoded = DecodeRawUrlBase64(text);
  if (const size_t* offset = std::get_if<size_t>(&decoded)) {
    return InvalidToken(": illegal base64 data at input byte " + std::to_string(*offset));
  }
  const std::string& json = std::get<std::string>(decoded);
  if (auto syntax = GoJsonSyntaxError(json)) return InvalidToken(": " + *syntax);
  auto fields = UnmarshalToken(json);
  if (const std::string* mismatch = std::get_if<std::string>(&fields)) {
    return InvalidToken(": " + *mismatch);
  }
  RawToken& token = std::get<RawToken>(fields);
  if (token.version != "meta.k8s.io/v1") {
    return InvalidToken(": server does not recognize this encoded version " + token.version);
  }
  if (token.rv == 0) {
    return InvalidToken(": incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
  }
  if (token.start.empty()) {
    return InvalidToken(": encoded start key empty (version meta.k8s.io/v1)");
  }
  if (!IsCleanPath(token.start)) return InvalidToken(": " + token.start);
  return ContinueToken{token.rv, std::move(token.start)};
}

}  // namespace syncbus::kubesim
