#include "ctl/preview.h"

#include <algorithm>
#include <utility>

#include "common/bus/sync_message.h"
#include "common/hive/types.h"
#include "common/yaml_json.h"
#include "ctl/text_table.h"

namespace syncbus::ctl {
namespace {

std::string KeyOf(const std::string& ns, const std::string& name) {
  return ns + "/" + name;
}

std::string ObjectName(const ObjectPreview& o) {
  return o.kind + " " + (o.ns.empty() ? o.name : o.ns + "/" + o.name);
}

std::string Plural(size_t n, const char* one, const char* many) {
  return WithThousands(n) + " " + (n == 1 ? one : many);
}

// The group a reply falls in, and its detail.
std::pair<PreviewOutcome, std::string> ClassifyReply(const PreviewReply& reply) {
  if (!reply.error.empty()) return {PreviewOutcome::kError, reply.error};
  size_t counts[6] = {};
  for (const ObjectPreview& o : reply.objects) {
    if (o.outcome == ObjectOutcome::kRefused)
      return {PreviewOutcome::kRefuse, ObjectName(o) + ": " + o.message};
    ++counts[static_cast<int>(o.outcome)];
  }
  std::string detail;
  for (auto [outcome, verb] :
       {std::pair{ObjectOutcome::kCreated, "create"}, std::pair{ObjectOutcome::kChanged, "change"},
        std::pair{ObjectOutcome::kDeleted, "delete"}}) {
    size_t n = counts[static_cast<int>(outcome)];
    if (n > 0) detail += (detail.empty() ? "" : ", ") + std::string(verb) + " " + WithThousands(n);
  }
  if (detail.empty())
    return {PreviewOutcome::kUnchanged, Plural(reply.objects.size(), "object", "objects")};
  return {PreviewOutcome::kChange, detail};
}

}  // namespace

std::string WithThousands(size_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

Result<Json> ReadPreviewSet(const std::string& yaml) {
  auto docs = YamlDocumentsToJson(yaml);
  if (!docs.ok()) return docs.status();
  if (docs->size() != 1) {
    return InvalidArgument("the file holds " + std::to_string(docs->size()) +
                           " documents; preview takes one SyncSet or SelectorSyncSet");
  }
  const Json& doc = docs->front();
  if (!doc.is_object()) return InvalidArgument("the file is not a Kubernetes object");
  const std::string api_version =
      doc.value("apiVersion", Json()).is_string() ? doc["apiVersion"].get<std::string>() : "";
  const std::string kind =
      doc.value("kind", Json()).is_string() ? doc["kind"].get<std::string>() : "";
  if (api_version != "hive.openshift.io/v1" || (kind != "SyncSet" && kind != "SelectorSyncSet")) {
    return InvalidArgument("the file holds a " +
                           (kind.empty() ? std::string("object without a kind")
                                         : (api_version.empty() ? "" : api_version + " ") + kind) +
                           "; preview takes a hive.openshift.io/v1 SyncSet or SelectorSyncSet");
  }
  // What Hive would read, checked the way the hub's sets are.
  Status parsed = kind == "SyncSet" ? hive::SyncSet::FromJson(doc).status()
                                    : hive::SelectorSyncSet::FromJson(doc).status();
  if (!parsed.ok()) return parsed;
  Json set = {{"apiVersion", api_version}, {"kind", kind}, {"spec", doc["spec"]}};
  Json meta = Json::object();
  const Json& in = doc["metadata"];
  for (const char* key : {"name", "namespace", "labels", "annotations"}) {
    if (in.contains(key)) meta[key] = in[key];
  }
  set["metadata"] = std::move(meta);
  std::string name = set["metadata"].value("name", "");
  if (!IsDnsSubdomain(name))
    return InvalidArgument(kind + " metadata.name \"" + name + "\" is not a valid object name");
  if (kind == "SyncSet" && !IsDnsLabel(set["metadata"].value("namespace", ""))) {
    return InvalidArgument("SyncSet " + name +
                           ": metadata.namespace must name the namespace of its clusters");
  }
  if (kind == "SelectorSyncSet") set["metadata"].erase("namespace");  // cluster-scoped
  return set;
}

Result<hive::LabelSelector> ParseSelectorFlag(const std::string& text) {
  Json labels = Json::object();
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    std::string pair = text.substr(start, comma == std::string::npos ? comma : comma - start);
    size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0 || pair.find('=', eq + 1) != std::string::npos ||
        pair[eq - 1] == '!') {
      return InvalidArgument("--selector: \"" + pair + "\" is not key=value");
    }
    labels[pair.substr(0, eq)] = pair.substr(eq + 1);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return hive::LabelSelector::FromJson(Json{{"matchLabels", labels}});
}

Result<ClusterPicker> ClusterPicker::Create(const Json& set, hive::LabelSelector narrow,
                                            std::vector<std::string> named) {
  ClusterPicker p;
  p.narrow_ = std::move(narrow);
  p.named_ = std::move(named);
  p.named_seen_.assign(p.named_.size(), false);
  if (set.value("kind", "") == "SyncSet") {
    auto ss = hive::SyncSet::FromJson(set);
    if (!ss.ok()) return ss.status();
    p.list_ns_ = ss->meta.ns;
    p.refs_ = std::move(ss->cluster_deployment_refs);
    p.refs_seen_.assign(p.refs_.size(), false);
  } else {
    auto sss = hive::SelectorSyncSet::FromJson(set);
    if (!sss.ok()) return sss.status();
    p.selector_set_ = true;
    p.set_selector_ = std::move(sss->selector);
  }
  return p;
}

bool ClusterPicker::Named(const std::string& ns, const std::string& name) const {
  if (named_.empty()) return true;
  return std::any_of(named_.begin(), named_.end(),
                     [&](const std::string& n) { return n == KeyOf(ns, name) || n == name; });
}

void ClusterPicker::Add(const Json& cluster_deployment) {
  auto cd = hive::ClusterDeployment::FromJson(cluster_deployment);
  if (!cd.ok()) return;
  const std::string& ns = cd->meta.ns;
  const std::string& name = cd->meta.name;
  for (size_t i = 0; i < named_.size(); ++i) {
    if (named_[i] == KeyOf(ns, name) || named_[i] == name) named_seen_[i] = true;
  }
  bool targeted = false;
  if (selector_set_) {
    targeted = set_selector_.Matches(cd->meta.labels);
  } else if (ns == list_ns_) {
    for (size_t i = 0; i < refs_.size(); ++i) {
      if (refs_[i] != name) continue;
      refs_seen_[i] = true;
      targeted = true;
    }
  }
  if (!targeted || !narrow_.Matches(cd->meta.labels) || !Named(ns, name)) return;
  if (std::string skip = cd->SkipReason(); !skip.empty()) {
    choice_.skipped.emplace_back(KeyOf(ns, name), skip);
    return;
  }
  choice_.clusters.push_back({ns, name});
}

ClusterPicker::Choice ClusterPicker::Finish() && {
  for (size_t i = 0; i < named_.size(); ++i) {
    if (named_seen_[i]) continue;
    choice_.not_found.push_back(named_[i]);
    choice_.named_missing = true;
  }
  for (size_t i = 0; i < refs_.size(); ++i) {
    if (!refs_seen_[i] && Named(list_ns_, refs_[i]))
      choice_.not_found.push_back(KeyOf(list_ns_, refs_[i]));
  }
  std::sort(choice_.clusters.begin(), choice_.clusters.end(),
            [](const auto& a, const auto& b) { return a.Key() < b.Key(); });
  std::sort(choice_.skipped.begin(), choice_.skipped.end());
  std::sort(choice_.not_found.begin(), choice_.not_found.end());
  choice_.not_found.erase(std::unique(choice_.not_found.begin(), choice_.not_found.end()),
                          choice_.not_found.end());
  return std::move(choice_);
}

ReplyCollector::ReplyCollector(std::string preview_id, const std::vector<PreviewCluster>& asked)
    : preview_id_(std::move(preview_id)) {
  for (const auto& c : asked) asked_.emplace(c.Key(), c);
}

ReplyCollector::Verdict ReplyCollector::Accept(const std::string& correlation_id,
                                               const std::string& body, std::string* error) {
  if (correlation_id != preview_id_) return Verdict::kOtherPreview;
  auto reply = DecodePreviewReply(body);
  if (!reply.ok()) {
    if (error != nullptr) *error = reply.status().message();
    return Verdict::kMalformed;
  }
  if (reply->preview_id != preview_id_) return Verdict::kOtherPreview;
  const std::string key = reply->cluster.Key();
  if (!asked_.contains(key)) {
    if (error != nullptr) *error = "a reply for " + key + ", which this preview did not ask";
    return Verdict::kUnknownCluster;
  }
  return replies_.emplace(key, std::move(*reply)).second ? Verdict::kAccepted : Verdict::kDuplicate;
}

std::vector<std::string> ReplyCollector::Unanswered() const {
  std::vector<std::string> out;
  for (const auto& [key, unused] : asked_) {
    if (!replies_.contains(key)) out.push_back(key);
  }
  return out;
}

const char* PreviewOutcomeName(PreviewOutcome outcome) {
  switch (outcome) {
    case PreviewOutcome::kChange: return "change";
    case PreviewOutcome::kUnchanged: return "unchanged";
    case PreviewOutcome::kRefuse: return "refuse";
    case PreviewOutcome::kError: return "error";
    case PreviewOutcome::kNoAnswer: return "no-answer";
    case PreviewOutcome::kSkipped: return "skipped";
    case PreviewOutcome::kNotFound: return "not-found";
  }
  return "unknown";
}

int PreviewReport::ExitCode(bool named_missing) const {
  auto count = [this](PreviewOutcome o) {
    auto it = counts.find(o);
    return it == counts.end() ? size_t{0} : it->second;
  };
  if (count(PreviewOutcome::kRefuse) > 0 || count(PreviewOutcome::kError) > 0 || named_missing)
    return 1;
  return count(PreviewOutcome::kNoAnswer) > 0 ? 3 : 0;
}

PreviewReport BuildPreviewReport(const Json& set, const ReplyCollector& replies,
                                 const ClusterPicker::Choice& choice,
                                 std::chrono::milliseconds elapsed) {
  PreviewReport r;
  r.set_kind = set.value("kind", "");
  r.set_name = set["metadata"].value("name", "");
  r.set_namespace = set["metadata"].value("namespace", "");
  r.asked = replies.asked();
  r.answered = replies.answered();
  r.elapsed = elapsed;
  std::map<std::pair<PreviewOutcome, std::string>, std::vector<std::string>> groups;
  for (const auto& [key, reply] : replies.replies()) {
    if (r.preview_id.empty()) r.preview_id = reply.preview_id;
    groups[ClassifyReply(reply)].push_back(key);
    r.replies.push_back(reply);
  }
  for (const std::string& key : replies.Unanswered())
    groups[{PreviewOutcome::kNoAnswer, ""}].push_back(key);
  for (const auto& [key, reason] : choice.skipped)
    groups[{PreviewOutcome::kSkipped, reason}].push_back(key);
  for (const std::string& key : choice.not_found)
    groups[{PreviewOutcome::kNotFound, ""}].push_back(key);
  for (auto& [what, clusters] : groups) {
    r.counts[what.first] += clusters.size();
    size_t writes = 0;
    if (what.first == PreviewOutcome::kChange) {
      for (const ObjectPreview& o : replies.replies().at(clusters.front()).objects)
        writes += o.outcome == ObjectOutcome::kCreated || o.outcome == ObjectOutcome::kChanged ||
                  o.outcome == ObjectOutcome::kDeleted;
    }
    r.groups.push_back({what.first, what.second, writes, std::move(clusters)});
  }
  std::stable_sort(r.groups.begin(), r.groups.end(), [](const auto& a, const auto& b) {
    if (a.outcome != b.outcome) return a.outcome < b.outcome;
    return a.clusters.size() > b.clusters.size();
  });
  return r;
}

Json PreviewReport::ToJson() const {
  Json j = {{"previewId", preview_id},
            {"set", {{"kind", set_kind}, {"name", set_name}}},
            {"clusters", asked},
            {"answered", answered},
            {"elapsedSeconds", std::chrono::duration<double>(elapsed).count()}};
  if (!set_namespace.empty()) j["set"]["namespace"] = set_namespace;
  Json summary = Json::object();
  for (PreviewOutcome o :
       {PreviewOutcome::kChange, PreviewOutcome::kUnchanged, PreviewOutcome::kRefuse,
        PreviewOutcome::kError, PreviewOutcome::kNoAnswer, PreviewOutcome::kSkipped,
        PreviewOutcome::kNotFound}) {
    auto it = counts.find(o);
    summary[PreviewOutcomeName(o)] = it == counts.end() ? 0 : it->second;
  }
  j["summary"] = std::move(summary);
  Json groups_json = Json::array();
  for (const auto& g : groups) {
    groups_json.push_back({{"outcome", PreviewOutcomeName(g.outcome)},
                           {"detail", g.detail},
                           {"clusters", g.clusters}});
  }
  j["groups"] = std::move(groups_json);
  Json replies_json = Json::array();
  for (const auto& reply : replies) replies_json.push_back(Json::parse(EncodePreviewReply(reply)));
  j["replies"] = std::move(replies_json);
  return j;
}

std::string FormatPreviewReport(const PreviewReport& r, OutputFormat format) {
  if (IsDocument(format)) return FormatDocument(r.ToJson(), format);
  auto count = [&r](PreviewOutcome o) {
    auto it = r.counts.find(o);
    return it == r.counts.end() ? size_t{0} : it->second;
  };
  std::string set = r.set_kind + " " +
                    (r.set_namespace.empty() ? r.set_name : r.set_namespace + "/" + r.set_name);
  std::string out = "preview of " + set + ": " + WithThousands(r.answered) + " of " +
                    Plural(r.asked, "cluster", "clusters") + " answered in " +
                    FormatAge(std::chrono::duration_cast<std::chrono::seconds>(r.elapsed)) + "\n";
  // The headline: what the change does where it goes through, then where it does not.
  std::vector<std::string> parts;
  for (const auto& g : r.groups) {
    if (g.outcome == PreviewOutcome::kChange)
      parts.push_back("would " + g.detail + (g.writes == 1 ? " object" : " objects") + " on " +
                      Plural(g.clusters.size(), "cluster", "clusters"));
  }
  if (parts.empty()) parts.emplace_back("would change nothing");
  parts.push_back("unchanged on " +
                  Plural(count(PreviewOutcome::kUnchanged), "cluster", "clusters"));
  for (auto [o, text] : {std::pair{PreviewOutcome::kRefuse, " refuse"},
                         std::pair{PreviewOutcome::kError, " could not be previewed"},
                         std::pair{PreviewOutcome::kNoAnswer, " did not answer"},
                         std::pair{PreviewOutcome::kSkipped, " skipped by Hive's rules"},
                         std::pair{PreviewOutcome::kNotFound, " not found"}}) {
    size_t n = count(o);
    if (n == 0) continue;
    parts.push_back(Plural(n, "cluster", "clusters") + text +
                    (n == 1 && o == PreviewOutcome::kRefuse ? "s" : ""));
  }
  for (size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? "" : "; ") + parts[i];
  out += "\n\n";
  std::vector<std::vector<std::string>> rows;
  if (format == OutputFormat::kWide) {
    rows.push_back({"CLUSTER", "OUTCOME", "DETAIL"});
    std::vector<std::vector<std::string>> body;
    for (const auto& g : r.groups) {
      for (const auto& c : g.clusters) body.push_back({c, PreviewOutcomeName(g.outcome), g.detail});
    }
    std::sort(body.begin(), body.end());
    rows.insert(rows.end(), body.begin(), body.end());
  } else {
    rows.push_back({"OUTCOME", "CLUSTERS", "DETAIL", "EXAMPLES"});
    for (const auto& g : r.groups) {
      std::string examples;
      for (size_t i = 0; i < g.clusters.size() && i < 3; ++i)
        examples += (i == 0 ? "" : ", ") + g.clusters[i];
      if (g.clusters.size() > 3) examples += " +" + WithThousands(g.clusters.size() - 3) + " more";
      rows.push_back({PreviewOutcomeName(g.outcome), WithThousands(g.clusters.size()),
                      g.detail.empty() ? "-" : g.detail, examples});
    }
  }
  return out + FormatTable(rows);
}

}  // namespace syncbus::ctl
