// The values a SyncSet template can compute, with Go's dynamic types: dot is nil and the only
// data are literals, fromCDLabel's strings and the builtins' results, so every value is one of
// Go's nil, bool, int, uint8 (a byte from `index` on a string), float64, complex128 or string.
// Value type; thread-compatible.
#pragma once

#include <complex>
#include <cstdint>
#include <string>

namespace syncbus::consumer::gotemplate {

enum class Kind { kNil, kBool, kInt, kUint8, kFloat64, kComplex128, kString };

struct Value {
  Kind kind = Kind::kNil;
  bool b = false;
  int64_t i = 0;  // kInt, and kUint8 (0..255)
  double f = 0;
  std::complex<double> c;
  std::string s;

  static Value Nil() { return {}; }
  static Value Bool(bool v) {
    Value x;
    x.kind = Kind::kBool;
    x.b = v;
    return x;
  }
  static Value Int(int64_t v) {
    Value x;
    x.kind = Kind::kInt;
    x.i = v;
    return x;
  }
  static Value Uint8(uint8_t v) {
    Value x;
    x.kind = Kind::kUint8;
    x.i = v;
    return x;
  }
  static Value Float(double v) {
    Value x;
    x.kind = Kind::kFloat64;
    x.f = v;
    return x;
  }
  static Value Complex(std::complex<double> v) {
    Value x;
    x.kind = Kind::kComplex128;
    x.c = v;
    return x;
  }
  static Value String(std::string v) {
    Value x;
    x.kind = Kind::kString;
    x.s = std::move(v);
    return x;
  }

  bool is_nil() const { return kind == Kind::kNil; }
  bool is_integer() const { return kind == Kind::kInt || kind == Kind::kUint8; }
};

// Go's type name ("int", "uint8", "float64", "complex128", "string", "bool"; "<nil>" for nil).
const char* TypeName(const Value& v);

// text/template's truth: false, 0, nil and "" are false.
bool IsTrue(const Value& v);

}  // namespace syncbus::consumer::gotemplate
