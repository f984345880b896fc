// What `syncbusctl preview` computes: the set it reads (ReadPreviewSet), the clusters it asks
// (ClusterPicker, fed the hub's ClusterDeployments page by page), the replies it keeps
// (ReplyCollector) and the report it prints (BuildPreviewReport, FormatPreviewReport).
// Pure computation; value types; thread-compatible.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/bus/preview_message.h"
#include "common/hive/label_selector.h"
#include "common/json.h"
#include "common/status.h"
#include "ctl/output.h"

namespace syncbus::ctl {

// The set of a YAML file, as the preview request carries it: apiVersion, kind, metadata (name,
// namespace for a SyncSet, labels, annotations) and spec. Anything but one hive.openshift.io/v1
// SyncSet or SelectorSyncSet that Hive could read is an InvalidArgument saying what it is.
Result<Json> ReadPreviewSet(const std::string& yaml);

// --selector: "k=v,k2=v2" (every pair must match). Empty text: no narrowing.
Result<hive::LabelSelector> ParseSelectorFlag(const std::string& text);

// Chooses the clusters of a preview: those the set targets (a SyncSet's clusterDeploymentRefs
// in its namespace, a SelectorSyncSet's selector), narrowed by --selector and --clusters
// ("ns/name", or a name in any namespace). A cluster Hive skips (paused, not installed,
// unreachable, ...) is not asked, and said so.
class ClusterPicker {
 public:
  // `set` as ReadPreviewSet returns it.
  static Result<ClusterPicker> Create(const Json& set, hive::LabelSelector narrow,
                                      std::vector<std::string> named);

  // The namespace whose ClusterDeployments to list ("" = all).
  std::string ListNamespace() const { return list_ns_; }
  void Add(const Json& cluster_deployment);

  struct Choice {
    std::vector<PreviewCluster> clusters;                      // to ask, sorted
    std::vector<std::pair<std::string, std::string>> skipped;  // "ns/name", why
    std::vector<std::string> not_found;  // named (--clusters or refs) but not on the hub
    bool named_missing = false;          // some of not_found came from --clusters
  };
  Choice Finish() &&;

 private:
  ClusterPicker() = default;
  bool Named(const std::string& ns, const std::string& name) const;

  bool selector_set_ = false;
  std::string list_ns_;
  std::vector<std::string> refs_;  // a SyncSet's clusterDeploymentRefs
  hive::LabelSelector set_selector_, narrow_;
  std::vector<std::string> named_;
  std::vector<bool> named_seen_;
  std::vector<bool> refs_seen_;
  Choice choice_;
};

// Keeps one reply per asked cluster.
class ReplyCollector {
 public:
  enum class Verdict { kAccepted, kDuplicate, kOtherPreview, kUnknownCluster, kMalformed };

  ReplyCollector(std::string preview_id, const std::vector<PreviewCluster>& asked);
  // A delivered reply: its correlation_id and body. `error` gets why a malformed or unexpected
  // one was ignored.
  Verdict Accept(const std::string& correlation_id, const std::string& body, std::string* error);

  size_t asked() const { return asked_.size(); }
  size_t answered() const { return replies_.size(); }
  bool done() const { return answered() == asked(); }
  const std::map<std::string, PreviewReply>& replies() const { return replies_; }  // by key
  std::vector<std::string> Unanswered() const;                                     // sorted

 private:
  std::string preview_id_;
  std::map<std::string, PreviewCluster> asked_;  // by key
  std::map<std::string, PreviewReply> replies_;
};

// Clusters grouped by what the change would do there.
enum class PreviewOutcome { kChange, kUnchanged, kRefuse, kError, kNoAnswer, kSkipped, kNotFound };
const char* PreviewOutcomeName(PreviewOutcome outcome);  // "change", ..., "no-answer"

struct PreviewGroup {
  PreviewOutcome outcome = PreviewOutcome::kChange;
  // change: "create 2, change 3"; refuse: the first refused object and its message; error and
  // skipped: the reason.
  std::string detail;
  size_t writes = 0;                  // change: the objects it would create, change or delete
  std::vector<std::string> clusters;  // "ns/name", sorted
};

struct PreviewReport {
  std::string preview_id;
  std::string set_kind, set_name, set_namespace;
  size_t asked = 0, answered = 0;
  std::chrono::milliseconds elapsed{0};
  std::map<PreviewOutcome, size_t> counts;  // clusters per outcome
  std::vector<PreviewGroup> groups;         // by outcome, then most clusters first
  std::vector<PreviewReply> replies;        // every answer, by cluster

  // 0: everything answered, nothing refused; 1: some cluster refuses or fails, or a cluster
  // named with --clusters is not on the hub; 3: no refusal, but clusters did not answer in time.
  int ExitCode(bool named_missing) const;
  Json ToJson() const;
};

PreviewReport BuildPreviewReport(const Json& set, const ReplyCollector& replies,
                                 const ClusterPicker::Choice& choice,
                                 std::chrono::milliseconds elapsed);

// The headline and the groups (table), or one row per cluster (wide), or ToJson (json, yaml).
std::string FormatPreviewReport(const PreviewReport& report, OutputFormat format);

// 1180 -> "1,180".
std::string WithThousands(size_t n);

}  // namespace syncbus::ctl
