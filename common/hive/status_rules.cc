#include "common/hive/status_rules.h"

namespace syncbus::hive {
namespace {

std::string NamesFor(std::string kind, const std::vector<std::string>& names) {
  if (names.size() > 1) kind += "s";
  std::string joined;
  for (const auto& n : names) joined += (joined.empty() ? "" : ", ") + n;
  return kind + " " + joined;
}

std::vector<std::string> Failing(const std::vector<SyncStatus>& entries) {
  std::vector<std::string> out;
  for (const auto& e : entries) {
    if (e.result != SyncResult::kSuccess) out.push_back(e.name);
  }
  return out;
}

}  // namespace

std::string TruncateMessage(const std::string& message, size_t max_bytes) {
  static const std::string kMark = "... (truncated)";
  if (message.size() <= max_bytes) return message;
  size_t cut = max_bytes > kMark.size() ? max_bytes - kMark.size() : 0;
  while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) --cut;  // UTF-8
  return message.substr(0, cut) + kMark;
}

std::string FailedConditionMessage(const std::vector<std::string>& failing_sync_sets,
                                   const std::vector<std::string>& failing_selector_sync_sets) {
  if (failing_sync_sets.empty() && failing_selector_sync_sets.empty()) {
    return "All SyncSets and SelectorSyncSets have been applied to the cluster";
  }
  std::vector<std::string> parts;
  if (!failing_sync_sets.empty()) parts.push_back(NamesFor("SyncSet", failing_sync_sets));
  if (!failing_selector_sync_sets.empty())
    parts.push_back(NamesFor("SelectorSyncSet", failing_selector_sync_sets));
  std::string message = parts.size() == 2 ? parts[0] + " and " + parts[1] : parts[0];
  message += failing_sync_sets.size() + failing_selector_sync_sets.size() > 1 ? " are failing"
                                                                              : " is failing";
  return TruncateMessage(message);
}

Condition ExpectedFailedCondition(const ClusterSyncStatus& status) {
  std::vector<std::string> ss = Failing(status.sync_sets), sss = Failing(status.selector_sync_sets);
  bool failing = !ss.empty() || !sss.empty();
  Condition c;
  c.type = "Failed";
  c.status = failing ? "True" : "False";
  c.reason = failing ? "Failure" : "Success";
  c.message = FailedConditionMessage(ss, sss);
  return c;
}

bool FailedConditionCurrent(const ClusterSyncStatus& status) {
  if (status.conditions.empty()) return false;
  const Condition& first = status.conditions.front();
  Condition want = ExpectedFailedCondition(status);
  // Hive compares these three (not even the type).
  return first.status == want.status && first.reason == want.reason &&
         first.message == want.message;
}

bool FirstSuccessDue(const ClusterSyncStatus& status, bool installed) {
  if (!status.first_success_time.empty() || !installed) return false;
  for (const auto* list : {&status.sync_sets, &status.selector_sync_sets}) {
    for (const auto& e : *list) {
      if (e.first_success_time.empty()) return false;
    }
  }
  return true;
}

}  // namespace syncbus::hive
