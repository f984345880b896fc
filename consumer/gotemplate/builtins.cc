#include "consumer/gotemplate/builtins.h"

#include <map>

#include "consumer/gotemplate/go_fmt.h"
#include "consumer/gotemplate/go_text.h"

namespace syncbus::consumer::gotemplate {
namespace {

using P = ParamType;

enum class BasicKind { kInvalid, kBool, kComplex, kInt, kFloat, kString, kUint };

BasicKind KindOf(const Value& v) {
  switch (v.kind) {
    case Kind::kBool: return BasicKind::kBool;
    case Kind::kInt: return BasicKind::kInt;
    case Kind::kUint8: return BasicKind::kUint;
    case Kind::kFloat64: return BasicKind::kFloat;
    case Kind::kComplex128: return BasicKind::kComplex;
    case Kind::kString: return BasicKind::kString;
    case Kind::kNil: return BasicKind::kInvalid;
  }
  return BasicKind::kInvalid;
}

CallResult Error(std::string message) {
  return {Value::Nil(), std::move(message)};
}
CallResult Ok(Value v) {
  return {std::move(v), std::nullopt};
}

std::string Incompatible(const Value& a, const Value& b) {
  return std::string("incompatible types for comparison: ") + TypeName(a) + " and " + TypeName(b);
}

struct Compared {
  bool truth = false;
  std::optional<std::string> error;
};

Compared Eq(const Value& a1, const std::vector<Value>& rest) {
  if (rest.empty()) return {false, "missing argument for comparison"};
  BasicKind k1 = KindOf(a1);
  for (const Value& a : rest) {
    BasicKind k2 = KindOf(a);
    bool truth = false;
    if (k1 != k2) {
      if (k1 == BasicKind::kInt && k2 == BasicKind::kUint) {
        truth = a1.i >= 0 && a1.i == a.i;
      } else if (k1 == BasicKind::kUint && k2 == BasicKind::kInt) {
        truth = a.i >= 0 && a1.i == a.i;
      } else if (!a1.is_nil() && !a.is_nil()) {
        return {false, Incompatible(a1, a)};
      }
    } else {
      switch (k1) {
        case BasicKind::kBool: truth = a1.b == a.b; break;
        case BasicKind::kComplex: truth = a1.c == a.c; break;
        case BasicKind::kFloat: truth = a1.f == a.f; break;
        case BasicKind::kInt:
        case BasicKind::kUint: truth = a1.i == a.i; break;
        case BasicKind::kString: truth = a1.s == a.s; break;
        case BasicKind::kInvalid: truth = true; break;  // nil == nil
      }
    }
    if (truth) return {true, std::nullopt};
  }
  return {false, std::nullopt};
}

Compared Lt(const Value& a, const Value& b) {
  BasicKind k1 = KindOf(a);
  if (k1 == BasicKind::kInvalid) return {false, "invalid type for comparison"};
  BasicKind k2 = KindOf(b);
  if (k2 == BasicKind::kInvalid) return {false, "invalid type for comparison"};
  if (k1 != k2) {
    if (k1 == BasicKind::kInt && k2 == BasicKind::kUint) return {a.i < b.i, std::nullopt};
    if (k1 == BasicKind::kUint && k2 == BasicKind::kInt)
      return {b.i >= 0 && a.i < b.i, std::nullopt};
    return {false, Incompatible(a, b)};
  }
  switch (k1) {
    case BasicKind::kBool:
    case BasicKind::kComplex: return {false, "invalid type for comparison"};
    case BasicKind::kFloat: return {a.f < b.f, std::nullopt};
    case BasicKind::kInt:
    case BasicKind::kUint: return {a.i < b.i, std::nullopt};
    case BasicKind::kString: return {a.s < b.s, std::nullopt};
    case BasicKind::kInvalid: break;
  }
  return {false, "invalid type for comparison"};
}

CallResult FromCompared(const Compared& c, bool negate) {
  if (c.error) return Error(*c.error);
  return Ok(Value::Bool(negate ? !c.truth : c.truth));
}

// Go's indexArg.
std::optional<std::string> IndexArg(const Value& index, int64_t cap, int64_t* out) {
  if (index.is_nil()) return "cannot index slice/array with nil";
  if (!index.is_integer())
    return std::string("cannot index slice/array with type ") + TypeName(index);
  if (index.i < 0 || index.i > cap) return "index out of range: " + std::to_string(index.i);
  *out = index.i;
  return std::nullopt;
}

CallResult Index(const std::vector<Value>& args) {
  Value item = args[0];
  if (item.is_nil()) return Error("index of untyped nil");
  for (size_t k = 1; k < args.size(); ++k) {
    if (item.kind != Kind::kString)
      return Error(std::string("can't index item of type ") + TypeName(item));
    int64_t x = 0;
    if (auto err = IndexArg(args[k], static_cast<int64_t>(item.s.size()), &x)) return Error(*err);
    if (x == static_cast<int64_t>(item.s.size()))
      return Error("reflect: string index out of range");
    item = Value::Uint8(static_cast<uint8_t>(item.s[static_cast<size_t>(x)]));
  }
  return Ok(item);
}

CallResult Slice(const std::vector<Value>& args) {
  const Value& item = args[0];
  if (item.is_nil()) return Error("slice of untyped nil");
  size_t indexes = args.size() - 1;
  if (indexes > 3) return Error("too many slice indexes: " + std::to_string(indexes));
  if (item.kind != Kind::kString)
    return Error(std::string("can't slice item of type ") + TypeName(item));
  if (indexes == 3) return Error("cannot 3-index slice a string");
  auto len = static_cast<int64_t>(item.s.size());
  int64_t idx[2] = {0, len};
  for (size_t k = 0; k < indexes; ++k) {
    if (auto err = IndexArg(args[k + 1], len, &idx[k])) return Error(*err);
  }
  if (idx[0] > idx[1])
    return Error("invalid slice index: " + std::to_string(idx[0]) + " > " + std::to_string(idx[1]));
  return Ok(Value::String(
      item.s.substr(static_cast<size_t>(idx[0]), static_cast<size_t>(idx[1] - idx[0]))));
}

CallResult Len(const Value& item) {
  if (item.is_nil()) return Error("reflect: call of reflect.Value.Type on zero Value");
  if (item.kind == Kind::kString) return Ok(Value::Int(static_cast<int64_t>(item.s.size())));
  return Error(std::string("len of type ") + TypeName(item));
}

CallResult Call(const std::string& callee, const Value& fn) {
  // No value a SyncSet template can compute is a function (dot is nil, fromCDLabel cannot be
  // passed as a value), so every call fails as Go's does on these arguments.
  if (fn.is_nil()) return Error("call of nil");
  return Error("non-function " + callee + " of type " + TypeName(fn));
}

CallResult Text(std::optional<std::string> s, size_t max_bytes) {
  if (!s || s->size() > max_bytes)
    return Error("result longer than " + std::to_string(max_bytes) + " bytes");
  return Ok(Value::String(std::move(*s)));
}

}  // namespace

const Signature* FindFunction(std::string_view name) {
  static const auto* functions = new std::map<std::string_view, Signature>{
      {"and", {{P::kReflectValue, P::kReflectValue}, true}},
      {"or", {{P::kReflectValue, P::kReflectValue}, true}},
      {"call", {{P::kReflectValue, P::kReflectValue}, true}},
      {"html", {{P::kAny}, true}},
      {"js", {{P::kAny}, true}},
      {"urlquery", {{P::kAny}, true}},
      {"print", {{P::kAny}, true}},
      {"println", {{P::kAny}, true}},
      {"printf", {{P::kString, P::kAny}, true}},
      {"index", {{P::kReflectValue, P::kReflectValue}, true}},
      {"slice", {{P::kReflectValue, P::kReflectValue}, true}},
      {"len", {{P::kReflectValue}, false}},
      {"not", {{P::kReflectValue}, false}},
      {"eq", {{P::kReflectValue, P::kReflectValue}, true}},
      {"ne", {{P::kReflectValue, P::kReflectValue}, false}},
      {"lt", {{P::kReflectValue, P::kReflectValue}, false}},
      {"le", {{P::kReflectValue, P::kReflectValue}, false}},
      {"gt", {{P::kReflectValue, P::kReflectValue}, false}},
      {"ge", {{P::kReflectValue, P::kReflectValue}, false}},
      {"fromCDLabel", {{P::kString}, false}},
  };
  auto it = functions->find(name);
  return it == functions->end() ? nullptr : &it->second;
}

std::string EvalArgs(const std::vector<Value>& args) {
  if (args.size() == 1 && args[0].kind == Kind::kString) return args[0].s;
  std::vector<Value> printable = args;
  for (Value& v : printable) {
    if (v.is_nil()) v = Value::String("<no value>");
  }
  return *Sprint(printable);
}

std::string HtmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '\0': out += "\xEF\xBF\xBD"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      default: out.push_back(c); break;
    }
  }
  return out;
}

std::string JsEscape(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      DecodedRune d = DecodeRune(s.substr(i));
      if (IsPrint(d.rune)) {
        out.append(s.substr(i, static_cast<size_t>(d.width)));
      } else {
        std::string hex;
        for (char32_t r = d.rune; r != 0 || hex.size() < 4; r >>= 4)
          hex.insert(hex.begin(), kHex[r & 0xF]);
        out += "\\u" + hex;
      }
      i += static_cast<size_t>(d.width) - 1;
      continue;
    }
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\'': out += "\\'"; break;
      case '"': out += "\\\""; break;
      case '<': out += "\\u003C"; break;
      case '>': out += "\\u003E"; break;
      case '&': out += "\\u0026"; break;
      case '=': out += "\\u003D"; break;
      default:
        if (c < ' ') {
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 0xF]);
        } else {
          out.push_back(static_cast<char>(c));
        }
        break;
    }
  }
  return out;
}

std::string UrlQueryEscape(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out.push_back(ch);
    } else if (c == ' ') {
      out.push_back('+');
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

CallResult CallFunction(std::string_view name, const std::vector<Value>& args,
                        const hive::Labels& labels, const std::string& callee, size_t max_bytes) {
  if (name == "fromCDLabel") {
    auto it = labels.find(args[0].s);
    return Ok(Value::String(it == labels.end() ? std::string() : it->second));
  }
  if (name == "not") return Ok(Value::Bool(!IsTrue(args[0])));
  if (name == "len") return Len(args[0]);
  if (name == "index") return Index(args);
  if (name == "slice") return Slice(args);
  if (name == "call") return Call(callee, args[0]);
  if (name == "eq")
    return FromCompared(Eq(args[0], std::vector<Value>(args.begin() + 1, args.end())), false);
  if (name == "ne") return FromCompared(Eq(args[0], {args[1]}), true);
  if (name == "lt") return FromCompared(Lt(args[0], args[1]), false);
  if (name == "ge") return FromCompared(Lt(args[0], args[1]), true);
  if (name == "le" || name == "gt") {
    Compared lt = Lt(args[0], args[1]);
    if (!lt.error && !lt.truth) lt = Eq(args[0], {args[1]});
    return FromCompared(lt, name == "gt");
  }
  if (name == "print") return Text(Sprint(args, max_bytes), max_bytes);
  if (name == "println") return Text(Sprintln(args, max_bytes), max_bytes);
  if (name == "printf") {
    return Text(Sprintf(args[0].s, std::vector<Value>(args.begin() + 1, args.end()), max_bytes),
                max_bytes);
  }
  std::string text = EvalArgs(args);
  if (text.size() > max_bytes) return Text(std::nullopt, max_bytes);
  if (name == "html") return Text(HtmlEscape(text), max_bytes);
  if (name == "js") return Text(JsEscape(text), max_bytes);
  if (name == "urlquery") return Text(UrlQueryEscape(text), max_bytes);
  return Error("unknown function " + std::string(name));
}

}  // namespace syncbus::consumer::gotemplate
