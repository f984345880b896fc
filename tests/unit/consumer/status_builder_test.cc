#include <doctest/doctest.h>

#include "common/fake_clock.h"
#include "common/time_format.h"
#include "consumer/status_builder.h"

using namespace syncbus;
using namespace syncbus::consumer;
using namespace std::chrono_literals;

namespace {
SetOutcome Applied(const std::string& name, int64_t gen, bool ok, SetKind kind = SetKind::kSyncSet) {
  return {kind, name, gen, true, ok, ok ? "" : "boom", {}};
}
SetOutcome Kept(const std::string& name, int64_t gen, SetKind kind = SetKind::kSyncSet) {
  return {kind, name, gen, false, false, "", {}};
}
}  // namespace

TEST_CASE("first success sets entries, firstSuccessTime and a Success condition") {
  FakeClock clock;
  auto st = BuildStatus({}, {Applied("a", 1, true), Applied("s", 2, true, SetKind::kSelectorSyncSet)}, clock.WallNow());
  REQUIRE(st.sync_sets.size() == 1);
  REQUIRE(st.selector_sync_sets.size() == 1);
  std::string now = FormatRfc3339(clock.WallNow());
  CHECK(st.sync_sets[0].first_success_time == now);
  CHECK(st.sync_sets[0].last_transition_time == now);
  CHECK(st.selector_sync_sets[0].observed_generation == 2);
  CHECK(st.first_success_time == now);
  REQUIRE(st.conditions.size() == 1);
  CHECK(st.conditions[0].type == "Failed");
  CHECK(st.conditions[0].status == "False");
  CHECK(st.conditions[0].reason == "Success");
}

TEST_CASE("lastTransitionTime moves only when the result changes") {
  FakeClock clock;
  auto first = BuildStatus({}, {Applied("a", 1, true)}, clock.WallNow());
  clock.Advance(1h);
  auto again = BuildStatus(first, {Applied("a", 2, true)}, clock.WallNow());
  CHECK(again.sync_sets[0].last_transition_time == first.sync_sets[0].last_transition_time);
  CHECK(again.sync_sets[0].observed_generation == 2);
  CHECK(again.conditions[0].last_transition_time == first.conditions[0].last_transition_time);
  clock.Advance(1h);
  auto failed = BuildStatus(again, {Applied("a", 3, false)}, clock.WallNow());
  CHECK(failed.sync_sets[0].last_transition_time == FormatRfc3339(clock.WallNow()));
  CHECK(failed.sync_sets[0].first_success_time == first.sync_sets[0].first_success_time);
  CHECK(failed.sync_sets[0].failure_message == "boom");
  CHECK(failed.conditions[0].status == "True");
  CHECK(failed.conditions[0].message == "SyncSet a is failing");
  CHECK(failed.first_success_time == first.first_success_time);
}

TEST_CASE("unapplied sets keep their entry, sets no longer applicable are dropped") {
  FakeClock clock;
  auto st = BuildStatus({}, {Applied("a", 1, true), Applied("b", 1, false), Applied("gone", 1, true)}, clock.WallNow());
  auto next = BuildStatus(st, {Kept("a", 1), Applied("b", 1, false), Kept("new", 1)}, clock.WallNow());
  REQUIRE(next.sync_sets.size() == 2);
  CHECK(next.sync_sets[0].name == "a");
  CHECK(next.sync_sets[1].name == "b");
  CHECK(next.conditions[0].message == "SyncSet b is failing");
  auto two = BuildStatus({}, {Applied("x", 1, false), Applied("y", 1, false),
                              Applied("z", 1, false, SetKind::kSelectorSyncSet)}, clock.WallNow());
  CHECK(two.conditions[0].message == "SyncSet x, y are failing; SelectorSyncSet z is failing");
}

TEST_CASE("rebuilding an unchanged status yields the identical object (nothing to write)") {
  FakeClock clock;
  auto st = BuildStatus({}, {Applied("a", 1, true)}, clock.WallNow());
  clock.Advance(10min);
  CHECK(BuildStatus(st, {Kept("a", 1)}, clock.WallNow()).ToJson() == st.ToJson());
  CHECK(BuildStatus(st, {Applied("a", 1, true)}, clock.WallNow()).ToJson() == st.ToJson());
}

TEST_CASE("failure messages are truncated on a UTF-8 boundary") {
  std::string long_msg(5000, 'x');
  CHECK(TruncateMessage(long_msg).size() <= kMaxFailureMessageBytes);
  CHECK(TruncateMessage(long_msg).find("(truncated)") != std::string::npos);
  std::string utf8;
  for (int i = 0; i < 600; ++i) utf8 += "\xC3\xA9";  // é
  std::string cut = TruncateMessage(utf8, 101);
  CHECK(cut.size() <= 101);
  size_t body = cut.find("...");
  CHECK(body % 2 == 0);   // never splits a two-byte character
  CHECK(TruncateMessage("short") == "short");
}
