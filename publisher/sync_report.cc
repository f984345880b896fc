#include "publisher/sync_report.h"

#include <array>

#include "common/hive/status_rules.h"

namespace syncbus::publisher {
namespace {

// A block of `count` entries, pointed at by its first: for the few a cluster usually has, a
// std::array behind make_shared's 16-byte control block (two entries: 128 bytes); for more, a
// make_shared array, whose control block takes 56.
template <size_t N>
std::shared_ptr<ReportedSet> FixedBlock() {
  auto block = std::make_shared<std::array<ReportedSet, N>>();
  return {block, block->data()};
}
std::shared_ptr<ReportedSet> Block(size_t count) {
  switch (count) {
    case 1: return FixedBlock<1>();
    case 2: return FixedBlock<2>();
    case 3: return FixedBlock<3>();
    case 4: return FixedBlock<4>();
    default: {
      std::shared_ptr<ReportedSet[]> block = std::make_shared<ReportedSet[]>(count);
      return {block, block.get()};
    }
  }
}

}  // namespace

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
  std::shared_ptr<ReportedSet> entries = Block(count);
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
