// The Go-template engine against Go itself: every case of tests/oracle/gotemplate/golden.txt
// (written by the Go oracle from corpus.txt with Go's text/template, as Hive's clustersync
// runs it) must render to the same bytes or fail with the same message.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "consumer/gotemplate/go_text.h"
#include "consumer/templates.h"
#include "tests/support/child_process.h"

using namespace syncbus;
using namespace syncbus::consumer;

namespace {

struct GoldenCase {
  std::string name;
  hive::Labels labels;
  std::string kind;  // "template" or "document"
  std::string input;
  std::string since;
  std::string result_kind;  // "output" or "error" ("" in the corpus for unpinned cases)
  std::string result;
};

// Reads the oracle's line format: `key "quoted" ["quoted"]`, Go string literals.
std::vector<GoldenCase> ReadCases(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  std::vector<GoldenCase> cases;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::string_view rest = line;
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    if (rest.empty() || rest.front() == '#') continue;
    size_t space = rest.find(' ');
    std::string key(rest.substr(0, space));
    rest.remove_prefix(space == std::string_view::npos ? rest.size() : space + 1);
    std::vector<std::string> values;
    while (!rest.empty()) {
      char quote = rest.front();
      size_t end = 1;
      while (end < rest.size() && rest[end] != quote)
        end += (quote == '"' && rest[end] == '\\') ? 2 : 1;
      std::optional<std::string> value = consumer::gotemplate::Unquote(rest.substr(0, end + 1));
      REQUIRE_MESSAGE(value.has_value(), path << ":" << number << ": bad literal");
      values.push_back(*value);
      rest.remove_prefix(std::min(rest.size(), end + 1));
      while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    }
    if (key == "case") {
      cases.push_back({values.at(0), {}, "", "", "", "", ""});
      continue;
    }
    REQUIRE_MESSAGE(!cases.empty(), path << ":" << number);
    GoldenCase& c = cases.back();
    if (key == "label") {
      c.labels[values.at(0)] = values.at(1);
    } else if (key == "template" || key == "document") {
      c.kind = key;
      c.input = values.at(0);
    } else if (key == "since") {
      c.since = values.at(0);
    } else if (key == "output" || key == "error") {
      c.result_kind = key;
      c.result = values.at(0);
    } else {
      FAIL(path << ":" << number << ": unknown line " << key);
    }
  }
  return cases;
}

std::string OracleDir() {
  return syncbus::testing::SourceDir() + "/tests/oracle/gotemplate";
}

}  // namespace

TEST_CASE("gotemplate golden: the golden file holds exactly the corpus's cases") {
  std::vector<GoldenCase> corpus = ReadCases(OracleDir() + "/corpus.txt");
  std::vector<GoldenCase> golden = ReadCases(OracleDir() + "/golden.txt");
  REQUIRE(corpus.size() == golden.size());
  for (size_t i = 0; i < corpus.size(); ++i) {
    INFO("case " << corpus[i].name
                 << " (regenerate golden.txt: go run . -update in tests/oracle/gotemplate)");
    CHECK(golden[i].name == corpus[i].name);
    CHECK(golden[i].labels == corpus[i].labels);
    CHECK(golden[i].kind == corpus[i].kind);
    CHECK(golden[i].input == corpus[i].input);
    CHECK(golden[i].since == corpus[i].since);
    if (!corpus[i].since.empty()) CHECK(golden[i].result == corpus[i].result);
  }
}

TEST_CASE("gotemplate golden: every case renders as Go's text/template renders it") {
  std::vector<GoldenCase> cases = ReadCases(OracleDir() + "/golden.txt");
  REQUIRE(cases.size() > 300);
  for (const GoldenCase& c : cases) {
    INFO("case " << c.name << ": " << c.input);
    if (c.kind == "template") {
      Result<std::string> out = ExpandTemplate(c.input, c.labels);
      if (c.result_kind == "output") {
        REQUIRE_MESSAGE(out.ok(), out.status().message());
        CHECK(*out == c.result);
      } else {
        REQUIRE_FALSE(out.ok());
        CHECK(out.status().message() == c.result);
      }
      continue;
    }
    Json doc = Json::parse(c.input);
    Status s = ExpandTemplates(doc, c.labels);
    if (c.result_kind == "output") {
      REQUIRE_MESSAGE(s.ok(), s.message());
      CHECK(doc == Json::parse(c.result));
    } else {
      REQUIRE_FALSE(s.ok());
      CHECK(s.message() == c.result);
    }
  }
}
