// SyncSet templates beyond Go's own behaviour (which gotemplate_golden_test.cc compares with
// Go): Hive's use of text/template (field-by-field template sets, error wrapping, U+FFFD for
// bad UTF-8 in resources), the deliberate difference from Hive, and the bounds that keep a
// hostile template from exhausting a consumer.
#include "consumer/templates.h"

#include <string>
#include <thread>

#include <doctest/doctest.h>

#include "consumer/gotemplate/exec.h"
#include "consumer/gotemplate/go_text.h"
#include "consumer/gotemplate/parser.h"

using namespace syncbus;
using namespace syncbus::consumer;

namespace {

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("templates: fromCDLabel expands to the label's value, empty when absent") {
  hive::Labels labels = {{"region", "eu"}, {"a/b", "x"}};
  CHECK(*ExpandTemplate(R"({{ fromCDLabel "region" }})", labels) == "eu");
  CHECK(*ExpandTemplate(R"(r={{fromCDLabel "region"}}, {{ fromCDLabel `a/b` }}.)", labels) ==
        "r=eu, x.");
  CHECK(*ExpandTemplate(R"([{{ fromCDLabel "none" }}])", labels) == "[]");
  CHECK(*ExpandTemplate("no actions", labels) == "no actions");
  CHECK(*ExpandTemplate(R"(a  {{- fromCDLabel "region" -}}  b)", labels) == "aeub");
  CHECK(*ExpandTemplate("", labels) == "");
}

TEST_CASE("templates: every string value of a document, keys untouched, other values kept") {
  hive::Labels labels = {{"tier", "gold"}};
  Json doc = {{"metadata", {{"name", R"(n-{{ fromCDLabel "tier" }})"}}},
              {"data", {{R"({{ fromCDLabel "tier" }})", R"({{ fromCDLabel "tier" }})"}}},
              {"list", Json::array({R"({{ fromCDLabel "tier" }})", 3, true, nullptr, 1.5})}};
  REQUIRE(ExpandTemplates(doc, labels).ok());
  CHECK(doc["metadata"]["name"] == "n-gold");
  CHECK(doc["data"][R"({{ fromCDLabel "tier" }})"] == "gold");
  CHECK(doc["list"] == Json::array({"gold", 3, true, nullptr, 1.5}));
}

TEST_CASE("templates: Hive's error texts wrap Go's") {
  hive::Labels labels;
  Result<std::string> parse = ExpandTemplate(R"({{ env "HOME" }})", labels);
  REQUIRE_FALSE(parse.ok());
  CHECK(parse.status().code() == Code::kInvalidArgument);
  CHECK(
      parse.status().message() ==
      R"(failed to parse template string "{{ env \"HOME\" }}": template: cdParams:1: function "env" not defined)");
  Result<std::string> exec = ExpandTemplate(R"(x{{index "ab" 7}})", labels);
  REQUIRE_FALSE(exec.ok());
  CHECK(
      exec.status().message() ==
      R"(failed to execute template on string "x{{index \"ab\" 7}}": template: cdParams:1:3: executing )"
      R"("cdParams" at <index "ab" 7>: error calling index: index out of range: 7)");
  Json doc = {{"kind", "ConfigMap"}, {"data", {{"k", "{{len 1}}"}, {"n", 2}}}};
  Status s = ExpandTemplates(doc, labels);
  REQUIRE_FALSE(s.ok());
  CHECK(
      s.message() ==
      R"(Failed to apply template to value map[string]interface {}{"k":"{{len 1}}", "n":2}: failed to )"
      R"(execute template on string "{{len 1}}": template: cdParams:1:2: executing "cdParams" at )"
      R"(<len 1>: error calling len: len of type int)");
  Json list = Json::array({"{{bad"});
  Status plain = ExpandTemplates(list, labels);
  REQUIRE_FALSE(plain.ok());
  CHECK(
      plain.message() ==
      R"(failed to parse template string "{{bad": template: cdParams:1: function "bad" not defined)");
}

TEST_CASE("templates: a definition is shared by the later strings of the same field only") {
  hive::Labels labels;
  Json doc = {{"a", Json::array({R"({{define "x"}}X{{end}}one)", R"({{template "x"}})"})},
              {"b", Json::array({R"({{template "x"}})"})}};
  Status s = ExpandTemplates(doc, labels);
  REQUIRE_FALSE(s.ok());
  CHECK(doc["a"] == Json::array({"one", "X"}));
  CHECK(Contains(s.message(), R"(template "x" not defined)"));
  Json redefined = {
      {"a", Json::array({R"({{define "x"}}1{{end}})", R"({{define "x"}}2{{end}}{{template "x"}})",
                         R"({{define "x"}} {{end}}{{template "x"}})"})}};
  REQUIRE(ExpandTemplates(redefined, labels).ok());
  CHECK(redefined["a"] == Json::array({"", "2", "2"}));
}

TEST_CASE(
    "templates: a string with an empty body renders as itself (Hive would repeat the previous "
    "one)") {
  // Go's Template.Parse keeps an existing non-empty body when the new one is only space or
  // definitions, so Hive renders " " after "a" as "a" (and, across an object's keys, at random).
  // syncbus renders every string as itself.
  hive::Labels labels;
  Json doc = {
      {"args", Json::array({"--flag", " ", "\n", R"({{define "d"}}{{end}})", "{{/* c */}}"})}};
  REQUIRE(ExpandTemplates(doc, labels).ok());
  CHECK(doc["args"] == Json::array({"--flag", " ", "\n", "", ""}));
}

TEST_CASE(
    "templates: invalid UTF-8 in a rendered resource string becomes U+FFFD, patches keep Go's "
    "bytes") {
  hive::Labels labels;
  Json doc = {{"data", {{"k", R"(a{{"\xff\xfe"}}b{{index "é" 0 | printf "%c"}})"}}}};
  REQUIRE(ExpandTemplates(doc, labels).ok());
  CHECK(doc["data"]["k"] ==
        "a\xEF\xBF\xBD\xEF\xBF\xBD"
        "b\xC3\x83");
  CHECK(doc.dump().size() > 0);
  CHECK(*ExpandTemplate(R"({{"\xff"}})", labels) == "\xff");
}

TEST_CASE("templates: recursion stops at the template depth limit") {
  hive::Labels labels;
  Result<std::string> out =
      ExpandTemplate(R"({{define "r"}}{{template "r"}}{{end}}{{template "r"}})", labels);
  REQUIRE_FALSE(out.ok());
  CHECK(Contains(out.status().message(),
                 R"(executing "r" at <{{template "r"}}>: exceeded maximum template depth (500))"));
  // A bounded recursion below the limit works (one level per character).
  std::string s(450, 'a');
  Result<std::string> deep = ExpandTemplate(
      R"({{define "r"}}{{if .}}x{{template "r" (slice . 1)}}{{end}}{{end}}{{template "r" ")" + s +
          "\"}}",
      labels);
  REQUIRE_MESSAGE(deep.ok(), deep.status().message());
  CHECK(*deep == std::string(450, 'x'));
}

TEST_CASE("templates: the deepest nesting the limits allow runs on a thread's default stack") {
  hive::Labels labels;
  // kMaxParseNesting levels of {{if}} in a template that calls itself: nesting times depth is
  // cut by kMaxExecNesting, never by the stack.
  int levels = gotemplate::kMaxParseNesting - 1;
  std::string body = Repeat("{{if 1}}", levels) + R"({{template "r"}})" + Repeat("{{end}}", levels);
  std::string text = R"({{define "r"}})" + body + R"({{end}}{{template "r"}})";
  Result<std::string> out = InvalidArgument("not run");
  std::thread worker([&] { out = ExpandTemplate(text, labels); });
  worker.join();
  REQUIRE_FALSE(out.ok());
  CHECK(Contains(out.status().message(), "exceeded maximum nesting depth (3000)"));
  // Parentheses nest as deep as the parser allows, evaluation follows.
  std::string parens = "{{" + Repeat("(", levels) + "1" + Repeat(")", levels) + "}}";
  Result<std::string> p = InvalidArgument("not run");
  std::thread evaluator([&] { p = ExpandTemplate(parens, labels); });
  evaluator.join();
  REQUIRE_MESSAGE(p.ok(), p.status().message());
  CHECK(*p == "1");
}

TEST_CASE("templates: deeper parse nesting fails cleanly") {
  hive::Labels labels;
  int levels = gotemplate::kMaxParseNesting + 1;
  Result<std::string> parens =
      ExpandTemplate("{{" + Repeat("(", levels) + "1" + Repeat(")", levels) + "}}", labels);
  REQUIRE_FALSE(parens.ok());
  CHECK(Contains(parens.status().message(),
                 "template: cdParams:1: max nesting depth exceeded (200)"));
  Result<std::string> ifs =
      ExpandTemplate(Repeat("{{if 1}}", levels) + Repeat("{{end}}", levels), labels);
  REQUIRE_FALSE(ifs.ok());
  CHECK(Contains(ifs.status().message(), "max nesting depth exceeded (200)"));
  Result<std::string> unclosed = ExpandTemplate(Repeat("{{with 1}}", 100000), labels);
  REQUIRE_FALSE(unclosed.ok());
}

TEST_CASE("templates: a loop that runs on, and output that grows on, are stopped") {
  hive::Labels labels;
  Result<std::string> spin = ExpandTemplate("{{range 1000000000}}{{end}}", labels);
  REQUIRE_FALSE(spin.ok());
  CHECK(Contains(spin.status().message(), "execution took more than 1000000 steps"));
  Result<std::string> big = ExpandTemplate("{{range 100000000}}0123456789{{end}}", labels);
  REQUIRE_FALSE(big.ok());
  CHECK(Contains(big.status().message(), "output longer than 2097152 bytes"));
  Result<std::string> wide =
      ExpandTemplate(R"({{printf "%1000000d%1000000d%1000000d" 1 2 3}})", labels);
  REQUIRE_FALSE(wide.ok());
  CHECK(
      Contains(wide.status().message(), "error calling printf: result longer than 2097152 bytes"));
  Result<std::string> grow =
      ExpandTemplate(R"({{$s := printf "%1000000s" "x"}}{{html $s $s $s | len}})", labels);
  REQUIRE_FALSE(grow.ok());
  CHECK(Contains(grow.status().message(), "error calling html: result longer than 2097152 bytes"));
  // The byte budget is shared by the strings of one document.
  Json doc = Json::object();
  for (int i = 0; i < 10; ++i) doc["k" + std::to_string(i)] = R"({{printf "%1000000d" 1}})";
  Status total = ExpandTemplates(doc, labels);
  REQUIRE_FALSE(total.ok());
  CHECK(Contains(total.message(), "output longer than 8388608 bytes"));
}

TEST_CASE("gotemplate: FormatFloat matches strconv.FormatFloat") {
  using gotemplate::FormatFloat;
  CHECK(FormatFloat(1.0, 'b', -1) == "4503599627370496p-52");
  CHECK(FormatFloat(0.1, 'g', -1) == "0.1");
  CHECK(FormatFloat(1e21, 'g', -1) == "1e+21");
  CHECK(FormatFloat(123456, 'e', 2) == "1.23e+05");
  CHECK(FormatFloat(1.5, 'x', -1) == "0x1.8p+00");
  CHECK(FormatFloat(-0.0, 'f', 2) == "-0.00");
  CHECK(FormatFloat(5e-324, 'e', -1) == "5e-324");
  CHECK(FormatFloat(1.0 / 0.0, 'g', -1) == "+Inf");
}

TEST_CASE("gotemplate: Quote and Unquote are strconv's") {
  using gotemplate::Quote;
  using gotemplate::Unquote;
  CHECK(Quote("a\"\\\n\x01\x7f\xff é\u00ad\U0001F600") == R"("a\"\\\n\x01\x7f\xff é\u00ad😀")");
  CHECK(gotemplate::QuoteToAscii("é") == R"("\u00e9")");
  CHECK(*Unquote(R"("\x41\101\u00e9")") == "AAé");
  CHECK(*Unquote("`a\r\nb`") == "a\nb");
  CHECK_FALSE(Unquote(R"("\ud800")").has_value());
  CHECK_FALSE(Unquote(R"("a)").has_value());
  CHECK_FALSE(Unquote("\"a\nb\"").has_value());
}

TEST_CASE("gotemplate: Parse returns every defined template") {
  auto text =
      std::make_shared<const std::string>(R"({{define "a"}}A{{end}}{{block "b" .}}B{{end}}main)");
  Result<gotemplate::TreeSet> trees = gotemplate::Parse("cdParams", text);
  REQUIRE(trees.ok());
  CHECK(trees->size() == 3);
  CHECK(trees->at("cdParams")->root->String() == R"({{template "b" .}}main)");
  CHECK(trees->at("a")->root->String() == "A");
}
