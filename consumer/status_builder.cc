#include "consumer/status_builder.h"

#include <algorithm>
#include <tuple>

#include "common/time_format.h"

namespace syncbus::consumer {
namespace {

const hive::SyncStatus* Find(const std::vector<hive::SyncStatus>& list, const std::string& name) {
  for (const auto& e : list) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

bool SameRefs(const std::vector<hive::SyncResourceReference>& a,
              const std::vector<hive::SyncResourceReference>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.api_version == y.api_version && x.kind == y.kind && x.ns == y.ns && x.name == y.name;
  });
}

// reflect.DeepEqual of two SyncStatus values.
bool SameEntry(const hive::SyncStatus& a, const hive::SyncStatus& b) {
  return a.name == b.name && a.observed_generation == b.observed_generation &&
         a.result == b.result && a.failure_message == b.failure_message &&
         a.last_transition_time == b.last_transition_time &&
         a.first_success_time == b.first_success_time &&
         SameRefs(a.resources_to_delete, b.resources_to_delete);
}

// Hive's orderResources.
void SortRefs(std::vector<hive::SyncResourceReference>& refs) {
  std::stable_sort(refs.begin(), refs.end(), [](const auto& a, const auto& b) {
    return std::tie(a.api_version, a.kind, a.ns, a.name) <
           std::tie(b.api_version, b.kind, b.ns, b.name);
  });
}

}  // namespace

BuiltStatus BuildStatus(const hive::ClusterSyncStatus& previous,
                        const std::vector<SetOutcome>& outcomes, WallTime now,
                        const std::string& installed_timestamp) {
  const std::string ts = FormatRfc3339(now);
  BuiltStatus built;
  hive::ClusterSyncStatus& out = built.status;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const SetOutcome& set = outcomes[i];
    const auto& prev_list =
        set.kind == SetKind::kSyncSet ? previous.sync_sets : previous.selector_sync_sets;
    auto& out_list = set.kind == SetKind::kSyncSet ? out.sync_sets : out.selector_sync_sets;
    const hive::SyncStatus* prev = Find(prev_list, set.name);
    if (set.removed) {
      if (!prev || !set.applied || set.success) continue;  // gone for good
      hive::SyncStatus entry;
      entry.name = set.name;
      entry.resources_to_delete = set.resources_to_delete;
      entry.result = hive::SyncResult::kFailure;
      entry.failure_message = TruncateMessage(set.failure_message);
      entry.last_transition_time = prev->last_transition_time;
      entry.first_success_time = prev->first_success_time;
      if (!SameEntry(entry, *prev)) entry.last_transition_time = ts;
      out_list.push_back(std::move(entry));
      continue;
    }
    if (!set.applied) {
      if (prev) out_list.push_back(*prev);
      continue;
    }
    hive::SyncStatus old = prev ? *prev : hive::SyncStatus{};
    if (!set.sync_mode)
      old.resources_to_delete.clear();  // Upsert: tracking dropped, nothing deleted
    hive::SyncStatus entry;
    entry.name = set.name;
    entry.observed_generation = set.generation;
    entry.result = set.success ? hive::SyncResult::kSuccess : hive::SyncResult::kFailure;
    entry.failure_message = set.success ? "" : TruncateMessage(set.failure_message);
    if (set.sync_mode) entry.resources_to_delete = set.resources_to_delete;
    if (prev) {
      entry.last_transition_time = old.last_transition_time;
      entry.first_success_time = old.first_success_time;
    }
    if (!SameEntry(entry, old)) entry.last_transition_time = ts;
    if (set.success && old.first_success_time.empty()) {
      entry.first_success_time = ts;
      built.first_successes.push_back(i);
    }
    SortRefs(entry.resources_to_delete);
    out_list.push_back(std::move(entry));
  }

  hive::Condition failed = hive::ExpectedFailedCondition(out);
  const hive::Condition* first =
      previous.conditions.empty() ? nullptr : &previous.conditions.front();
  if (first != nullptr && first->status == failed.status && first->reason == failed.reason &&
      first->message == failed.message) {  // Hive compares these three only
    out.conditions = previous.conditions;  // unchanged: left exactly as it was
  } else {
    failed.last_transition_time = ts;
    failed.last_probe_time = ts;
    out.conditions = {std::move(failed)};  // Hive writes its one condition alone
  }

  out.first_success_time = previous.first_success_time;
  if (hive::FirstSuccessDue(out, !installed_timestamp.empty())) {
    // The latest of the sets' first successes; now when the cluster has no set.
    std::optional<WallTime> latest;
    for (const auto* list : {&out.sync_sets, &out.selector_sync_sets}) {
      for (const auto& e : *list) {
        auto t = ParseRfc3339(e.first_success_time);
        if (t.ok() && (!latest || *t > *latest)) latest = *t;
      }
    }
    built.cluster_first_success = latest.value_or(now);
    out.first_success_time = FormatRfc3339(*built.cluster_first_success);
  }
  return built;
}

}  // namespace syncbus::consumer
