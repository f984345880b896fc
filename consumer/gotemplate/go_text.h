// Go's text primitives as Go's standard library defines them, for the template engine: UTF-8
// decoding (unicode/utf8), the Unicode classes of unicode.IsPrint/IsLetter/IsDigit (tables in
// unicode_tables.inc), string and rune quoting and unquoting (strconv.Quote, Unquote,
// UnquoteChar, CanBackquote), integer and float parsing (strconv.ParseInt/ParseUint with base 0,
// ParseFloat) and float formatting (strconv.FormatFloat, bitSize 64). Byte-for-byte Go's
// output. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace syncbus::consumer::gotemplate {

inline constexpr char32_t kRuneError = 0xFFFD;
inline constexpr char32_t kMaxRune = 0x10FFFF;

struct DecodedRune {
  char32_t rune = kRuneError;
  int width = 0;  // bytes consumed: 0 for empty input, 1 for an invalid byte (rune = U+FFFD)
};

// utf8.DecodeRuneInString / DecodeLastRuneInString.
DecodedRune DecodeRune(std::string_view s);
DecodedRune DecodeLastRune(std::string_view s);
// utf8.AppendRune: an invalid rune (surrogate, > U+10FFFF) is written as U+FFFD.
void AppendRune(std::string& out, char32_t r);
// utf8.RuneCountInString.
size_t RuneCount(std::string_view s);
// utf8.ValidString.
bool ValidUtf8(std::string_view s);
bool ValidRune(int64_t r);

// unicode.IsPrint (== strconv.IsPrint), unicode.IsLetter, unicode.IsDigit.
bool IsPrint(char32_t r);
bool IsLetter(char32_t r);
bool IsDigit(char32_t r);

// strconv.Quote / QuoteToASCII / QuoteRune / QuoteRuneToASCII / CanBackquote.
std::string Quote(std::string_view s);
std::string QuoteToAscii(std::string_view s);
std::string QuoteRune(char32_t r);
std::string QuoteRuneToAscii(char32_t r);
bool CanBackquote(std::string_view s);

// strconv.UnquoteChar: one (possibly escaped) character of a literal quoted with `quote`.
struct UnquotedChar {
  bool ok = false;
  char32_t value = 0;
  bool multibyte = false;
  std::string_view tail;
};
UnquotedChar UnquoteChar(std::string_view s, char quote);

// strconv.Unquote of a "...", '...' or `...` literal; nullopt is strconv.ErrSyntax.
std::optional<std::string> Unquote(std::string_view s);

// strconv.ParseUint(s, 0, 64) and ParseInt(s, 0, 64); nullopt on a syntax or range error.
std::optional<uint64_t> ParseUint(std::string_view s);
std::optional<int64_t> ParseInt(std::string_view s);
// strconv.ParseFloat(s, 64) for the number syntax a template can hold (no inf/nan); nullopt on
// a syntax error or an overflow (Go's ErrRange, reported in *out_of_range when given); an
// underflow rounds to zero as in Go.
std::optional<double> ParseFloat(std::string_view s, bool* out_of_range = nullptr);

// strconv.FormatFloat(v, fmt, prec, 64) for fmt in b e E f g G x X; prec < 0 is "shortest".
std::string FormatFloat(double v, char fmt, int prec);

}  // namespace syncbus::consumer::gotemplate
