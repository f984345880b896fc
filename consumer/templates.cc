#include "consumer/templates.h"

#include <memory>

#include "consumer/gotemplate/exec.h"
#include "consumer/gotemplate/go_text.h"
#include "consumer/gotemplate/parser.h"

namespace syncbus::consumer {
namespace {

namespace gt = gotemplate;

// Hive names its template "cdParams" (clustersync templateForCD).
constexpr char kTemplateName[] = "cdParams";

// The template set Hive parses successive strings into (one per top-level field of a resource).
// A {{define}}d template stays callable by later strings, and a later non-empty definition
// replaces an earlier one, as with Go's Template.Parse. Unlike Hive, a string whose own body is
// empty (only spaces, comments or {{define}}s) renders as itself instead of re-running the
// previous string's body (Go keeps an existing non-empty body), a Hive quirk that turns a " "
// into whatever the string before it rendered to.
class TemplateSet {
 public:
  TemplateSet(const hive::Labels& labels, gt::Budget& budget) : labels_(labels), budget_(budget) {}

  // Hive's applyTemplate for one string.
  Result<std::string> Apply(const std::string& s) {
    // Without "{{" the text is all the output (and no later string can see this one's body).
    if (s.find("{{") == std::string::npos) return s;
    auto text = std::make_shared<const std::string>(s);
    Result<gt::TreeSet> trees = gt::Parse(kTemplateName, text);
    if (!trees.ok()) {
      return InvalidArgument("failed to parse template string " + gt::Quote(s) + ": " +
                             trees.status().message());
    }
    for (auto& [name, tree] : *trees) {
      auto existing = namespace_.find(name);
      if (name != kTemplateName && existing != namespace_.end() &&
          gt::IsEmptyTree(tree->root.get()))
        continue;
      namespace_[name] = tree;
    }
    Result<std::string> out = gt::Execute(namespace_, kTemplateName, labels_, budget_);
    if (!out.ok()) {
      return InvalidArgument("failed to execute template on string " + gt::Quote(s) + ": " +
                             out.status().message());
    }
    return out;
  }

 private:
  const hive::Labels& labels_;
  gt::Budget& budget_;
  gt::Namespace namespace_;
};

// What Go's encoding/json writes for a string: each invalid UTF-8 byte becomes U+FFFD.
std::string ValidUtf8(const std::string& s) {
  if (gt::ValidUtf8(s)) return s;
  std::string out;
  std::string_view rest = s;
  while (!rest.empty()) {
    gt::DecodedRune d = gt::DecodeRune(rest);
    gt::AppendRune(out, d.rune);
    rest.remove_prefix(static_cast<size_t>(d.width));
  }
  return out;
}

// Hive's applyTemplate over a decoded value: strings rendered, arrays in order, objects by key.
Status Render(Json& value, TemplateSet& set) {
  if (value.is_string()) {
    Result<std::string> out = set.Apply(value.get_ref<const std::string&>());
    if (!out.ok()) return out.status();
    value = ValidUtf8(*out);
    return Status::Ok();
  }
  if (value.is_object() || value.is_array()) {
    for (auto& child : value) {
      if (Status s = Render(child, set); !s.ok()) return s;
    }
  }
  return Status::Ok();
}

// Go's %#v of a value of an unstructured object (map[string]interface{}, []interface{}, string,
// int64, float64, bool, nil).
void AppendGoSyntax(std::string& out, const Json& v, bool top) {
  switch (v.type()) {
    case Json::value_t::object: {
      out += "map[string]interface {}{";
      bool first = true;
      for (const auto& [key, item] : v.items()) {
        if (!first) out += ", ";
        first = false;
        out += gt::Quote(key);
        out.push_back(':');
        AppendGoSyntax(out, item, false);
      }
      out.push_back('}');
      return;
    }
    case Json::value_t::array: {
      out += "[]interface {}{";
      for (size_t i = 0; i < v.size(); ++i) {
        if (i > 0) out += ", ";
        AppendGoSyntax(out, v[i], false);
      }
      out.push_back('}');
      return;
    }
    case Json::value_t::string: out += gt::Quote(v.get_ref<const std::string&>()); return;
    case Json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; return;
    case Json::value_t::number_integer: out += std::to_string(v.get<int64_t>()); return;
    case Json::value_t::number_unsigned: {
      auto u = v.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) {
        out += std::to_string(u);
      } else {
        out += gt::FormatFloat(static_cast<double>(u), 'g', -1);  // Go decodes it as a float64
      }
      return;
    }
    case Json::value_t::number_float: out += gt::FormatFloat(v.get<double>(), 'g', -1); return;
    default: out += top ? "<nil>" : "interface {}(nil)"; return;
  }
}

}  // namespace

Result<std::string> ExpandTemplate(const std::string& text, const hive::Labels& cd_labels) {
  gt::Budget budget;
  TemplateSet set(cd_labels, budget);
  return set.Apply(text);
}

Status ExpandTemplates(Json& value, const hive::Labels& cd_labels) {
  gt::Budget budget;
  if (!value.is_object()) {
    TemplateSet set(cd_labels, budget);
    return Render(value, set);
  }
  for (auto& [key, field] : value.items()) {
    TemplateSet set(cd_labels, budget);
    if (Status s = Render(field, set); !s.ok()) {
      std::string shown;
      AppendGoSyntax(shown, field, true);
      return InvalidArgument("Failed to apply template to value " + shown + ": " + s.message());
    }
  }
  return Status::Ok();
}

}  // namespace syncbus::consumer
