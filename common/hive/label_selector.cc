#include "common/hive/label_selector.h"

#include <algorithm>

namespace syncbus::hive {

Result<LabelSelector> LabelSelector::FromJson(const Json& selector) {
  LabelSelector out;
  if (selector.is_null()) return out;
  if (!selector.is_object()) return InvalidArgument("selector: expected an object");
  if (auto it = selector.find("matchLabels"); it != selector.end() && !it->is_null()) {
    if (!it->is_object()) return InvalidArgument("selector.matchLabels: expected an object");
    for (const auto& [key, value] : it->items()) {
      if (!value.is_string()) {
        return InvalidArgument("selector.matchLabels." + key + ": expected a string");
      }
      out.requirements_.push_back({key, LabelRequirement::Op::kIn, {value.get<std::string>()}});
    }
  }
  if (auto it = selector.find("matchExpressions"); it != selector.end() && !it->is_null()) {
    if (!it->is_array()) return InvalidArgument("selector.matchExpressions: expected an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& e = (*it)[i];
      std::string where = "selector.matchExpressions[" + std::to_string(i) + "]";
      if (!e.is_object() || !e.contains("key") || !e["key"].is_string() ||
          !e.contains("operator") || !e["operator"].is_string()) {
        return InvalidArgument(where + ": key and operator are required strings");
      }
      LabelRequirement r;
      r.key = e["key"].get<std::string>();
      std::string op = e["operator"].get<std::string>();
      if (op == "In")
        r.op = LabelRequirement::Op::kIn;
      else if (op == "NotIn")
        r.op = LabelRequirement::Op::kNotIn;
      else if (op == "Exists")
        r.op = LabelRequirement::Op::kExists;
      else if (op == "DoesNotExist")
        r.op = LabelRequirement::Op::kDoesNotExist;
      else
        return InvalidArgument(where + ".operator: \"" + op +
                               "\" is not a valid label selector operator");
      if (auto v = e.find("values"); v != e.end() && !v->is_null()) {
        if (!v->is_array()) return InvalidArgument(where + ".values: expected an array");
        for (const auto& s : *v) {
          if (!s.is_string()) return InvalidArgument(where + ".values: expected strings");
          r.values.push_back(s.get<std::string>());
        }
      }
      bool needs_values = r.op == LabelRequirement::Op::kIn || r.op == LabelRequirement::Op::kNotIn;
      if (needs_values && r.values.empty()) {
        return InvalidArgument(where + ".values: must be non-empty for " + op);
      }
      if (!needs_values && !r.values.empty()) {
        return InvalidArgument(where + ".values: must be empty for " + op);
      }
      out.requirements_.push_back(std::move(r));
    }
  }
  return out;
}

bool LabelSelector::Matches(const Labels& labels) const {
  for (const auto& r : requirements_) {
    auto it = labels.find(r.key);
    bool has = it != labels.end();
    bool in_values =
        has && std::find(r.values.begin(), r.values.end(), it->second) != r.values.end();
    switch (r.op) {
      case LabelRequirement::Op::kIn:
        if (!in_values) return false;
        break;
      case LabelRequirement::Op::kNotIn:
        if (in_values) return false;  // a missing key satisfies NotIn, as in the apiserver
        break;
      case LabelRequirement::Op::kExists:
        if (!has) return false;
        break;
      case LabelRequirement::Op::kDoesNotExist:
        if (has) return false;
        break;
    }
  }
  return true;
}

}  // namespace syncbus::hive
