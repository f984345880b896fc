// Label and field selectors in their query-string syntax (labels.Parse / fields.ParseSelector):
// `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`, `a`, `!a`, `a>1`, `a<1`; field
// selectors `f=v`, `f==v`, `f!=v` over the fields a resource supports. Value types;
// thread-compatible.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tests/kubesim/status_error.h"

namespace syncbus::kubesim {

// An object's labels, sorted by key.
using LabelMap = std::vector<std::pair<std::string, std::string>>;

class LabelSelector {
 public:
  enum class Op {
    kEquals,
    kNotEquals,
    kIn,
    kNotIn,
    kExists,
    kDoesNotExist,
    kGreaterThan,
    kLessThan
  };
  struct Requirement {
    std::string key;
    Op op;
    std::vector<std::string> values;
  };

  // Empty text selects everything. Errors are 400 BadRequest as the apiserver words them.
  static Outcome<LabelSelector> Parse(std::string_view text);
  bool Matches(const LabelMap& labels) const;
  bool empty() const { return requirements_.empty(); }
  const std::vector<Requirement>& requirements() const { return requirements_; }

 private:
  std::vector<Requirement> requirements_;
};

class FieldSelector {
 public:
  struct Term {
    std::string field;
    bool equals;  // false: !=
    std::string value;
  };
  // `supported`: the field names this resource can select on ("metadata.name", ...).
  static Outcome<FieldSelector> Parse(std::string_view text,
                                      const std::vector<std::string>& supported);
  // `lookup` returns an object's value of a supported field.
  bool Matches(const std::function<std::string(const std::string&)>& lookup) const;
  bool empty() const { return terms_.empty(); }
  const std::vector<Term>& terms() const { return terms_; }

 private:
  std::vector<Term> terms_;
};

}  // namespace syncbus::kubesim
