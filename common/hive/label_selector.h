// LabelSelector: metav1.LabelSelector (matchLabels + matchExpressions with In, NotIn, Exists,
// DoesNotExist) parsed from JSON and evaluated against a label map, with the apiserver's rules:
// an empty selector matches everything; requirements are ANDed. Value type; thread-compatible.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace syncbus::hive {

using Labels = std::map<std::string, std::string>;

struct LabelRequirement {
  enum class Op { kIn, kNotIn, kExists, kDoesNotExist };
  std::string key;
  Op op = Op::kIn;
  std::vector<std::string> values;
};

class LabelSelector {
 public:
  // Validates like metav1.LabelSelectorAsSelector: known operators, In/NotIn need values,
  // Exists/DoesNotExist must have none. Errors name the offending field.
  static Result<LabelSelector> FromJson(const Json& selector);

  bool Matches(const Labels& labels) const;
  bool empty() const { return requirements_.empty(); }
  const std::vector<LabelRequirement>& requirements() const { return requirements_; }

 private:
  std::vector<LabelRequirement> requirements_;  // matchLabels become In with one value
};

}  // namespace syncbus::hive
