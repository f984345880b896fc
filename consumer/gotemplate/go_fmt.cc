#include "consumer/gotemplate/go_fmt.h"

#include <cstdint>
#include <tuple>

#include "consumer/gotemplate/go_text.h"

namespace syncbus::consumer::gotemplate {

const char* TypeName(const Value& v) {
  switch (v.kind) {
    case Kind::kNil: return "<nil>";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kUint8: return "uint8";
    case Kind::kFloat64: return "float64";
    case Kind::kComplex128: return "complex128";
    case Kind::kString: return "string";
  }
  return "<nil>";
}

bool IsTrue(const Value& v) {
  switch (v.kind) {
    case Kind::kNil: return false;
    case Kind::kBool: return v.b;
    case Kind::kInt:
    case Kind::kUint8: return v.i != 0;
    case Kind::kFloat64: return v.f != 0;
    case Kind::kComplex128: return v.c != std::complex<double>(0, 0);
    case Kind::kString: return !v.s.empty();
  }
  return false;
}

namespace {

constexpr char kLower[] = "0123456789abcdefx";
constexpr char kUpper[] = "0123456789ABCDEFX";

// fmt's pp + fmt state for one Sprint/Sprintf call.
class Printer {
 public:
  explicit Printer(size_t limit) : limit_(limit) {}
  std::string buf;
  bool Overflow() const { return buf.size() > limit_; }

  void ClearFlags() { f_ = Flags{}; }

  void PrintArg(const Value* arg, char32_t verb) {
    arg_ = arg;
    if (arg == nullptr || arg->is_nil()) {
      if (verb == 'T' || verb == 'v') {
        PadString("<nil>");
      } else {
        BadVerb(verb);
      }
      return;
    }
    if (verb == 'T') {
      FmtS(TypeName(*arg));
      return;
    }
    if (verb == 'p') {
      BadVerb(verb);
      return;
    }
    switch (arg->kind) {
      case Kind::kBool:
        if (verb == 't' || verb == 'v') {
          PadString(arg->b ? "true" : "false");
        } else {
          BadVerb(verb);
        }
        return;
      case Kind::kInt: FmtIntegerVerb(static_cast<uint64_t>(arg->i), true, verb); return;
      case Kind::kUint8: FmtIntegerVerb(static_cast<uint64_t>(arg->i), false, verb); return;
      case Kind::kFloat64: FmtFloatVerb(arg->f, verb); return;
      case Kind::kComplex128: FmtComplex(arg->c, verb); return;
      case Kind::kString: FmtString(arg->s, verb); return;
      case Kind::kNil: return;
    }
  }

  void DoPrintf(std::string_view format, const std::vector<Value>& a);

 private:
  struct Flags {
    bool plus = false, minus = false, sharp = false, space = false, zero = false;
    bool plus_v = false, sharp_v = false;
    bool wid_present = false, prec_present = false;
    int wid = 0, prec = 0;
  };

  void WriteRune(char32_t r) { AppendRune(buf, r); }

  void WritePadding(int n) {
    if (n <= 0) return;
    buf.append(static_cast<size_t>(n), f_.zero ? '0' : ' ');
  }

  void PadString(std::string_view s) {
    if (!f_.wid_present || f_.wid == 0) {
      buf += s;
      return;
    }
    int width = f_.wid - static_cast<int>(RuneCount(s));
    if (!f_.minus) {
      WritePadding(width);
      buf += s;
    } else {
      buf += s;
      WritePadding(width);
    }
  }

  void BadVerb(char32_t verb) {
    buf += "%!";
    WriteRune(verb);
    buf.push_back('(');
    if (arg_ != nullptr && !arg_->is_nil()) {
      const Value* arg = arg_;
      buf += TypeName(*arg);
      buf.push_back('=');
      PrintArg(arg, 'v');
    } else {
      buf += "<nil>";
    }
    buf.push_back(')');
  }

  void FmtIntegerVerb(uint64_t v, bool is_signed, char32_t verb) {
    switch (verb) {
      case 'v':
        if (f_.sharp_v && !is_signed) {
          bool sharp = f_.sharp;
          f_.sharp = true;
          FmtInteger(v, 16, false, 'v', kLower);
          f_.sharp = sharp;
        } else {
          FmtInteger(v, 10, is_signed, verb, kLower);
        }
        return;
      case 'd': FmtInteger(v, 10, is_signed, verb, kLower); return;
      case 'b': FmtInteger(v, 2, is_signed, verb, kLower); return;
      case 'o':
      case 'O': FmtInteger(v, 8, is_signed, verb, kLower); return;
      case 'x': FmtInteger(v, 16, is_signed, verb, kLower); return;
      case 'X': FmtInteger(v, 16, is_signed, verb, kUpper); return;
      case 'c': FmtC(v); return;
      case 'q': FmtQc(v); return;
      case 'U': FmtUnicode(v); return;
      default: BadVerb(verb); return;
    }
  }

  void FmtInteger(uint64_t u, int base, bool is_signed, char32_t verb, const char* digits) {
    bool negative = is_signed && static_cast<int64_t>(u) < 0;
    if (negative) u = ~u + 1;
    int prec = 0;
    if (f_.prec_present) {
      prec = f_.prec;
      if (prec == 0 && u == 0) {
        bool zero = f_.zero;
        f_.zero = false;
        WritePadding(f_.wid);
        f_.zero = zero;
        return;
      }
    } else if (f_.zero && f_.wid_present) {
      prec = f_.wid;
      if (negative || f_.plus || f_.space) --prec;
    }
    std::string num;  // built backwards
    auto b = static_cast<uint64_t>(base);
    while (u >= b) {
      num.push_back(digits[u % b]);
      u /= b;
    }
    num.push_back(digits[u]);
    while (static_cast<int>(num.size()) < prec) num.push_back('0');
    if (f_.sharp) {
      if (base == 2) {
        num += "b0";
      } else if (base == 8) {
        if (num.back() != '0') num.push_back('0');
      } else if (base == 16) {
        num.push_back(digits[16]);
        num.push_back('0');
      }
    }
    if (verb == 'O') num += "o0";
    if (negative) {
      num.push_back('-');
    } else if (f_.plus) {
      num.push_back('+');
    } else if (f_.space) {
      num.push_back(' ');
    }
    std::string out(num.rbegin(), num.rend());
    bool zero = f_.zero;
    f_.zero = false;
    PadString(out);
    f_.zero = zero;
  }

  void FmtUnicode(uint64_t u) {
    int prec = 4;
    if (f_.prec_present && f_.prec > 4) prec = f_.prec;
    std::string hex;
    uint64_t x = u;
    do {
      hex.insert(hex.begin(), kUpper[x & 0xF]);
      x >>= 4;
    } while (x != 0);
    std::string out = "U+";
    if (static_cast<int>(hex.size()) < prec)
      out.append(static_cast<size_t>(prec) - hex.size(), '0');
    out += hex;
    if (f_.sharp && u <= kMaxRune && IsPrint(static_cast<char32_t>(u))) {
      out += " '";
      AppendRune(out, static_cast<char32_t>(u));
      out.push_back('\'');
    }
    bool zero = f_.zero;
    f_.zero = false;
    PadString(out);
    f_.zero = zero;
  }

  void FmtC(uint64_t c) {
    char32_t r = c > kMaxRune ? kRuneError : static_cast<char32_t>(c);
    std::string out;
    AppendRune(out, r);
    PadString(out);
  }

  void FmtQc(uint64_t c) {
    char32_t r = c > kMaxRune ? kRuneError : static_cast<char32_t>(c);
    PadString(f_.plus ? QuoteRuneToAscii(r) : QuoteRune(r));
  }

  std::string_view Truncate(std::string_view s) const {
    if (f_.prec_present) {
      int n = f_.prec;
      size_t i = 0;
      while (i < s.size()) {
        if (--n < 0) return s.substr(0, i);
        i += static_cast<size_t>(DecodeRune(s.substr(i)).width);
      }
    }
    return s;
  }

  void FmtS(std::string_view s) { PadString(Truncate(s)); }

  void FmtSx(std::string_view s, const char* digits) {
    int length = static_cast<int>(s.size());
    if (f_.prec_present && f_.prec < length) length = f_.prec;
    int width = 2 * length;
    if (width > 0) {
      if (f_.space) {
        if (f_.sharp) width *= 2;
        width += length - 1;
      } else if (f_.sharp) {
        width += 2;
      }
    } else {
      if (f_.wid_present) WritePadding(f_.wid);
      return;
    }
    if (f_.wid_present && f_.wid > width && !f_.minus) WritePadding(f_.wid - width);
    if (f_.sharp) {
      buf.push_back('0');
      buf.push_back(digits[16]);
    }
    for (int i = 0; i < length; ++i) {
      if (f_.space && i > 0) {
        buf.push_back(' ');
        if (f_.sharp) {
          buf.push_back('0');
          buf.push_back(digits[16]);
        }
      }
      auto c = static_cast<unsigned char>(s[static_cast<size_t>(i)]);
      buf.push_back(digits[c >> 4]);
      buf.push_back(digits[c & 0xF]);
    }
    if (f_.wid_present && f_.wid > width && f_.minus) WritePadding(f_.wid - width);
  }

  void FmtQ(std::string_view s) {
    s = Truncate(s);
    if (f_.sharp && CanBackquote(s)) {
      PadString("`" + std::string(s) + "`");
      return;
    }
    PadString(f_.plus ? QuoteToAscii(s) : Quote(s));
  }

  void FmtString(const std::string& v, char32_t verb) {
    switch (verb) {
      case 'v':
        if (f_.sharp_v) {
          FmtQ(v);
        } else {
          FmtS(v);
        }
        return;
      case 's': FmtS(v); return;
      case 'x': FmtSx(v, kLower); return;
      case 'X': FmtSx(v, kUpper); return;
      case 'q': FmtQ(v); return;
      default: BadVerb(verb); return;
    }
  }

  void FmtFloatVerb(double v, char32_t verb) {
    switch (verb) {
      case 'v': FmtFloat(v, 'g', -1); return;
      case 'b':
      case 'g':
      case 'G':
      case 'x':
      case 'X': FmtFloat(v, static_cast<char>(verb), -1); return;
      case 'f':
      case 'e':
      case 'E': FmtFloat(v, static_cast<char>(verb), 6); return;
      case 'F': FmtFloat(v, 'f', 6); return;
      default: BadVerb(verb); return;
    }
  }

  void FmtFloat(double v, char verb, int prec) {
    if (f_.prec_present) prec = f_.prec;
    std::string num = "+" + FormatFloat(v, verb, prec);
    if (num[1] == '-' || num[1] == '+') {
      num.erase(0, 1);
    } else {
      num[0] = '+';
    }
    if (f_.space && num[0] == '+' && !f_.plus) num[0] = ' ';
    if (num[1] == 'I' || num[1] == 'N') {
      bool zero = f_.zero;
      f_.zero = false;
      if (num[1] == 'N' && !f_.space && !f_.plus) num.erase(0, 1);
      PadString(num);
      f_.zero = zero;
      return;
    }
    if (f_.sharp && verb != 'b') {
      int digits = 0;
      if (verb == 'v' || verb == 'g' || verb == 'G' || verb == 'x') {
        digits = prec;
        if (digits == -1) digits = 6;
      }
      std::string tail;
      bool has_decimal_point = false;
      bool saw_nonzero_digit = false;
      for (size_t i = 1; i < num.size(); ++i) {
        char c = num[i];
        if (c == '.') {
          has_decimal_point = true;
          continue;
        }
        if (c == 'p' || c == 'P') {
          tail = num.substr(i);
          num.resize(i);
          break;
        }
        if ((c == 'e' || c == 'E') && verb != 'x' && verb != 'X') {
          tail = num.substr(i);
          num.resize(i);
          break;
        }
        if (c != '0') saw_nonzero_digit = true;
        if (saw_nonzero_digit) --digits;
      }
      if (!has_decimal_point) {
        if (num.size() == 2 && num[1] == '0') --digits;
        num.push_back('.');
      }
      while (digits > 0) {
        num.push_back('0');
        --digits;
      }
      num += tail;
    }
    if (f_.plus || num[0] != '+') {
      if (f_.zero && f_.wid_present && f_.wid > static_cast<int>(num.size())) {
        buf.push_back(num[0]);
        WritePadding(f_.wid - static_cast<int>(num.size()));
        buf.append(num, 1, std::string::npos);
        return;
      }
      PadString(num);
      return;
    }
    PadString(std::string_view(num).substr(1));
  }

  void FmtComplex(std::complex<double> v, char32_t verb) {
    switch (verb) {
      case 'v':
      case 'b':
      case 'g':
      case 'G':
      case 'x':
      case 'X':
      case 'f':
      case 'F':
      case 'e':
      case 'E': {
        bool plus = f_.plus;
        buf.push_back('(');
        FmtFloatVerb(v.real(), verb);
        f_.plus = true;
        FmtFloatVerb(v.imag(), verb);
        buf += "i)";
        f_.plus = plus;
        return;
      }
      default: BadVerb(verb); return;
    }
  }

  Flags f_;
  const Value* arg_ = nullptr;
  size_t limit_;
};

bool TooLarge(int x) {
  return x > 1000000 || x < -1000000;
}

struct Num {
  int num = 0;
  bool isnum = false;
  size_t next = 0;
};

Num ParseNum(std::string_view s, size_t start, size_t end) {
  Num out;
  if (start >= end) {
    out.next = end;
    return out;
  }
  for (out.next = start; out.next < end && s[out.next] >= '0' && s[out.next] <= '9'; ++out.next) {
    if (TooLarge(out.num)) return {0, false, end};
    out.num = out.num * 10 + (s[out.next] - '0');
    out.isnum = true;
  }
  return out;
}

// fmt's intFromArg: the argument must be an integer that fits an int and is not "too large".
struct IntArg {
  int num = 0;
  bool is_int = false;
  size_t next_arg = 0;
};

IntArg IntFromArg(const std::vector<Value>& a, size_t arg_num) {
  IntArg out{0, false, arg_num};
  if (arg_num < a.size()) {
    const Value& v = a[arg_num];
    if (v.is_integer() && v.i <= 1000000 && v.i >= -1000000) {
      out.num = static_cast<int>(v.i);
      out.is_int = true;
    }
    out.next_arg = arg_num + 1;
  }
  return out;
}

}  // namespace

void Printer::DoPrintf(std::string_view format, const std::vector<Value>& a) {
  size_t end = format.size();
  size_t arg_num = 0;
  bool after_index = false;
  bool reordered = false;
  bool good_arg_num = true;

  // fmt's argNumber: an explicit [n] index at format[i].
  auto arg_number = [&](size_t num, size_t i) -> std::tuple<size_t, size_t, bool> {
    if (format.size() <= i || format[i] != '[') return {num, i, false};
    reordered = true;
    std::string_view rest = format.substr(i);
    size_t wid = 1;
    bool ok = false;
    int index = 0;
    if (rest.size() >= 3) {
      for (size_t j = 1; j < rest.size(); ++j) {
        if (rest[j] == ']') {
          Num n = ParseNum(rest, 1, j);
          if (!n.isnum || n.next != j) {
            wid = j + 1;
          } else {
            index = n.num - 1;
            wid = j + 1;
            ok = true;
          }
          break;
        }
      }
    }
    if (ok && index >= 0 && static_cast<size_t>(index) < a.size())
      return {static_cast<size_t>(index), i + wid, true};
    good_arg_num = false;
    return {num, i + wid, ok};
  };

  for (size_t i = 0; i < end && !Overflow();) {
    good_arg_num = true;
    size_t lasti = i;
    while (i < end && format[i] != '%') ++i;
    if (i > lasti) buf += format.substr(lasti, i - lasti);
    if (i >= end) break;
    ++i;
    ClearFlags();
    bool fast = false;
    for (; i < end; ++i) {
      char c = format[i];
      if (c == '#') {
        f_.sharp = true;
      } else if (c == '0') {
        f_.zero = !f_.minus;
      } else if (c == '+') {
        f_.plus = true;
      } else if (c == '-') {
        f_.minus = true;
        f_.zero = false;
      } else if (c == ' ') {
        f_.space = true;
      } else {
        if (c >= 'a' && c <= 'z' && arg_num < a.size()) {
          if (c == 'v') {
            f_.sharp_v = f_.sharp;
            f_.sharp = false;
            f_.plus_v = f_.plus;
            f_.plus = false;
          }
          PrintArg(&a[arg_num], static_cast<char32_t>(c));
          ++arg_num;
          ++i;
          fast = true;
        }
        break;
      }
    }
    if (fast) continue;

    std::tie(arg_num, i, after_index) = arg_number(arg_num, i);

    if (i < end && format[i] == '*') {
      ++i;
      IntArg w = IntFromArg(a, arg_num);
      f_.wid = w.num;
      f_.wid_present = w.is_int;
      arg_num = w.next_arg;
      if (!f_.wid_present) buf += "%!(BADWIDTH)";
      if (f_.wid < 0) {
        f_.wid = -f_.wid;
        f_.minus = true;
        f_.zero = false;
      }
      after_index = false;
    } else {
      Num n = ParseNum(format, i, end);
      f_.wid = n.num;
      f_.wid_present = n.isnum;
      i = n.next;
      if (after_index && f_.wid_present) good_arg_num = false;
    }

    if (i + 1 < end && format[i] == '.') {
      ++i;
      if (after_index) good_arg_num = false;
      std::tie(arg_num, i, after_index) = arg_number(arg_num, i);
      if (i < end && format[i] == '*') {
        ++i;
        IntArg p = IntFromArg(a, arg_num);
        f_.prec = p.num;
        f_.prec_present = p.is_int;
        arg_num = p.next_arg;
        if (f_.prec < 0) {
          f_.prec = 0;
          f_.prec_present = false;
        }
        if (!f_.prec_present) buf += "%!(BADPREC)";
        after_index = false;
      } else {
        Num n = ParseNum(format, i, end);
        f_.prec = n.num;
        f_.prec_present = n.isnum;
        i = n.next;
        if (!f_.prec_present) {
          f_.prec = 0;
          f_.prec_present = true;
        }
      }
    }

    if (!after_index) std::tie(arg_num, i, after_index) = arg_number(arg_num, i);

    if (i >= end) {
      buf += "%!(NOVERB)";
      break;
    }

    char32_t verb = static_cast<unsigned char>(format[i]);
    size_t size = 1;
    if (verb >= 0x80) {
      DecodedRune d = DecodeRune(format.substr(i));
      verb = d.rune;
      size = static_cast<size_t>(d.width);
    }
    i += size;

    if (verb == '%') {
      buf.push_back('%');
    } else if (!good_arg_num) {
      buf += "%!";
      WriteRune(verb);
      buf += "(BADINDEX)";
    } else if (arg_num >= a.size()) {
      buf += "%!";
      WriteRune(verb);
      buf += "(MISSING)";
    } else {
      if (verb == 'v') {
        f_.sharp_v = f_.sharp;
        f_.sharp = false;
        f_.plus_v = f_.plus;
        f_.plus = false;
      }
      PrintArg(&a[arg_num], verb);
      ++arg_num;
    }
  }

  if (!reordered && arg_num < a.size()) {
    ClearFlags();
    buf += "%!(EXTRA ";
    for (size_t i = arg_num; i < a.size(); ++i) {
      if (i > arg_num) buf += ", ";
      if (a[i].is_nil()) {
        buf += "<nil>";
      } else {
        buf += TypeName(a[i]);
        buf.push_back('=');
        PrintArg(&a[i], 'v');
      }
    }
    buf.push_back(')');
  }
}

std::optional<std::string> Sprint(const std::vector<Value>& args, size_t limit) {
  Printer p(limit);
  bool prev_string = false;
  for (size_t i = 0; i < args.size() && !p.Overflow(); ++i) {
    bool is_string = args[i].kind == Kind::kString;
    if (i > 0 && !is_string && !prev_string) p.buf.push_back(' ');
    p.ClearFlags();
    p.PrintArg(&args[i], 'v');
    prev_string = is_string;
  }
  if (p.Overflow()) return std::nullopt;
  return std::move(p.buf);
}

std::optional<std::string> Sprintln(const std::vector<Value>& args, size_t limit) {
  Printer p(limit);
  for (size_t i = 0; i < args.size() && !p.Overflow(); ++i) {
    if (i > 0) p.buf.push_back(' ');
    p.ClearFlags();
    p.PrintArg(&args[i], 'v');
  }
  p.buf.push_back('\n');
  if (p.Overflow()) return std::nullopt;
  return std::move(p.buf);
}

std::optional<std::string> Sprintf(std::string_view format, const std::vector<Value>& args,
                                   size_t limit) {
  Printer p(limit);
  p.DoPrintf(format, args);
  if (p.Overflow()) return std::nullopt;
  return std::move(p.buf);
}

}  // namespace syncbus::consumer::gotemplate
