// syncbusctl's -o yaml reads back as the JSON it stands for (the way the apiserver and kubectl
// read YAML: 1.1 scalars), output format names, and shell completion candidates.
#include "ctl/output.h"

#include <doctest/doctest.h>

#include "common/yaml_json.h"
#include "ctl/cli.h"

using namespace syncbus;
using namespace syncbus::ctl;

namespace {

Json RoundTrip(const Json& doc) {
  std::string yaml = ToYaml(doc);
  auto back = YamlToJson(yaml);
  REQUIRE_MESSAGE(back.ok(), back.status().ToString() << "\n" << yaml);
  return *back;
}

}  // namespace

TEST_CASE("ToYaml quotes every string YAML would read as something else") {
  const char* tricky[] = {"",
                          "yes",
                          "No",
                          "on",
                          "OFF",
                          "y",
                          "true",
                          "null",
                          "~",
                          "1",
                          "-1",
                          "1.5",
                          "1e3",
                          "0x1f",
                          "0o17",
                          "017",
                          ".inf",
                          "-.nan",
                          "1:30",
                          "a: b",
                          "a #b",
                          " lead",
                          "trail ",
                          "-x",
                          "- x",
                          "*ref",
                          "&anchor",
                          "!tag",
                          "%pct",
                          "@at",
                          "`tick",
                          "|pipe",
                          ">fold",
                          "'q",
                          "\"dq",
                          "?q",
                          "{b}",
                          "[s]",
                          "a,b",
                          "#c",
                          "line\nbreak",
                          "tab\there",
                          "ünïcode",
                          "2026-01-01T00:00:00.000Z",
                          "syncbus.work.change",
                          "ns/name",
                          "1s",
                          "x-delivery-limit"};
  for (const char* s : tricky) {
    CAPTURE(s);
    Json doc = {{"value", s}, {"list", Json::array({s})}, {s, 1}};
    CHECK(RoundTrip(doc) == doc);
  }
}

TEST_CASE("ToYaml writes nested objects and lists in block style") {
  Json doc = {
      {"states", {{"synced", {{"count", 5}, {"oldest", nullptr}}}, {"parked", {{"count", 1}}}}},
      {"queues", {{"syncbus.dead", 1}}},
      {"events",
       Json::array({Json{{"step", "published"}, {"sets", Json::array({Json{{"success", false}}})}},
                    Json::array({1, 2}), Json::object(), Json::array()})},
      {"ratio", 0.25},
      {"negative", -3},
      {"empty", Json::object()},
      {"none", Json::array()},
      {"flag", true}};
  CHECK(RoundTrip(doc) == doc);
  std::string yaml = ToYaml(doc);
  CHECK(
      yaml.find(
          "events:\n- sets:\n  - success: false\n  step: published\n- - 1\n  - 2\n- {}\n- []\n") !=
      std::string::npos);
  CHECK(yaml.find("queues:\n  syncbus.dead: 1\n") != std::string::npos);
  CHECK(ToYaml(Json::array()) == "[]\n");
  CHECK(ToYaml(Json("yes")) == "\"yes\"\n");
}

TEST_CASE("output formats: names, documents and streams") {
  for (const auto& name : OutputFormatNames()) {
    auto parsed = ParseOutputFormat(name);
    REQUIRE(parsed.ok());
    CHECK(OutputFormatName(*parsed) == name);
  }
  auto bad = ParseOutputFormat("xml");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("table, wide, json, yaml") != std::string::npos);
  Json doc = {{"a", 1}};
  CHECK(FormatDocument(doc, OutputFormat::kJson) == "{\n  \"a\": 1\n}\n");
  CHECK(FormatDocument(doc, OutputFormat::kYaml) == "a: 1\n");
  CHECK(FormatStreamItem(doc, OutputFormat::kJson) == "{\"a\":1}\n");
  CHECK(FormatStreamItem(doc, OutputFormat::kYaml) == "---\na: 1\n");
}

TEST_CASE("completion offers subcommands, the current command's flags and -o's formats") {
  auto words = [](const std::string& candidates) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start < candidates.size()) {
      size_t end = candidates.find('\n', start);
      std::string line = candidates.substr(start, end - start);
      out.push_back(line.substr(0, line.find('\t')));
      start = end + 1;
    }
    return out;
  };
  auto top = words(CompletionCandidates({""}));
  CHECK(top == std::vector<std::string>{"wait", "status", "trace", "topology", "dlq", "preview",
                                        "rollout", "completion", ":4"});
  CHECK(words(CompletionCandidates({"rollout", ""})) ==
        std::vector<std::string>{"status", "resume", "abort", ":4"});
  CHECK(words(CompletionCandidates({"st"})) == std::vector<std::string>{"status", ":4"});
  CHECK(words(CompletionCandidates({"dlq", ""})) ==
        std::vector<std::string>{"list", "replay", "purge", "reindex", ":4"});
  CHECK(words(CompletionCandidates({"status", "-o", ""})) ==
        std::vector<std::string>{"table", "wide", "json", "yaml", ":4"});
  CHECK(words(CompletionCandidates({"dlq", "list", "--output", "y"})) ==
        std::vector<std::string>{"yaml", ":4"});
  CHECK(words(CompletionCandidates({"status", "-c", ""})) ==
        std::vector<std::string>{":0"});  // file names
  CHECK(words(CompletionCandidates({"completion", ""})) ==
        std::vector<std::string>{"bash", "zsh", ":4"});
  auto flags = words(CompletionCandidates({"dlq", "purge", "--"}));
  CHECK(std::find(flags.begin(), flags.end(), "--yes") != flags.end());
  CHECK(std::find(flags.begin(), flags.end(), "--dry-run") != flags.end());
  CHECK(std::find(flags.begin(), flags.end(), "--rate") == flags.end());  // replay's, not purge's
  // An option's value is skipped, a flag takes none: the words after them still count.
  CHECK(words(CompletionCandidates({"trace", "--since", "1h", "-o", "j"})) ==
        std::vector<std::string>{"json", ":4"});
  CHECK(words(CompletionCandidates({"--version", "dlq", ""})).size() == 5);
  CHECK(CompletionCandidates({"status", "--since"}).find("--since\t") != std::string::npos);
}

TEST_CASE("completion scripts name the program they complete") {
  CHECK(CompletionScript("bash", "syncbusctl")
            .find("complete -o filenames -F _syncbusctl syncbusctl") != std::string::npos);
  CHECK(
      CompletionScript("zsh", "kubectl-syncbus").find("compdef _kubectl_syncbus kubectl-syncbus") !=
      std::string::npos);
  CHECK(CompletionScript("fish", "syncbusctl").empty());
}
