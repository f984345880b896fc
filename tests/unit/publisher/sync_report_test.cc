#include "publisher/sync_report.h"

#include <optional>

#include <doctest/doctest.h>

#include "common/hive/status_rules.h"
#include "tests/support/hive_objects.h"

using namespace syncbus;
using namespace syncbus::hive;
using namespace syncbus::publisher;

TEST_CASE("sync report: the entries of both lists, a failure's message cut, the rest dropped") {
  ClusterSync cs;
  cs.meta.name = "c1";
  cs.status.sync_sets = {testing::SyncStatusEntry("a", 3, SyncResult::kFailure),
                         testing::SyncStatusEntry("b", 1)};
  cs.status.sync_sets[0].failure_message = std::string(300, 'x');
  cs.status.sync_sets[1].failure_message = "an old failure";
  cs.status.selector_sync_sets = {testing::SyncStatusEntry("a", 2)};
  cs.status.conditions = {ExpectedFailedCondition(cs.status)};
  SyncReport report = SyncReport::Of(cs);
  REQUIRE(report.sets().size() == 3);
  const ReportedSet* failing = report.Find(SetKind::kSyncSet, "a");
  REQUIRE(failing != nullptr);
  CHECK(failing->observed_generation == 3);
  CHECK(failing->result == SyncResult::kFailure);
  CHECK(failing->failure_message == std::string(SyncReport::kFailureMessageKept, 'x'));
  CHECK(report.Find(SetKind::kSyncSet, "b")->failure_message.empty());
  const ReportedSet* selector = report.Find(SetKind::kSelectorSyncSet, "a");
  REQUIRE(selector != nullptr);
  CHECK(selector->observed_generation == 2);
  CHECK(report.Find(SetKind::kSelectorSyncSet, "b") == nullptr);
  CHECK(report.condition_current());
  CHECK_FALSE(report.first_success_pending());  // entries without a firstSuccessTime
}

TEST_CASE("sync report: the condition and firstSuccessTime as Hive derives them") {
  ClusterSync cs;
  CHECK_FALSE(SyncReport::Of(cs).condition_current());  // no condition
  CHECK(SyncReport::Of(cs).first_success_pending());    // no entry: due once installed
  cs.status.sync_sets = {testing::SyncStatusEntry("a", 1)};
  cs.status.conditions = {ExpectedFailedCondition(cs.status)};
  CHECK(SyncReport::Of(cs).condition_current());
  cs.status.conditions[0].message = "SyncSet a is failing";
  CHECK_FALSE(SyncReport::Of(cs).condition_current());
  cs.status.sync_sets[0].first_success_time = "2020-01-01T00:00:00Z";
  CHECK(SyncReport::Of(cs).first_success_pending());
  cs.status.first_success_time = "2020-01-01T00:00:00Z";
  CHECK_FALSE(SyncReport::Of(cs).first_success_pending());
}

TEST_CASE("sync report: a failure's message is held out of line, and only when there is one") {
  // A successful entry pays a pointer for the message it does not have.
  CHECK(sizeof(FailureMessage) == sizeof(void*));
  CHECK(FailureMessage().empty());
  CHECK(FailureMessage("").empty());
  CHECK(FailureMessage(std::string_view()).empty());
  CHECK(FailureMessage() == "");

  FailureMessage message("apply failed");
  CHECK_FALSE(message.empty());
  CHECK(message == "apply failed");
  FailureMessage copy = message;  // a value: the copy has its own text
  message = "another failure";
  CHECK(copy == "apply failed");
  CHECK(message.view() == "another failure");
  copy = copy;  // NOLINT(clang-diagnostic-self-assign-overloaded): copying onto itself keeps it
  CHECK(copy == "apply failed");
  FailureMessage moved = std::move(copy);
  CHECK(moved == "apply failed");
  message = FailureMessage();
  CHECK(message.empty());
}

TEST_CASE("sync report: copies share one block of entries, which outlives the original") {
  ClusterSync cs;
  cs.status.sync_sets = {testing::SyncStatusEntry("a", 3, SyncResult::kFailure),
                         testing::SyncStatusEntry("b", 1)};
  cs.status.sync_sets[0].failure_message = "boom";
  std::optional<SyncReport> report = SyncReport::Of(cs);
  const SyncReport copy = *report;
  CHECK(copy.sets().data() == report->sets().data());
  report.reset();
  REQUIRE(copy.sets().size() == 2);
  CHECK(copy.sets()[0].failure_message == "boom");
  CHECK(copy.Find(SetKind::kSyncSet, "b")->observed_generation == 1);
  // No entries: no block.
  CHECK(SyncReport::Of(ClusterSync{}).sets().data() == nullptr);
  // Three words: the block's pointer and count, and the two flags.
  CHECK(sizeof(SyncReport) <= 3 * sizeof(void*));
}

TEST_CASE("sync report: every number of entries is read back whole, in order") {
  for (int count = 1; count <= 6; ++count) {
    ClusterSync cs;
    for (int i = 0; i < count; ++i) {
      // Names past the small-string buffer, so that a block too small would be overwritten.
      auto& list = i % 2 == 0 ? cs.status.sync_sets : cs.status.selector_sync_sets;
      list.push_back(
          testing::SyncStatusEntry("a-set-with-a-long-name-" + std::to_string(i), i,
                                   i == 0 ? SyncResult::kFailure : SyncResult::kSuccess));
    }
    cs.status.sync_sets.front().failure_message = "first";
    const std::vector<ReportedSet> expected = [&] {
      std::vector<ReportedSet> out;
      for (const auto& e : cs.status.sync_sets)
        out.push_back({SetKind::kSyncSet, e.result, e.observed_generation, e.name, {}});
      for (const auto& e : cs.status.selector_sync_sets)
        out.push_back({SetKind::kSelectorSyncSet, e.result, e.observed_generation, e.name, {}});
      return out;
    }();
    const SyncReport report = SyncReport::Of(cs);
    CAPTURE(count);
    REQUIRE(report.sets().size() == expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      CHECK(report.sets()[i].kind == expected[i].kind);
      CHECK(report.sets()[i].name == expected[i].name);
      CHECK(report.sets()[i].observed_generation == expected[i].observed_generation);
      CHECK(report.sets()[i].result == expected[i].result);
    }
    CHECK(report.sets()[0].failure_message == "first");
  }
}
