#include "publisher/sync_report.h"

#include "common/hive/status_rules.h"

namespace syncbus::publisher {

FailureMessage::FailureMessage(std::string_view text)
    : text_(text.empty() ? nullptr : std::make_unique<const std::string>(text)) {}

FailureMessage& FailureMessage::operator=(const FailureMessage& other) {
  if (this != &other) *this = FailureMessage(other);
  return *this;
}

SyncReport SyncReport::Of(const hive::ClusterSync& cluster_sync) {
  const hive::ClusterSyncStatus& status = cluster_sync.status;
  SyncReport report;
  report.condition_current_ = hive::FailedConditionCurrent(status);
  report.first_success_pending_ = hive::FirstSuccessDue(status, /*installed=*/true);
  const size_t count = status.sync_sets.size() + status.selector_sync_sets.size();
  if (count == 0) return report;
  std::shared_ptr<ReportedSet[]> entries = std::make_shared<ReportedSet[]>(count);
  const std::span<ReportedSet> out(entries.get(), count);
  size_t i = 0;
  for (auto [kind, list] :
       {std::pair{hive::SetKind::kSyncSet, &status.sync_sets},
        std::pair{hive::SetKind::kSelectorSyncSet, &status.selector_sync_sets}}) {
    for (const auto& e : *list) {
      ReportedSet& set = out[i++];
      set.kind = kind;
      set.result = e.result;
      set.observed_generation = e.observed_generation;
      set.name = e.name;
      if (e.result != hive::SyncResult::kSuccess)
        set.failure_message = std::string_view(e.failure_message).substr(0, kFailureMessageKept);
    }
  }
  report.entries_ = std::move(entries);
  report.count_ = static_cast<uint32_t>(count);
  return report;
}

const ReportedSet* SyncReport::Find(hive::SetKind kind, const std::string& name) const {
  for (const auto& set : sets()) {
    if (set.kind == kind && set.name == name) return &set;
  }
  return nullptr;
}

}  // namespace syncbus::publisher
