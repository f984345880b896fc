#include "ctl/preview.h"

#include <doctest/doctest.h>

using namespace syncbus;
using namespace syncbus::ctl;

namespace {

// A running cluster (installed, Unreachable=False) in its own namespace.
Json PvCd(const std::string& name, Json labels, bool installed = true) {
  return {
      {"metadata", {{"name", name}, {"namespace", name}, {"labels", std::move(labels)}}},
      {"spec", {{"installed", installed}}},
      {"status", {{"conditions", Json::array({{{"type", "Unreachable"}, {"status", "False"}}})}}}};
}

Json PvSet(const std::string& yaml) {
  auto set = ReadPreviewSet(yaml);
  REQUIRE_MESSAGE(set.ok(), set.status().ToString());
  return *set;
}

const char* kPvSelectorSet = R"(
apiVersion: hive.openshift.io/v1
kind: SelectorSyncSet
metadata:
  name: fleet-cm
  resourceVersion: "17"
spec:
  clusterDeploymentSelector:
    matchLabels: {env: prod}
    matchExpressions:
    - {key: region, operator: In, values: [eu, us]}
  resources:
  - {apiVersion: v1, kind: ConfigMap, metadata: {name: cm, namespace: app}}
)";

std::vector<std::string> PvKeys(const std::vector<PreviewCluster>& clusters) {
  std::vector<std::string> keys;
  for (const auto& c : clusters) keys.push_back(c.Key());
  return keys;
}

ClusterPicker::Choice PvPick(const Json& set, const std::string& selector,
                             std::vector<std::string> named, const std::vector<Json>& cds) {
  auto narrow = ParseSelectorFlag(selector);
  REQUIRE(narrow.ok());
  auto picker = ClusterPicker::Create(set, std::move(*narrow), std::move(named));
  REQUIRE(picker.ok());
  for (const auto& cd : cds) picker->Add(cd);
  return std::move(*picker).Finish();
}

PreviewReply PvAnswer(const std::string& id, const std::string& cluster,
                      std::vector<ObjectOutcome> outcomes, const std::string& message = "") {
  PreviewReply r;
  r.preview_id = id;
  r.cluster = {cluster, cluster};
  for (size_t i = 0; i < outcomes.size(); ++i) {
    ObjectPreview o{"v1", "ConfigMap", "app", "cm" + std::to_string(i), outcomes[i], {}, ""};
    if (outcomes[i] == ObjectOutcome::kRefused) o.message = message;
    r.objects.push_back(o);
  }
  return r;
}

}  // namespace

TEST_CASE("preview reads one SyncSet or SelectorSyncSet and rejects anything else") {
  Json set = PvSet(kPvSelectorSet);
  CHECK(set["kind"] == "SelectorSyncSet");
  CHECK_FALSE(set["metadata"].contains("resourceVersion"));  // only what the operator applies
  CHECK(set["spec"]["resources"].size() == 1);

  auto other = ReadPreviewSet("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n");
  REQUIRE_FALSE(other.ok());
  CHECK(other.status().message() ==
        "the file holds a v1 ConfigMap; preview takes a hive.openshift.io/v1 SyncSet or "
        "SelectorSyncSet");
  auto two = ReadPreviewSet(std::string(kPvSelectorSet) + "---\n" + kPvSelectorSet);
  REQUIRE_FALSE(two.ok());
  CHECK(two.status().message() ==
        "the file holds 2 documents; preview takes one SyncSet or SelectorSyncSet");
  auto no_ns = ReadPreviewSet(
      "apiVersion: hive.openshift.io/v1\nkind: SyncSet\nmetadata: {name: s}\nspec: {}\n");
  REQUIRE_FALSE(no_ns.ok());
  CHECK(no_ns.status().message() ==
        "SyncSet s: metadata.namespace must name the namespace of its clusters");
  CHECK_FALSE(ReadPreviewSet("a: [").ok());
  auto bad_selector = ReadPreviewSet(
      "apiVersion: hive.openshift.io/v1\nkind: SelectorSyncSet\nmetadata: {name: s}\n"
      "spec: {clusterDeploymentSelector: {matchExpressions: [{key: a, operator: Near}]}}\n");
  CHECK_FALSE(bad_selector.ok());
}

TEST_CASE("--selector takes key=value pairs") {
  auto s = ParseSelectorFlag("env=prod,tier=gold");
  REQUIRE(s.ok());
  CHECK(s->Matches({{"env", "prod"}, {"tier", "gold"}}));
  CHECK_FALSE(s->Matches({{"env", "prod"}}));
  CHECK(ParseSelectorFlag("")->empty());
  CHECK(ParseSelectorFlag("env").status().message() == "--selector: \"env\" is not key=value");
  CHECK_FALSE(ParseSelectorFlag("env!=prod").ok());
}

TEST_CASE("a SelectorSyncSet previews the clusters its selector matches, narrowed by the flags") {
  Json set = PvSet(kPvSelectorSet);
  std::vector<Json> cds = {
      PvCd("a", {{"env", "prod"}, {"region", "eu"}, {"tier", "gold"}}),
      PvCd("b", {{"env", "prod"}, {"region", "us"}}),
      PvCd("c", {{"env", "prod"}, {"region", "ap"}}),  // not In [eu, us]
      PvCd("d", {{"env", "dev"}, {"region", "eu"}}),   // not prod
      PvCd("e", {{"env", "prod"}, {"region", "eu"}}, /*installed=*/false),
  };
  auto all = PvPick(set, "", {}, cds);
  CHECK(PvKeys(all.clusters) == std::vector<std::string>{"a/a", "b/b"});
  REQUIRE(all.skipped.size() == 1);
  CHECK(all.skipped[0] == std::pair<std::string, std::string>{"e/e", "not-installed"});
  CHECK(all.not_found.empty());

  CHECK(PvKeys(PvPick(set, "tier=gold", {}, cds).clusters) == std::vector<std::string>{"a/a"});
  auto named = PvPick(set, "", {"b", "c/c", "zz/zz"}, cds);
  CHECK(PvKeys(named.clusters) == std::vector<std::string>{"b/b"});  // c exists, not targeted
  CHECK(named.not_found == std::vector<std::string>{"zz/zz"});
  CHECK(named.named_missing);
}

TEST_CASE("a SyncSet previews its clusterDeploymentRefs in its namespace") {
  Json set = PvSet(R"(
apiVersion: hive.openshift.io/v1
kind: SyncSet
metadata: {name: s, namespace: a}
spec:
  clusterDeploymentRefs: [{name: a}, {name: gone}]
)");
  auto choice = PvPick(set, "", {}, {PvCd("a", Json::object()), PvCd("b", Json::object())});
  CHECK(PvKeys(choice.clusters) == std::vector<std::string>{"a/a"});
  CHECK(choice.not_found == std::vector<std::string>{"a/gone"});  // reported, as Hive ignores it
  CHECK_FALSE(choice.named_missing);
}

TEST_CASE("replies are kept once per asked cluster, and the others told apart") {
  ReplyCollector c("pv-1", {{"a", "a"}, {"b", "b"}});
  std::string why;
  auto a = EncodePreviewReply(PvAnswer("pv-1", "a", {ObjectOutcome::kCreated}));
  CHECK(c.Accept("pv-1", a, &why) == ReplyCollector::Verdict::kAccepted);
  CHECK(c.Accept("pv-1", a, &why) == ReplyCollector::Verdict::kDuplicate);
  CHECK(c.Accept("pv-0", a, &why) == ReplyCollector::Verdict::kOtherPreview);
  CHECK(c.Accept("pv-1", EncodePreviewReply(PvAnswer("pv-0", "b", {})), &why) ==
        ReplyCollector::Verdict::kOtherPreview);
  CHECK(c.Accept("pv-1", "{not json", &why) == ReplyCollector::Verdict::kMalformed);
  CHECK(why == "preview reply: body is not valid JSON");
  CHECK(c.Accept("pv-1", EncodePreviewReply(PvAnswer("pv-1", "x", {})), &why) ==
        ReplyCollector::Verdict::kUnknownCluster);
  CHECK(why == "a reply for x/x, which this preview did not ask");
  CHECK(c.answered() == 1);
  CHECK_FALSE(c.done());
  CHECK(c.Unanswered() == std::vector<std::string>{"b/b"});
}

namespace {

// Five clusters asked: two change the same way, one changes otherwise, one refuses, one is
// silent; one more skipped and one not found.
PreviewReport PvReport() {
  std::vector<PreviewCluster> asked;
  for (const char* n : {"c1", "c2", "c3", "c4", "c5", "c6"}) asked.push_back({n, n});
  ReplyCollector c("pv-1", asked);
  using O = ObjectOutcome;
  for (const auto& reply : {PvAnswer("pv-1", "c1", {O::kCreated, O::kChanged, O::kChanged}),
                            PvAnswer("pv-1", "c2", {O::kCreated, O::kChanged, O::kChanged}),
                            PvAnswer("pv-1", "c3", {O::kUnchanged, O::kChanged}),
                            PvAnswer("pv-1", "c4", {O::kUnchanged, O::kRefused, O::kNotReached},
                                     "namespaces \"app\" not found"),
                            PvAnswer("pv-1", "c6", {O::kUnchanged})}) {
    REQUIRE(c.Accept("pv-1", EncodePreviewReply(reply), nullptr) ==
            ReplyCollector::Verdict::kAccepted);
  }
  ClusterPicker::Choice choice;
  choice.skipped = {{"c7/c7", "paused"}};
  choice.not_found = {"c8/c8"};
  return BuildPreviewReport(
      PvSet("apiVersion: hive.openshift.io/v1\nkind: SelectorSyncSet\nmetadata: {name: s}\n"
            "spec: {clusterDeploymentSelector: {}}\n"),
      c, choice, std::chrono::seconds(42));
}

}  // namespace

TEST_CASE("the report groups clusters by what the change does there") {
  PreviewReport r = PvReport();
  REQUIRE(r.groups.size() == 7);
  CHECK(r.groups[0].outcome == PreviewOutcome::kChange);
  CHECK(r.groups[0].detail == "create 1, change 2");
  CHECK(r.groups[0].clusters == std::vector<std::string>{"c1/c1", "c2/c2"});
  CHECK(r.groups[1].detail == "change 1");
  CHECK(r.groups[2].outcome == PreviewOutcome::kUnchanged);
  CHECK(r.groups[3].outcome == PreviewOutcome::kRefuse);
  CHECK(r.groups[3].detail == "ConfigMap app/cm1: namespaces \"app\" not found");
  CHECK(r.groups[4].outcome == PreviewOutcome::kNoAnswer);
  CHECK(r.groups[4].clusters == std::vector<std::string>{"c5/c5"});
  CHECK(r.groups[5].detail == "paused");
  CHECK(r.groups[6].outcome == PreviewOutcome::kNotFound);
  CHECK(r.counts[PreviewOutcome::kChange] == 3);
  CHECK(r.ExitCode(false) == 1);  // a refusal outweighs the silence
}

TEST_CASE("exit codes: 0 clean, 1 refused or failed, 3 only silence") {
  PreviewReport r;
  CHECK(r.ExitCode(false) == 0);
  CHECK(r.ExitCode(true) == 1);
  r.counts[PreviewOutcome::kNoAnswer] = 2;
  CHECK(r.ExitCode(false) == 3);
  r.counts[PreviewOutcome::kError] = 1;
  CHECK(r.ExitCode(false) == 1);
  r.counts = {{PreviewOutcome::kSkipped, 1}, {PreviewOutcome::kNotFound, 1}};
  CHECK(r.ExitCode(false) == 0);
}

TEST_CASE("the table prints a headline and one row per group, wide one row per cluster") {
  PreviewReport r = PvReport();
  std::string table = FormatPreviewReport(r, OutputFormat::kTable);
  CHECK(table ==
        "preview of SelectorSyncSet s: 5 of 6 clusters answered in 42s\n"
        "would create 1, change 2 objects on 2 clusters; would change 1 object on 1 cluster; "
        "unchanged on 1 cluster; 1 cluster refuses; 1 cluster did not answer; 1 cluster skipped "
        "by Hive's rules; 1 cluster not found\n"
        "\n"
        "OUTCOME    CLUSTERS  DETAIL                                         EXAMPLES\n"
        "change     2         create 1, change 2                             c1/c1, c2/c2\n"
        "change     1         change 1                                       c3/c3\n"
        "unchanged  1         1 object                                       c6/c6\n"
        "refuse     1         ConfigMap app/cm1: namespaces \"app\" not found  c4/c4\n"
        "no-answer  1         -                                              c5/c5\n"
        "skipped    1         paused                                         c7/c7\n"
        "not-found  1         -                                              c8/c8\n");
  std::string wide = FormatPreviewReport(r, OutputFormat::kWide);
  CHECK(wide.find("CLUSTER  OUTCOME    DETAIL\nc1/c1    change     create 1, change 2\n") !=
        std::string::npos);
  Json doc = Json::parse(FormatPreviewReport(r, OutputFormat::kJson));
  CHECK(doc["summary"]["change"] == 3);
  CHECK(doc["summary"]["no-answer"] == 1);
  CHECK(doc["replies"].size() == 5);
  CHECK(doc["replies"][3]["objects"][1]["message"] == "namespaces \"app\" not found");
  CHECK(doc["set"] == Json{{"kind", "SelectorSyncSet"}, {"name", "s"}});
  std::string yaml = FormatPreviewReport(r, OutputFormat::kYaml);
  CHECK(yaml.find("previewId:") != std::string::npos);
}

TEST_CASE("large counts read with thousands separators") {
  CHECK(WithThousands(0) == "0");
  CHECK(WithThousands(999) == "999");
  CHECK(WithThousands(1180) == "1,180");
  CHECK(WithThousands(1234567) == "1,234,567");
}
