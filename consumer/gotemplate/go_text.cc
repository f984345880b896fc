#include "consumer/gotemplate/go_text.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace syncbus::consumer::gotemplate {
namespace {

struct RuneRange {
  char32_t first;
  char32_t last;
};

#include "consumer/gotemplate/unicode_tables.inc"

template <size_t N>
bool InRanges(const RuneRange (&ranges)[N], char32_t r) {
  const RuneRange* end = ranges + N;
  const RuneRange* it = std::upper_bound(
      ranges, end, r, [](char32_t x, const RuneRange& range) { return x < range.first; });
  return it != ranges && r <= (it - 1)->last;
}

constexpr char kLowerHex[] = "0123456789abcdef";

char Lower(char c) {
  return static_cast<char>(c | ('a' - 'A'));
}

// One rune of a quoted string (strconv's appendEscapedRune).
void AppendEscapedRune(std::string& out, char32_t r, char quote, bool ascii_only) {
  if (r == static_cast<char32_t>(quote) || r == '\\') {
    out.push_back('\\');
    out.push_back(static_cast<char>(r));
    return;
  }
  if (ascii_only) {
    if (r < 0x80 && IsPrint(r)) {
      out.push_back(static_cast<char>(r));
      return;
    }
  } else if (IsPrint(r)) {
    AppendRune(out, r);
    return;
  }
  switch (r) {
    case '\a': out += "\\a"; return;
    case '\b': out += "\\b"; return;
    case '\f': out += "\\f"; return;
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    case '\v': out += "\\v"; return;
    default: break;
  }
  if (r < ' ' || r == 0x7F) {
    out += "\\x";
    out.push_back(kLowerHex[(r >> 4) & 0xF]);
    out.push_back(kLowerHex[r & 0xF]);
    return;
  }
  if (!ValidRune(r)) r = kRuneError;
  int digits = r < 0x10000 ? 4 : 8;
  out += r < 0x10000 ? "\\u" : "\\U";
  for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4)
    out.push_back(kLowerHex[(r >> shift) & 0xF]);
}

std::string QuoteWith(std::string_view s, char quote, bool ascii_only) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back(quote);
  while (!s.empty()) {
    DecodedRune d = DecodeRune(s);
    if (d.width == 1 && d.rune == kRuneError) {
      auto byte = static_cast<unsigned char>(s[0]);
      out += "\\x";
      out.push_back(kLowerHex[byte >> 4]);
      out.push_back(kLowerHex[byte & 0xF]);
    } else {
      AppendEscapedRune(out, d.rune, quote, ascii_only);
    }
    s.remove_prefix(static_cast<size_t>(d.width));
  }
  out.push_back(quote);
  return out;
}

std::string QuoteRuneWith(char32_t r, bool ascii_only) {
  std::string out = "'";
  if (!ValidRune(r)) r = kRuneError;
  AppendEscapedRune(out, r, '\'', ascii_only);
  out.push_back('\'');
  return out;
}

std::optional<int> Unhex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return std::nullopt;
}

// strconv's underscoreOK: '_' only between digits (a base prefix counts as a digit).
bool UnderscoreOk(std::string_view s) {
  char saw = '^';
  size_t i = 0;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  bool hex = false;
  if (s.size() >= 2 && s[0] == '0' &&
      (Lower(s[1]) == 'b' || Lower(s[1]) == 'o' || Lower(s[1]) == 'x')) {
    i = 2;
    saw = '0';
    hex = Lower(s[1]) == 'x';
  }
  for (; i < s.size(); ++i) {
    char c = s[i];
    if ((c >= '0' && c <= '9') || (hex && Lower(c) >= 'a' && Lower(c) <= 'f')) {
      saw = '0';
      continue;
    }
    if (c == '_') {
      if (saw != '0') return false;
      saw = '_';
      continue;
    }
    if (saw == '_') return false;
    saw = '!';
  }
  return saw != '_';
}

// Go's float syntax (strconv's readFloat): returns the text with underscores removed, ready for
// strtod, when the whole of s is a well-formed decimal or hexadecimal float.
std::optional<std::string> CleanFloatSyntax(std::string_view s) {
  size_t i = 0;
  std::string clean;
  bool underscores = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) clean.push_back(s[i++]);
  bool hex = false;
  if (i + 2 < s.size() && s[i] == '0' && Lower(s[i + 1]) == 'x') {
    hex = true;
    clean += "0x";
    i += 2;
  }
  bool saw_dot = false;
  bool saw_digits = false;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c == '_') {
      underscores = true;
      continue;
    }
    if (c == '.') {
      if (saw_dot) break;
      saw_dot = true;
      clean.push_back(c);
      continue;
    }
    if ((c >= '0' && c <= '9') || (hex && Lower(c) >= 'a' && Lower(c) <= 'f')) {
      saw_digits = true;
      clean.push_back(c);
      continue;
    }
    break;
  }
  if (!saw_digits) return std::nullopt;
  char exp_char = hex ? 'p' : 'e';
  if (i < s.size() && Lower(s[i]) == exp_char) {
    clean.push_back(exp_char);
    ++i;
    if (i >= s.size()) return std::nullopt;
    if (s[i] == '+' || s[i] == '-') clean.push_back(s[i++]);
    if (i >= s.size() || s[i] < '0' || s[i] > '9') return std::nullopt;
    for (; i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '_'); ++i) {
      if (s[i] == '_') {
        underscores = true;
        continue;
      }
      clean.push_back(s[i]);
    }
  } else if (hex) {
    return std::nullopt;  // a hexadecimal mantissa requires a 'p' exponent
  }
  if (i != s.size()) return std::nullopt;
  if (underscores && !UnderscoreOk(s)) return std::nullopt;
  return clean;
}

// Decimal digits of |v| with trailing zeros removed and the decimal point position (strconv's
// decimalSlice: value = 0.d1d2... * 10^dp). nd == 0 for zero.
struct Digits {
  std::string d;
  int dp = 0;
};

Digits FromScientific(std::string_view text) {
  Digits out;
  size_t e = text.find('e');
  for (char c : text.substr(0, e)) {
    if (c >= '0' && c <= '9') out.d.push_back(c);
  }
  int exp = 0;
  std::from_chars(text.data() + e + 1 + (text[e + 1] == '+' ? 1 : 0), text.data() + text.size(),
                  exp);
  out.dp = exp + 1;
  while (!out.d.empty() && out.d.back() == '0') out.d.pop_back();
  if (out.d.empty()) out.dp = 0;
  return out;
}

// Shortest digits that round-trip (prec < 0), or `digits` significant digits, correctly rounded.
Digits SignificantDigits(double v, int digits) {
  std::string buf(digits < 0 ? 64 : static_cast<size_t>(digits) + 32, '\0');
  std::to_chars_result r = digits < 0 ? std::to_chars(buf.data(), buf.data() + buf.size(), v,
                                                      std::chars_format::scientific)
                                      : std::to_chars(buf.data(), buf.data() + buf.size(), v,
                                                      std::chars_format::scientific, digits - 1);
  return FromScientific(std::string_view(buf.data(), static_cast<size_t>(r.ptr - buf.data())));
}

// Digits rounded to `decimals` places after the point (strconv's d.Round(d.dp + prec)).
Digits FixedDigits(double v, int decimals) {
  std::string buf(static_cast<size_t>(decimals) + 340, '\0');
  std::to_chars_result r =
      std::to_chars(buf.data(), buf.data() + buf.size(), v, std::chars_format::fixed, decimals);
  std::string_view text(buf.data(), static_cast<size_t>(r.ptr - buf.data()));
  Digits out;
  size_t dot = text.find('.');
  std::string_view integer = text.substr(0, dot);
  out.d = std::string(integer);
  if (dot != std::string_view::npos) out.d += text.substr(dot + 1);
  out.dp = static_cast<int>(integer.size());
  size_t lead = 0;
  while (lead < out.d.size() && out.d[lead] == '0') ++lead;
  out.d.erase(0, lead);
  out.dp -= static_cast<int>(lead);
  while (!out.d.empty() && out.d.back() == '0') out.d.pop_back();
  if (out.d.empty()) out.dp = 0;
  return out;
}

void FmtE(std::string& out, bool neg, const Digits& d, int prec, char fmt) {
  if (neg) out.push_back('-');
  out.push_back(d.d.empty() ? '0' : d.d[0]);
  if (prec > 0) {
    out.push_back('.');
    int nd = static_cast<int>(d.d.size());
    int i = 1;
    int m = std::min(nd, prec + 1);
    if (i < m) {
      out.append(d.d, 1, static_cast<size_t>(m - 1));
      i = m;
    }
    for (; i <= prec; ++i) out.push_back('0');
  }
  out.push_back(fmt);
  int exp = d.d.empty() ? 0 : d.dp - 1;
  out.push_back(exp < 0 ? '-' : '+');
  exp = std::abs(exp);
  if (exp < 10) out.push_back('0');
  out += std::to_string(exp);
}

void FmtF(std::string& out, bool neg, const Digits& d, int prec) {
  if (neg) out.push_back('-');
  int nd = static_cast<int>(d.d.size());
  if (d.dp > 0) {
    int m = std::min(nd, d.dp);
    out.append(d.d, 0, static_cast<size_t>(m));
    for (; m < d.dp; ++m) out.push_back('0');
  } else {
    out.push_back('0');
  }
  if (prec > 0) {
    out.push_back('.');
    for (int i = 0; i < prec; ++i) {
      int j = d.dp + i;
      out.push_back(j >= 0 && j < nd ? d.d[static_cast<size_t>(j)] : '0');
    }
  }
}

void AppendUnsigned(std::string& out, uint64_t v) {
  out += std::to_string(v);
}

void FmtB(std::string& out, bool neg, uint64_t mant, int exp) {
  if (neg) out.push_back('-');
  AppendUnsigned(out, mant);
  out.push_back('p');
  exp -= 52;
  if (exp >= 0) out.push_back('+');
  out += std::to_string(exp);
}

void FmtX(std::string& out, int prec, char fmt, bool neg, uint64_t mant, int exp) {
  if (mant == 0) exp = 0;
  mant <<= 60 - 52;
  while (mant != 0 && (mant & (uint64_t{1} << 60)) == 0) {
    mant <<= 1;
    --exp;
  }
  if (prec >= 0 && prec < 15) {
    unsigned shift = static_cast<unsigned>(prec * 4);
    uint64_t extra = (mant << shift) & ((uint64_t{1} << 60) - 1);
    mant >>= 60 - shift;
    if ((extra | (mant & 1)) > (uint64_t{1} << 59)) ++mant;
    mant <<= 60 - shift;
    if ((mant & (uint64_t{1} << 61)) != 0) {
      mant >>= 1;
      ++exp;
    }
  }
  const char* hex = fmt == 'X' ? "0123456789ABCDEF" : kLowerHex;
  if (neg) out.push_back('-');
  out.push_back('0');
  out.push_back(fmt);
  out.push_back(static_cast<char>('0' + ((mant >> 60) & 1)));
  mant <<= 4;
  if (prec < 0 && mant != 0) {
    out.push_back('.');
    while (mant != 0) {
      out.push_back(hex[(mant >> 60) & 15]);
      mant <<= 4;
    }
  } else if (prec > 0) {
    out.push_back('.');
    for (int i = 0; i < prec; ++i) {
      out.push_back(hex[(mant >> 60) & 15]);
      mant <<= 4;
    }
  }
  out.push_back(fmt == 'X' ? 'P' : 'p');
  out.push_back(exp < 0 ? '-' : '+');
  exp = std::abs(exp);
  if (exp < 10) out.push_back('0');
  out += std::to_string(exp);
}

}  // namespace

DecodedRune DecodeRune(std::string_view s) {
  if (s.empty()) return {kRuneError, 0};
  auto b0 = static_cast<unsigned char>(s[0]);
  if (b0 < 0x80) return {b0, 1};
  auto cont = [&](size_t i) {
    return i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80;
  };
  auto at = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (!cont(1)) return {kRuneError, 1};
    return {static_cast<char32_t>(((b0 & 0x1F) << 6) | (at(1) & 0x3F)), 2};
  }
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (!cont(1) || !cont(2)) return {kRuneError, 1};
    if ((b0 == 0xE0 && at(1) < 0xA0) || (b0 == 0xED && at(1) > 0x9F)) return {kRuneError, 1};
    return {static_cast<char32_t>(((b0 & 0x0F) << 12) | ((at(1) & 0x3F) << 6) | (at(2) & 0x3F)), 3};
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return {kRuneError, 1};
    if ((b0 == 0xF0 && at(1) < 0x90) || (b0 == 0xF4 && at(1) > 0x8F)) return {kRuneError, 1};
    return {static_cast<char32_t>(((b0 & 0x07) << 18) | ((at(1) & 0x3F) << 12) |
                                  ((at(2) & 0x3F) << 6) | (at(3) & 0x3F)),
            4};
  }
  return {kRuneError, 1};
}

DecodedRune DecodeLastRune(std::string_view s) {
  if (s.empty()) return {kRuneError, 0};
  size_t start = s.size() - 1;
  size_t limit = s.size() >= 4 ? s.size() - 4 : 0;
  while (start > limit && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  DecodedRune d = DecodeRune(s.substr(start));
  if (start + static_cast<size_t>(d.width) != s.size()) return {kRuneError, 1};
  return d;
}

void AppendRune(std::string& out, char32_t r) {
  if (!ValidRune(r)) r = kRuneError;
  if (r < 0x80) {
    out.push_back(static_cast<char>(r));
  } else if (r < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (r >> 6)));
    out.push_back(static_cast<char>(0x80 | (r & 0x3F)));
  } else if (r < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (r >> 12)));
    out.push_back(static_cast<char>(0x80 | ((r >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (r & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (r >> 18)));
    out.push_back(static_cast<char>(0x80 | ((r >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((r >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (r & 0x3F)));
  }
}

size_t RuneCount(std::string_view s) {
  size_t n = 0;
  while (!s.empty()) {
    s.remove_prefix(static_cast<size_t>(DecodeRune(s).width));
    ++n;
  }
  return n;
}

bool ValidUtf8(std::string_view s) {
  while (!s.empty()) {
    DecodedRune d = DecodeRune(s);
    if (d.rune == kRuneError && d.width == 1) return false;
    s.remove_prefix(static_cast<size_t>(d.width));
  }
  return true;
}

bool ValidRune(int64_t r) {
  return (r >= 0 && r < 0xD800) || (r > 0xDFFF && r <= kMaxRune);
}

bool IsPrint(char32_t r) {
  return InRanges(kPrintRanges, r);
}
bool IsLetter(char32_t r) {
  return InRanges(kLetterRanges, r);
}
bool IsDigit(char32_t r) {
  return InRanges(kDigitRanges, r);
}

std::string Quote(std::string_view s) {
  return QuoteWith(s, '"', false);
}
std::string QuoteToAscii(std::string_view s) {
  return QuoteWith(s, '"', true);
}
std::string QuoteRune(char32_t r) {
  return QuoteRuneWith(r, false);
}
std::string QuoteRuneToAscii(char32_t r) {
  return QuoteRuneWith(r, true);
}

bool CanBackquote(std::string_view s) {
  while (!s.empty()) {
    DecodedRune d = DecodeRune(s);
    s.remove_prefix(static_cast<size_t>(d.width));
    if (d.width > 1) {
      if (d.rune == 0xFEFF) return false;
      continue;
    }
    if (d.rune == kRuneError) return false;
    if ((d.rune < ' ' && d.rune != '\t') || d.rune == '`' || d.rune == 0x7F) return false;
  }
  return true;
}

UnquotedChar UnquoteChar(std::string_view s, char quote) {
  UnquotedChar out;
  if (s.empty()) return out;
  char c = s[0];
  if (c == quote && (quote == '\'' || quote == '"')) return out;
  if (static_cast<unsigned char>(c) >= 0x80) {
    DecodedRune d = DecodeRune(s);
    return {true, d.rune, true, s.substr(static_cast<size_t>(d.width))};
  }
  if (c != '\\') return {true, static_cast<unsigned char>(c), false, s.substr(1)};
  if (s.size() <= 1) return out;
  char e = s[1];
  s.remove_prefix(2);
  switch (e) {
    case 'a': out.value = '\a'; break;
    case 'b': out.value = '\b'; break;
    case 'f': out.value = '\f'; break;
    case 'n': out.value = '\n'; break;
    case 'r': out.value = '\r'; break;
    case 't': out.value = '\t'; break;
    case 'v': out.value = '\v'; break;
    case 'x':
    case 'u':
    case 'U': {
      size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
      if (s.size() < n) return out;
      int64_t v = 0;
      for (size_t j = 0; j < n; ++j) {
        std::optional<int> x = Unhex(s[j]);
        if (!x) return out;
        v = (v << 4) | *x;
      }
      s.remove_prefix(n);
      if (e != 'x') {
        if (!ValidRune(v)) return out;
        out.multibyte = true;
      }
      out.value = static_cast<char32_t>(v);
      break;
    }
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7': {
      int v = e - '0';
      if (s.size() < 2) return out;
      for (size_t j = 0; j < 2; ++j) {
        int x = s[j] - '0';
        if (x < 0 || x > 7) return out;
        v = (v << 3) | x;
      }
      s.remove_prefix(2);
      if (v > 255) return out;
      out.value = static_cast<char32_t>(v);
      break;
    }
    case '\\': out.value = '\\'; break;
    case '\'':
    case '"':
      if (e != quote) return out;
      out.value = static_cast<unsigned char>(e);
      break;
    default: return out;
  }
  out.ok = true;
  out.tail = s;
  return out;
}

std::optional<std::string> Unquote(std::string_view in) {
  if (in.size() < 2) return std::nullopt;
  char quote = in[0];
  if (quote == '`') {
    size_t end = in.find('`', 1);
    if (end != in.size() - 1) return std::nullopt;
    std::string out;
    for (char c : in.substr(1, end - 1)) {
      if (c != '\r') out.push_back(c);
    }
    return out;
  }
  if (quote != '"' && quote != '\'') return std::nullopt;
  std::string out;
  std::string_view rest = in.substr(1);
  while (!rest.empty() && rest[0] != quote) {
    if (rest[0] == '\n') return std::nullopt;
    UnquotedChar c = UnquoteChar(rest, quote);
    if (!c.ok) return std::nullopt;
    rest = c.tail;
    if (c.value < 0x80 || !c.multibyte) {
      out.push_back(static_cast<char>(c.value));
    } else {
      AppendRune(out, c.value);
    }
    if (quote == '\'') break;
  }
  if (rest.empty() || rest[0] != quote || rest.size() != 1) return std::nullopt;
  if (quote == '\'' && out.empty()) return std::nullopt;
  return out;
}

std::optional<uint64_t> ParseUint(std::string_view s) {
  if (s.empty()) return std::nullopt;
  std::string_view whole = s;
  unsigned base = 10;
  if (s[0] == '0') {
    if (s.size() >= 3 && Lower(s[1]) == 'b') {
      base = 2;
      s.remove_prefix(2);
    } else if (s.size() >= 3 && Lower(s[1]) == 'o') {
      base = 8;
      s.remove_prefix(2);
    } else if (s.size() >= 3 && Lower(s[1]) == 'x') {
      base = 16;
      s.remove_prefix(2);
    } else {
      base = 8;
      s.remove_prefix(1);
    }
  }
  bool underscores = false;
  uint64_t n = 0;
  for (char c : s) {
    unsigned d = 0;
    if (c == '_') {
      underscores = true;
      continue;
    }
    if (c >= '0' && c <= '9') {
      d = static_cast<unsigned>(c - '0');
    } else if (Lower(c) >= 'a' && Lower(c) <= 'z') {
      d = static_cast<unsigned>(Lower(c) - 'a' + 10);
    } else {
      return std::nullopt;
    }
    if (d >= base) return std::nullopt;
    if (n > (UINT64_MAX - d) / base) return std::nullopt;
    n = n * base + d;
  }
  if (underscores && !UnderscoreOk(whole)) return std::nullopt;
  return n;
}

std::optional<int64_t> ParseInt(std::string_view s) {
  if (s.empty()) return std::nullopt;
  bool neg = false;
  if (s[0] == '+') {
    s.remove_prefix(1);
  } else if (s[0] == '-') {
    neg = true;
    s.remove_prefix(1);
  }
  std::optional<uint64_t> u = ParseUint(s);
  if (!u) return std::nullopt;
  constexpr uint64_t kCutoff = uint64_t{1} << 63;
  if ((!neg && *u >= kCutoff) || (neg && *u > kCutoff)) return std::nullopt;
  if (neg) return *u == kCutoff ? INT64_MIN : -static_cast<int64_t>(*u);
  return static_cast<int64_t>(*u);
}

std::optional<double> ParseFloat(std::string_view s, bool* out_of_range) {
  if (out_of_range != nullptr) *out_of_range = false;
  std::optional<std::string> clean = CleanFloatSyntax(s);
  if (!clean) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(clean->c_str(), &end);
  if (end != clean->c_str() + clean->size()) return std::nullopt;
  if (errno == ERANGE && std::isinf(v)) {
    if (out_of_range != nullptr) *out_of_range = true;
    return std::nullopt;
  }
  return v;
}

std::string FormatFloat(double v, char fmt, int prec) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  bool neg = (bits >> 63) != 0;
  int exp = static_cast<int>((bits >> 52) & 0x7FF);
  uint64_t mant = bits & ((uint64_t{1} << 52) - 1);
  if (exp == 0x7FF) return mant != 0 ? "NaN" : neg ? "-Inf" : "+Inf";
  if (exp == 0) {
    ++exp;
  } else {
    mant |= uint64_t{1} << 52;
  }
  exp -= 1023;
  std::string out;
  if (fmt == 'b') {
    FmtB(out, neg, mant, exp);
    return out;
  }
  if (fmt == 'x' || fmt == 'X') {
    FmtX(out, prec, fmt, neg, mant, exp);
    return out;
  }
  double a = std::fabs(v);
  bool shortest = prec < 0;
  Digits digs;
  if (shortest) {
    digs = a == 0 ? Digits{} : SignificantDigits(a, -1);
    int nd = static_cast<int>(digs.d.size());
    if (fmt == 'e' || fmt == 'E') prec = std::max(nd - 1, 0);
    if (fmt == 'f') prec = std::max(nd - digs.dp, 0);
    if (fmt == 'g' || fmt == 'G') prec = nd;
  } else if (fmt == 'f') {
    digs = FixedDigits(a, prec);
  } else {
    int digits = prec + 1;
    if (fmt == 'g' || fmt == 'G') {
      if (prec == 0) prec = 1;
      digits = prec;
    }
    digs = a == 0 ? Digits{} : SignificantDigits(a, digits);
  }
  int nd = static_cast<int>(digs.d.size());
  switch (fmt) {
    case 'e':
    case 'E': FmtE(out, neg, digs, prec, fmt); return out;
    case 'f': FmtF(out, neg, digs, prec); return out;
    case 'g':
    case 'G': {
      int eprec = prec;
      if (eprec > nd && nd >= digs.dp) eprec = nd;
      if (shortest) eprec = 6;
      int e = digs.dp - 1;
      if (e < -4 || e >= eprec) {
        if (prec > nd) prec = nd;
        FmtE(out, neg, digs, prec - 1, fmt == 'g' ? 'e' : 'E');
        return out;
      }
      if (prec > digs.dp) prec = nd;
      FmtF(out, neg, digs, std::max(prec - digs.dp, 0));
      return out;
    }
    default: return std::string("%") + fmt;
  }
}

}  // namespace syncbus::consumer::gotemplate
