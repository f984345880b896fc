#include "consumer/status_builder.h"

#include <algorithm>

#include "common/time_format.h"

namespace syncbus::consumer {
namespace {

const hive::SyncStatus* Find(const std::vector<hive::SyncStatus>& list, const std::string& name) {
  for (const auto& e : list) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::string FailingMessage(const char* kind, const std::vector<std::string>& names) {
  std::string joined;
  for (const auto& n : names) joined += (joined.empty() ? "" : ", ") + n;
  return std::string(kind) + " " + joined + (names.size() == 1 ? " is failing" : " are failing");
}

}  // namespace

std::string TruncateMessage(const std::string& message, size_t max_bytes) {
  static const std::string kMark = "... (truncated)";
  if (message.size() <= max_bytes) return message;
  size_t cut = max_bytes > kMark.size() ? max_bytes - kMark.size() : 0;
  while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) --cut;  // UTF-8
  return message.substr(0, cut) + kMark;
}

hive::ClusterSyncStatus BuildStatus(const hive::ClusterSyncStatus& previous,
                                    const std::vector<SetOutcome>& sets, WallTime now) {
  std::string ts = FormatRfc3339(now);
  hive::ClusterSyncStatus out;
  out.controlled_by_replica = previous.controlled_by_replica;
  std::vector<std::string> failing_ss, failing_sss;
  for (const auto& set : sets) {
    const auto& prev_list = set.kind == SetKind::kSyncSet ? previous.sync_sets : previous.selector_sync_sets;
    auto& out_list = set.kind == SetKind::kSyncSet ? out.sync_sets : out.selector_sync_sets;
    const hive::SyncStatus* prev = Find(prev_list, set.name);
    hive::SyncStatus entry;
    if (set.removed && (!prev || !set.applied || set.success)) continue;   // gone for good
    if (set.removed && set.applied) {
      entry = *prev;
      entry.result = hive::SyncResult::kFailure;
      entry.failure_message = TruncateMessage(set.failure_message);
      entry.resources_to_delete = set.resources_to_delete;
      if (prev->result != entry.result) entry.last_transition_time = ts;
    } else if (!set.applied) {
      if (!prev) continue;   // never applied and not applied now: nothing to report yet
      entry = *prev;
    } else {
      entry.name = set.name;
      entry.observed_generation = set.generation;
      entry.result = set.success ? hive::SyncResult::kSuccess : hive::SyncResult::kFailure;
      entry.failure_message = set.success ? "" : TruncateMessage(set.failure_message);
      entry.resources_to_delete = set.resources_to_delete;
      bool changed = !prev || prev->result != entry.result;
      entry.last_transition_time = changed ? ts : prev->last_transition_time;
      entry.first_success_time = prev ? prev->first_success_time : "";
      if (set.success && entry.first_success_time.empty()) entry.first_success_time = ts;
    }
    if (entry.result == hive::SyncResult::kFailure) {
      (set.kind == SetKind::kSyncSet ? failing_ss : failing_sss).push_back(entry.name);
    }
    out_list.push_back(std::move(entry));
  }
  auto by_name = [](const hive::SyncStatus& a, const hive::SyncStatus& b) { return a.name < b.name; };
  std::sort(out.sync_sets.begin(), out.sync_sets.end(), by_name);
  std::sort(out.selector_sync_sets.begin(), out.selector_sync_sets.end(), by_name);

  hive::Condition failed;
  failed.type = "Failed";
  if (failing_ss.empty() && failing_sss.empty()) {
    failed.status = "False";
    failed.reason = "Success";
    failed.message = "All SyncSets and SelectorSyncSets have been applied to the cluster";
  } else {
    failed.status = "True";
    failed.reason = "Failure";
    std::string msg;
    if (!failing_ss.empty()) msg = FailingMessage("SyncSet", failing_ss);
    if (!failing_sss.empty()) msg += (msg.empty() ? "" : "; ") + FailingMessage("SelectorSyncSet", failing_sss);
    failed.message = TruncateMessage(msg);
  }
  const hive::Condition* prev_failed = nullptr;
  for (const auto& c : previous.conditions) {
    if (c.type == "Failed") prev_failed = &c;
    else out.conditions.push_back(c);   // keep conditions other writers own
  }
  bool changed = !prev_failed || prev_failed->status != failed.status;
  failed.last_transition_time = changed ? ts : prev_failed->last_transition_time;
  failed.last_probe_time = (prev_failed && !changed && prev_failed->message == failed.message &&
                            prev_failed->reason == failed.reason)
                               ? prev_failed->last_probe_time
                               : ts;
  out.conditions.insert(out.conditions.begin(), std::move(failed));

  out.first_success_time = previous.first_success_time;
  if (out.first_success_time.empty() && failing_ss.empty() && failing_sss.empty()) out.first_success_time = ts;
  return out;
}

}  // namespace syncbus::consumer
