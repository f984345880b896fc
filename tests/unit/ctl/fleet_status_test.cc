#include "ctl/fleet_status.h"

#include <doctest/doctest.h>

#include "common/time_format.h"
#include "ctl/request_timeline.h"
#include "ctl/text_table.h"
#include "ctl/trace_reader.h"

using namespace syncbus;
using namespace syncbus::ctl;
using namespace std::chrono_literals;

namespace {

WallTime T(const char* text) {
  return *ParseRfc3339(text);
}

Json StatusCd(const std::string& name, bool installed = true) {
  return {
      {"metadata", {{"name", name}, {"namespace", "fleet"}, {"labels", {{"fleet", "a"}}}}},
      {"spec", {{"installed", installed}}},
      // Reachable, as Hive's unreachable controller marks a running cluster (no condition:
      // skipped).
      {"status", {{"conditions", Json::array({{{"type", "Unreachable"}, {"status", "False"}}})}}}};
}
Json StatusSss(const std::string& name, int gen) {
  return {{"metadata", {{"name", name}, {"generation", gen}}},
          {"spec", {{"clusterDeploymentSelector", {{"matchLabels", {{"fleet", "a"}}}}}}}};
}
Json StatusCs(const std::string& name, int gen, const char* result,
              const char* when = "2026-01-01T00:00:00Z") {
  return {{"metadata", {{"name", name}, {"namespace", "fleet"}}},
          {"status",
           {{"selectorSyncSets", Json::array({{{"name", "s"},
                                               {"observedGeneration", gen},
                                               {"result", result},
                                               {"failureMessage", "boom"},
                                               {"lastTransitionTime", when}}})}}}};
}

TraceEvent Event(TraceStep step, const std::string& cluster, const char* at,
                 const std::string& request = "fleet/x/rev/1") {
  TraceEvent e;
  e.step = step;
  e.cluster = cluster;
  e.request = request;
  e.at = T(at);
  e.lane = "change";
  e.actor = "syncbus-consumer/c-1";
  return e;
}

TraceEvent Settled(const std::string& cluster, const char* at, TraceOutcome outcome,
                   const std::string& tier = "") {
  TraceEvent e = Event(TraceStep::kSettled, cluster, at);
  e.outcome = outcome;
  e.tier = tier;
  e.error = outcome == TraceOutcome::kApplied ? "" : "failing sets: s";
  return e;
}

DeadLetter Letter(const std::string& cluster, const char* at) {
  DeadLetter d;
  d.cluster = cluster;
  d.reason = "max-attempts";
  d.last_error = "failing sets: s";
  d.attempts = 8;
  d.dead_at = T(at);
  d.message_id = "fleet/" + cluster + "/rev/3";
  return d;
}

}  // namespace

TEST_CASE("a request's position follows its newest trace event, and the dead-letter queue wins") {
  using W = RequestPosition::Where;
  CHECK(LocateRequest({}, {}).where == W::kUnknown);

  auto published = Event(TraceStep::kPublished, "fleet/a", "2026-01-01T00:00:01Z");
  published.lane = "resync";
  auto p = LocateRequest({published}, {});
  CHECK(p.where == W::kQueued);
  CHECK(p.queue == "syncbus.work.resync");
  CHECK(p.since == T("2026-01-01T00:00:01Z"));

  auto delivered = Event(TraceStep::kDelivered, "fleet/a", "2026-01-01T00:00:02Z");
  delivered.attempt = 1;
  p = LocateRequest({published, delivered}, {});
  CHECK(p.where == W::kInFlight);
  CHECK(p.consumer == "syncbus-consumer/c-1");
  CHECK(p.Describe(T("2026-01-01T00:00:12Z")).find("in flight on syncbus-consumer/c-1") !=
        std::string::npos);
  CHECK(p.Describe(T("2026-01-01T00:00:12Z")).find("attempt 2") != std::string::npos);

  auto retry = Settled("fleet/a", "2026-01-01T00:00:03Z", TraceOutcome::kRetry, "30s");
  retry.attempt = 1;
  p = LocateRequest({published, delivered, retry}, {});
  CHECK(p.where == W::kRetrying);
  CHECK(p.queue == "syncbus.retry.30s");
  CHECK(p.attempt == 2);

  auto deferred = Settled("fleet/a", "2026-01-01T00:00:03Z", TraceOutcome::kDeferred, "5s");
  CHECK(LocateRequest({delivered, deferred}, {}).where == W::kRetrying);

  auto acked = Settled("fleet/a", "2026-01-01T00:00:04Z", TraceOutcome::kApplied);
  p = LocateRequest({published, delivered, acked}, {});
  CHECK(p.where == W::kNone);
  CHECK(p.detail.find("applied") != std::string::npos);

  // The broker parked it on its delivery limit: no settled event, the DLQ says so.
  p = LocateRequest({published, delivered}, {Letter("fleet/a", "2026-01-01T00:00:05Z")});
  CHECK(p.where == W::kParked);
  CHECK(p.queue == "syncbus.dead");
  CHECK(p.detail.find("max-attempts") != std::string::npos);

  // Parked by a consumer, then purged: nowhere.
  auto parked = Settled("fleet/a", "2026-01-01T00:00:05Z", TraceOutcome::kParked);
  parked.dead_reason = "max-attempts";
  CHECK(LocateRequest({delivered, parked}, {}).where == W::kNone);
  // Replayed: queued again.
  auto replayed = Event(TraceStep::kReplayed, "fleet/a", "2026-01-01T00:00:06Z");
  CHECK(LocateRequest({delivered, parked, replayed}, {}).where == W::kQueued);
}

TEST_CASE("the timeline shows each step with its time, duration and detail") {
  auto published =
      Event(TraceStep::kPublished, "fleet/a", "2026-01-01T00:00:01.020Z", "fleet/a/0123/42");
  published.decided_at = T("2026-01-01T00:00:01Z");
  published.duration = 20ms;
  published.reason = "generation-changed";
  published.actor = "syncbus-publisher/p-1";
  auto delivered =
      Event(TraceStep::kDelivered, "fleet/a", "2026-01-01T00:00:01.500Z", "fleet/a/0123/42");
  delivered.queued = 500ms;
  auto settled = Settled("fleet/a", "2026-01-01T00:00:04Z", TraceOutcome::kRetry, "30s");
  settled.request = "fleet/a/0123/42";
  settled.duration = 2500ms;
  settled.prepare = 300ms;
  settled.target = 2000ms;
  settled.store = 100ms;
  settled.sets = {{"SyncSet", "a", 4, 10, true, ""},
                  {"SelectorSyncSet", "s", 2, 0, false, "503 unavailable"}};
  std::string table = FormatTimeline({published, delivered, settled});
  INFO(table);
  CHECK(table.find("TIME") == 0);
  CHECK(table.find("2026-01-01T00:00:01.000Z  #42      decided    -      reason=generation-changed "
                   "lane=change") != std::string::npos);
  CHECK(table.find("published  20ms   confirmed by the broker, on syncbus.work.change (by "
                   "syncbus-publisher/p-1)") != std::string::npos);
  CHECK(table.find("delivered  500ms  to syncbus-consumer/c-1, attempt 1") != std::string::npos);
  CHECK(table.find("2026-01-01T00:00:03.900Z  #42      applied    2.0s   2 sets, 10 objects: "
                   "SyncSet a gen 4 ok; "
                   "SelectorSyncSet s gen 2 FAILED (503 unavailable)") != std::string::npos);
  CHECK(table.find("status     100ms  ClusterSync status stored") != std::string::npos);
  CHECK(table.find("retry      2.5s   to syncbus.retry.30s (attempt 1 failed)") !=
        std::string::npos);

  // Many sets: successes counted, failures named.
  settled.sets.clear();
  for (int i = 0; i < 9; ++i)
    settled.sets.push_back({"SyncSet", "s" + std::to_string(i), 1, 1, true, ""});
  settled.sets.push_back({"SyncSet", "bad", 1, 0, false, "422"});
  table = FormatTimeline({settled});
  CHECK(table.find("10 sets, 9 objects: 9 ok; SyncSet bad gen 1 FAILED (422)") !=
        std::string::npos);

  Json j = TimelineJson({published}, LocateRequest({published}, {}), T("2026-01-01T00:00:02Z"));
  CHECK(j["events"].size() == 1);
  CHECK(j["events"][0]["step"] == "published");
  CHECK(j["position"]["where"] == "queued");
}

TEST_CASE(
    "fleet status puts each cluster in one state, first match wins, with the oldest of each") {
  auto hub = ComputeProgress(
      {StatusCd("synced-old"), StatusCd("synced-new"), StatusCd("failed"), StatusCd("behind"),
       StatusCd("queued"), StatusCd("running"), StatusCd("waiting"), StatusCd("parked"),
       StatusCd("paused", false)},
      {}, {StatusSss("s", 2)},
      {StatusCs("synced-old", 2, "Success", "2026-01-01T00:00:00Z"),
       StatusCs("synced-new", 2, "Success", "2026-01-01T01:00:00Z"),
       StatusCs("failed", 2, "Failure", "2026-01-01T00:30:00Z"), StatusCs("behind", 1, "Success"),
       StatusCs("queued", 1, "Success"), StatusCs("running", 2, "Success"),
       StatusCs("waiting", 2, "Failure"), StatusCs("parked", 2, "Failure")});
  std::vector<TraceEvent> trace = {
      Event(TraceStep::kPublished, "fleet/queued", "2026-01-01T02:00:00Z"),
      Event(TraceStep::kDelivered, "fleet/running", "2026-01-01T02:00:01Z"),
      Settled("fleet/waiting", "2026-01-01T02:00:02Z", TraceOutcome::kRetry, "2m"),
      Settled("fleet/synced-new", "2026-01-01T02:00:03Z", TraceOutcome::kApplied),
  };
  auto status = ComputeFleetStatus(hub, trace, {Letter("fleet/parked", "2026-01-01T01:50:00Z")});
  std::map<std::string, std::string> state;
  for (const auto& c : status.clusters) state[c.key] = FleetStateName(c.state);
  CHECK(state["fleet/synced-old"] == "synced");
  CHECK(state["fleet/synced-new"] == "synced");
  CHECK(state["fleet/failed"] == "failed");
  CHECK(state["fleet/behind"] == "pending");
  CHECK(state["fleet/queued"] == "pending");
  CHECK(state["fleet/running"] == "in-flight");
  CHECK(state["fleet/waiting"] == "retrying");
  CHECK(state["fleet/parked"] == "parked");
  CHECK(state["fleet/paused"] == "skipped");

  CHECK(status.states[FleetState::kSynced].count == 2);
  CHECK(status.states[FleetState::kSynced].oldest ==
        "fleet/synced-old");  // least recently confirmed
  CHECK(status.states[FleetState::kPending].count == 2);
  CHECK(status.states[FleetState::kPending].oldest == "fleet/queued");  // "behind" has no time
  CHECK(status.states[FleetState::kRetrying].breakdown == std::map<std::string, size_t>{{"2m", 1}});
  CHECK(status.states[FleetState::kSkipped].breakdown ==
        std::map<std::string, size_t>{{"not-installed", 1}});
  CHECK(status.states[FleetState::kParked].breakdown ==
        std::map<std::string, size_t>{{"max-attempts", 1}});
  CHECK(status.states[FleetState::kFailed].oldest_since == T("2026-01-01T00:30:00Z"));

  status.queues = {{"syncbus.work.change", 1}, {"syncbus.dead", 1}};
  const WallTime now = T("2026-01-01T02:01:00Z");
  std::string table = FormatFleetStatus(status, now);
  INFO(table);
  CHECK(table.find("STATE      CLUSTERS  OLDEST            FOR   DETAIL\n") == 0);
  CHECK(table.find("in-flight  1         fleet/running     59s   on syncbus-consumer/c-1\n") !=
        std::string::npos);
  CHECK(table.find("synced     2         fleet/synced-old  121m\n") != std::string::npos);
  CHECK(table.find("skipped    1         fleet/paused      -     not-installed=1\n") !=
        std::string::npos);
  CHECK(table.find("retrying   1         fleet/waiting     58s   2m=1\n") != std::string::npos);
  CHECK(table.find("queues: syncbus.dead=1 syncbus.work.change=1") != std::string::npos);

  Json j = status.ToJson(now, true);
  CHECK(j["states"]["in-flight"]["count"] == 1);
  CHECK(j["states"]["in-flight"]["oldest"]["cluster"] == "fleet/running");
  CHECK(j["states"]["in-flight"]["oldest"]["seconds"] == 59);
  CHECK(j["clusters"].size() == 9);
  CHECK_FALSE(status.ToJson(now, false).contains("clusters"));
}

TEST_CASE("a request the trace leaves queued on a queue empty since is judged by the hub") {
  // The consumer's events for both were lost (its trace connection dropped with the batch).
  auto hub = ComputeProgress(
      {StatusCd("synced"), StatusCd("behind")}, {}, {StatusSss("s", 2)},
      {StatusCs("synced", 2, "Success", "2026-01-01T01:00:00Z"), StatusCs("behind", 1, "Success")});
  std::vector<TraceEvent> trace = {
      Event(TraceStep::kPublished, "fleet/synced", "2026-01-01T00:59:00Z"),
      Event(TraceStep::kPublished, "fleet/behind", "2026-01-01T00:59:00Z"),
  };
  auto states = [&](std::map<std::string, uint32_t> queues) {
    std::map<std::string, std::string> out;
    for (const auto& c : ComputeFleetStatus(hub, trace, {}, queues).clusters)
      out[c.key] = FleetStateName(c.state) + (": " + c.detail);
    return out;
  };
  auto waiting = states({{"syncbus.work.change", 3}});
  CHECK(waiting["fleet/synced"] == "pending: queued on syncbus.work.change");
  CHECK(waiting["fleet/behind"] == "pending: queued on syncbus.work.change");
  auto empty = states({{"syncbus.work.change", 0}});
  CHECK(empty["fleet/synced"] == "synced: ");
  CHECK(empty["fleet/behind"].find("pending: behind, no request in the trace window") == 0);
  CHECK(states({})["fleet/synced"] == "pending: queued on syncbus.work.change");  // depth unknown
}

TEST_CASE("one cluster's report lists its sets against their generations and its lease") {
  std::string skip;
  Json cs = StatusCs("a", 1, "Failure", "2026-01-01T00:10:00Z");
  auto sets = DescribeSets(StatusCd("a"), {}, {StatusSss("s", 2)}, &cs, &skip);
  REQUIRE(sets.size() == 1);
  CHECK(skip.empty());
  CHECK(sets[0].generation == 2);
  CHECK(sets[0].observed == 1);
  CHECK(sets[0].result == "Failure");

  ClusterReport report;
  report.key = "fleet/a";
  report.state = FleetState::kRetrying;
  report.sets = sets;
  report.lease_holder = "consumer-1";
  report.lease_renewed = "2026-01-01T00:10:00Z";
  report.lease_seconds = 30;
  report.position.where = RequestPosition::Where::kRetrying;
  report.position.queue = "syncbus.retry.30s";
  report.position.since = T("2026-01-01T00:09:00Z");
  std::string text = FormatClusterReport(report, T("2026-01-01T00:10:05Z"));
  INFO(text);
  CHECK(text.find("state:    retrying") != std::string::npos);
  CHECK(text.find("request:  waiting in syncbus.retry.30s since 2026-01-01T00:09:00Z (65s ago)") !=
        std::string::npos);
  CHECK(text.find("lease:    held by consumer-1, renewed 5s ago (duration 30s)") !=
        std::string::npos);
  CHECK(text.find("SelectorSyncSet  s     2           1         Failure") != std::string::npos);
  Json j = report.ToJson(T("2026-01-01T00:10:05Z"));
  CHECK(j["lease"]["holder"] == "consumer-1");
  CHECK(j["sets"][0]["observedGeneration"] == 1);
  CHECK(j["request"]["where"] == "retrying");

  report.lease_released_by_status = true;
  text = FormatClusterReport(report, T("2026-01-01T00:10:05Z"));
  CHECK(text.find(
            "lease:    not held (consumer-1 gave it back with its status write 5s ago or later)") !=
        std::string::npos);
  CHECK(report.ToJson(T("2026-01-01T00:10:05Z"))["lease"]["releasedByStatus"] == true);

  skip.clear();
  DescribeSets(StatusCd("b", false), {}, {StatusSss("s", 2)}, nullptr, &skip);
  CHECK(skip == "not-installed");
}

TEST_CASE("a trace filter takes ns/name exactly or a bare name in any namespace") {
  CHECK(TraceClusterMatches("", "a/b"));
  CHECK(TraceClusterMatches("a/b", "a/b"));
  CHECK(TraceClusterMatches("b", "a/b"));
  CHECK_FALSE(TraceClusterMatches("a/c", "a/b"));
  CHECK_FALSE(TraceClusterMatches("a", "a/b"));
  CHECK_FALSE(TraceClusterMatches("x/b", "a/b"));
}

TEST_CASE("ages read like kubectl's") {
  using std::chrono::seconds;
  CHECK(FormatAge(seconds(-3)) == "0s");
  CHECK(FormatAge(seconds(65)) == "65s");
  CHECK(FormatAge(seconds(200)) == "3m20s");
  CHECK(FormatAge(seconds(240)) == "4m");
  CHECK(FormatAge(seconds(47 * 60)) == "47m");
  CHECK(FormatAge(seconds(125 * 60)) == "125m");
  CHECK(FormatAge(seconds(3 * 3600 + 5 * 60)) == "3h5m");
  CHECK(FormatAge(seconds(30 * 3600)) == "30h");
  CHECK(FormatAge(seconds(3 * 86400 + 4 * 3600)) == "3d4h");
  CHECK(FormatAge(seconds(20 * 86400)) == "20d");
}
