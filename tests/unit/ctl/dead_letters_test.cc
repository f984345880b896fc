#include "ctl/dead_letters.h"

#include <algorithm>
#include <sstream>

#include <doctest/doctest.h>

#include "common/amqp/field_table.h"
#include "common/bus/retry_policy.h"
#include "common/bus/sync_message.h"
#include "common/bus/topology.h"
#include "common/time_format.h"
#include "ctl/commands.h"
#include "ctl/dead_letter_index.h"
#include "tests/fakes/common/amqp/fake_session.h"
#include "tests/fakes/common/fake_clock.h"

using namespace syncbus;
using namespace syncbus::ctl;
using namespace std::chrono_literals;

namespace {

SyncRequest Request(const std::string& ns, const std::string& name, amqp::Lane lane) {
  SyncRequest r;
  r.cluster_namespace = ns;
  r.cluster_name = name;
  r.lane = lane;
  r.reason = "syncset-changed";
  r.enqueued_at = "2026-01-01T00:00:00.000Z";
  return r;
}

struct Dlq {
  FakeClock clock;
  amqp::FakeBroker broker{clock};
  amqp::FakeSession session{broker, "ctl"};

  Dlq() {
    REQUIRE(session.Connect().ok());
    amqp::TopologyOptions t;
    t.retry_tiers = {1s};
    REQUIRE(session.Declare(amqp::SyncbusTopology(t)).ok());
  }
  // Parks a request as the consumer would after its last attempt.
  void Park(const std::string& ns, const std::string& name, amqp::Lane lane,
            const std::string& reason, int attempts, const std::string& message_id = "") {
    amqp::Delivery d;
    d.routing_key = amqp::LaneName(lane);
    d.message = ToAmqpMessage(Request(ns, name, lane), "syncbus-publisher",
                              message_id.empty() ? name : message_id, clock.WallNow());
    d.message.headers[kAttemptHeader] = attempts;
    amqp::Publication p = ParkedCopy(d, reason, "503 Service Unavailable", clock.WallNow());
    p.message.headers[kAttemptHeader] = attempts;
    REQUIRE(session.Publish(p, 1s).ok());
  }
  // Parks a message that is no sync request, as the consumer parks one it cannot decode.
  void ParkForeign(const std::string& body) {
    amqp::Delivery d;
    d.routing_key = "change";
    d.message.body = body;
    d.message.message_id = "foreign";
    REQUIRE(session.Publish(ParkedCopy(d, "undecodable", "not JSON", clock.WallNow()), 1s).ok());
  }
  size_t Dead() { return broker.ReadyMessages(amqp::kDeadQueue).size(); }
  // What the dry run of a replay of everything says on stderr.
  std::string DryReplay() {
    DlqOptions dry;
    dry.action = DlqAction::kReplay;
    dry.dry_run = true;
    std::ostringstream out, err;
    std::istringstream in;
    REQUIRE(RunDlq(dry, session, clock, in, out, err) == 0);
    return err.str();
  }
  // A replay pass; the pauses of its rate limit go to `slept`.
  Result<DlqResult> Replay(DlqScanOptions options, std::vector<std::chrono::milliseconds>& slept) {
    options.action = DlqAction::kReplay;
    options.sleep = [&slept](std::chrono::milliseconds d) { slept.push_back(d); };
    return ScanDeadLetters(session, options, clock);
  }
  std::vector<std::string> Listed() {
    auto listed = ListDeadLetters(session, {}, 0, clock);
    REQUIRE_MESSAGE(listed.ok(), listed.status().ToString());
    std::vector<std::string> clusters;
    for (const auto& d : listed->matched) clusters.push_back(d.cluster);
    return clusters;
  }
  std::vector<amqp::Message> Work(amqp::Lane lane) {
    return broker.ReadyMessages(amqp::WorkQueueName(lane));
  }
};

}  // namespace

TEST_CASE("a parked request is described from its headers") {
  Dlq q;
  q.Park("ns1", "c1", amqp::Lane::kResync, "max-attempts", 5);
  auto got = q.session.Get(amqp::kDeadQueue);
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  q.clock.Advance(90s);
  DeadLetter d = DescribeDeadLetter(**got);
  CHECK(d.cluster == "ns1/c1");
  CHECK(d.lane == "resync");
  CHECK(d.reason == "max-attempts");
  CHECK(d.attempts == 5);
  CHECK(d.last_error == "503 Service Unavailable");
  CHECK(d.first_failure == "2026-01-01T00:00:00Z");
  Json j = d.ToJson(q.clock.WallNow());
  CHECK(j["ageSeconds"] == 90);
  std::string table = FormatDeadLetterTable({d}, q.clock.WallNow());
  CHECK(table.find("CLUSTER") == 0);
  CHECK(table.find("ns1/c1") != std::string::npos);
  CHECK(table.find("90s") != std::string::npos);
}

TEST_CASE("a poison message parked by the broker is described from x-death") {
  amqp::Delivery d;
  d.message = ToAmqpMessage(Request("ns1", "c9", amqp::Lane::kChange), "p", "m", WallTime{});
  d.message.headers["x-death"] = Json::array({Json{{"reason", "delivery_limit"},
                                                   {"queue", "syncbus.work.change"},
                                                   {"count", 1},
                                                   {"time", amqp::TimestampValue(1767225600)}}});
  DeadLetter letter = DescribeDeadLetter(d);
  CHECK(letter.reason == "delivery_limit");
  CHECK(letter.by_broker);
  CHECK(letter.cluster == "ns1/c9");
  REQUIRE(letter.dead_at.has_value());
  CHECK(FormatRfc3339(*letter.dead_at) == "2026-01-01T00:00:00Z");
}

TEST_CASE(
    "a poison's listing counts its returns from consumers' queues, carried or in x-death, and a "
    "replay forgets them") {
  amqp::Delivery d;
  d.message = ToAmqpMessage(Request("ns1", "c9", amqp::Lane::kChange), "p", "m", WallTime{});
  SUBCASE("parked by a consumer") {
    d.message.headers[kDeadReasonHeader] = "delivery_limit";
    d.message.headers[kUnsettledHeader] = 6;
    d.message.headers[kReturnedHeader] = 1;
    Json j = DescribeDeadLetter(d).ToJson(WallTime{});
    CHECK(j["parkedBy"] == "syncbus");
    CHECK(j["unsettled"] == 6);
    CHECK(j["returnsFromConsumers"] == 1);
    CHECK_FALSE(ReplayPublication(d).message.headers.contains(kReturnedHeader));
  }
  SUBCASE("parked by the broker, straight from a return") {
    d.message.headers["x-death"] = Json::array(
        {Json{{"reason", "delivery_limit"}, {"queue", "syncbus.work.change"}, {"count", 1}},
         Json{{"reason", "delivery_limit"},
              {"queue", "syncbus.consumer.consumer-a.change"},
              {"count", 1}},
         Json{{"reason", "expired"},
              {"queue", "syncbus.consumer.consumer-b.resync"},
              {"count", 2}}});
    CHECK(DescribeDeadLetter(d).ToJson(WallTime{})["returnsFromConsumers"] == 1);
  }
  SUBCASE("nothing returned") {
    CHECK(DescribeDeadLetter(d).ToJson(WallTime{})["returnsFromConsumers"] == 0);
  }
}

TEST_CASE("filters by cluster, reason and age") {
  DeadLetter d;
  d.cluster = "ns1/c1";
  d.reason = "max-attempts";
  WallTime now = WallTime(std::chrono::hours(1000));
  d.dead_at = now - 10min;
  CHECK(DeadLetterFilter{}.Matches(d, now));
  CHECK(DeadLetterFilter{"ns1/c1", "", {}, {}}.Matches(d, now));
  CHECK(DeadLetterFilter{"c1", "", {}, {}}.Matches(d, now));
  CHECK_FALSE(DeadLetterFilter{"ns2/c1", "", {}, {}}.Matches(d, now));
  CHECK_FALSE(DeadLetterFilter{"c", "", {}, {}}.Matches(d, now));
  CHECK_FALSE(DeadLetterFilter{"", "undecodable", {}, {}}.Matches(d, now));
  CHECK(DeadLetterFilter{"", "", 5min, {}}.Matches(d, now));
  CHECK_FALSE(DeadLetterFilter{"", "", 15min, {}}.Matches(d, now));
  CHECK(DeadLetterFilter{"", "", {}, 15min}.Matches(d, now));
  CHECK_FALSE(DeadLetterFilter{"", "", {}, 5min}.Matches(d, now));
}

TEST_CASE("a replayed message goes to its lane with its attempt history reset") {
  amqp::Delivery d;
  d.message = ToAmqpMessage(Request("ns1", "c1", amqp::Lane::kResync), "p", "m", WallTime{});
  d.message.headers[kAttemptHeader] = 5;
  d.message.headers[kDeadReasonHeader] = "max-attempts";
  d.message.headers[kFirstFailureHeader] = "2026-01-01T00:00:00Z";
  d.message.headers[kLastErrorHeader] = "boom";
  d.message.headers[kDeadAtHeader] = "2026-01-01T00:00:00Z";
  d.message.headers["x-death"] = Json::array();
  amqp::Publication p = ReplayPublication(d);
  CHECK(p.exchange == amqp::kWorkExchange);
  CHECK(p.routing_key == "resync");
  CHECK(p.message.body == d.message.body);
  CHECK(p.message.headers[kAttemptHeader] == 0);
  for (const char* gone :
       {kDeadReasonHeader, kFirstFailureHeader, kLastErrorHeader, kDeadAtHeader, "x-death"}) {
    CHECK_FALSE(p.message.headers.contains(gone));
  }
  CHECK(p.message.headers[kClusterHeader] == "ns1/c1");
}

TEST_CASE(
    "list reads the index and leaves the queue as it was, replay moves only the matches, "
    "confirmed, then acked") {
  Dlq q;
  q.Park("ns1", "c1", amqp::Lane::kChange, "max-attempts", 5);
  q.Park("ns1", "c2", amqp::Lane::kResync, "max-attempts", 5);
  q.Park("ns2", "c3", amqp::Lane::kChange, "undecodable", 0);

  auto listed = ListDeadLetters(q.session, {}, 0, q.clock);
  REQUIRE(listed.ok());
  CHECK(listed->matched.size() == 3);
  CHECK(listed->listed == 3);
  CHECK(listed->queue_depth == 3u);
  CHECK(listed->Discrepancy().empty());
  CHECK(q.Dead() == 3);
  CHECK(q.broker.UnackedCount(amqp::kDeadQueue) == 0);
  for (const auto& m : q.broker.ReadyMessages(amqp::kDeadQueue))
    CHECK_FALSE(m.headers.contains("x-delivery-count"));

  CHECK(q.DryReplay().find("would have replayed 3 of 3 matching") != std::string::npos);
  CHECK(q.Dead() == 3);

  DlqScanOptions replay;
  replay.filter.reason = "max-attempts";
  replay.rate_per_second = 4;
  std::vector<std::chrono::milliseconds> slept;
  auto replayed = q.Replay(replay, slept);
  REQUIRE(replayed.ok());
  CHECK(replayed->error.ok());
  CHECK(replayed->progress.done == 2);
  CHECK(q.Dead() == 1);
  CHECK(slept == std::vector<std::chrono::milliseconds>{250ms});
  auto change = q.Work(amqp::Lane::kChange), resync = q.Work(amqp::Lane::kResync);
  REQUIRE(change.size() == 1);
  REQUIRE(resync.size() == 1);
  CHECK(change[0].headers[kClusterHeader] == "ns1/c1");
  CHECK(change[0].headers[kAttemptHeader] == 0);
  CHECK(resync[0].headers[kClusterHeader] == "ns1/c2");
  // Without recorded removals the index still lists the replayed two: the listing says so.
  listed = ListDeadLetters(q.session, {}, 0, q.clock);
  REQUIRE(listed.ok());
  CHECK(listed->listed == 3);
  CHECK(listed->Discrepancy().find("reindex") != std::string::npos);
}

TEST_CASE(
    "the index drops what a replay or purge recorded as removed, oldest copy of a key first") {
  Dlq q;
  q.Park("ns1", "c1", amqp::Lane::kChange, "max-attempts", 5);
  q.Park("ns1", "c2", amqp::Lane::kChange, "max-attempts", 5);
  q.Park("ns1", "c1", amqp::Lane::kChange, "max-attempts", 5);  // a second copy of c1's request
  q.Park("ns1", "c3", amqp::Lane::kChange, "undecodable", 0);
  CHECK(q.Listed() == std::vector<std::string>{"ns1/c1", "ns1/c2", "ns1/c1", "ns1/c3"});

  DlqScanOptions replay;
  replay.action = DlqAction::kReplay;
  replay.filter.cluster = "ns1/c1";
  replay.limit = 1;
  replay.record_removals = true;
  auto replayed = ScanDeadLetters(q.session, replay, q.clock);
  REQUIRE(replayed.ok());
  CHECK(replayed->progress.done == 1);
  CHECK(q.Listed() == std::vector<std::string>{"ns1/c2", "ns1/c1", "ns1/c3"});

  DlqScanOptions purge;
  purge.action = DlqAction::kPurge;
  purge.filter.reason = "undecodable";
  purge.record_removals = true;
  REQUIRE(ScanDeadLetters(q.session, purge, q.clock).ok());
  CHECK(q.Listed() == std::vector<std::string>{"ns1/c2", "ns1/c1"});
  CHECK(q.Dead() == 2);
  auto listed = ListDeadLetters(q.session, {}, 0, q.clock);
  REQUIRE(listed.ok());
  CHECK(listed->Discrepancy().empty());
}

TEST_CASE("reindex rebuilds the index from the queue, in order, and leaves every message parked") {
  Dlq q;
  q.Park("ns1", "c1", amqp::Lane::kChange, "max-attempts", 5);
  q.Park("ns1", "c2", amqp::Lane::kResync, "undecodable", 0);
  // Parked before the index existed: only in the queue.
  amqp::Delivery d;
  d.routing_key = "change";
  d.message = ToAmqpMessage(Request("ns0", "old", amqp::Lane::kChange), "syncbus-publisher", "old",
                            q.clock.WallNow());
  amqp::Publication old = ParkedCopy(d, "max-attempts", "gone", q.clock.WallNow());
  old.exchange = "";
  old.routing_key = amqp::kDeadQueue;
  REQUIRE(q.session.Publish(old, 1s).ok());
  auto listed = ListDeadLetters(q.session, {}, 0, q.clock);
  REQUIRE(listed.ok());
  CHECK(listed->listed == 2);
  CHECK(listed->Discrepancy().find("before the index existed") != std::string::npos);

  auto rebuilt = ReindexDeadLetters(q.session, 1s);
  REQUIRE(rebuilt.ok());
  CHECK(rebuilt->error.ok());
  CHECK(rebuilt->progress.done == 3);
  CHECK(q.Listed() == std::vector<std::string>{"ns1/c1", "ns1/c2", "ns0/old"});
  CHECK(q.Dead() == 3);
  std::vector<std::string> queued;
  for (const auto& m : q.broker.ReadyMessages(amqp::kDeadQueue))
    queued.push_back(m.headers.value(kClusterHeader, ""));
  CHECK(queued == std::vector<std::string>{"ns1/c1", "ns1/c2", "ns0/old"});
}

TEST_CASE("a replay that cannot publish keeps the dead copy, the newest of its cluster") {
  Dlq q;
  q.Park("ns1", "c1", amqp::Lane::kChange, "max-attempts", 5, "r1");
  q.Park("ns1", "c1", amqp::Lane::kChange, "max-attempts", 5, "r2");
  q.broker.DeleteQueue(amqp::WorkQueueName(amqp::Lane::kChange));  // unroutable now
  DlqScanOptions replay;
  replay.action = DlqAction::kReplay;
  auto replayed = ScanDeadLetters(q.session, replay, q.clock);
  REQUIRE(replayed.ok());
  CHECK_FALSE(replayed->error.ok());
  CHECK(replayed->progress.done == 0);
  CHECK(replayed->progress.coalesced == 1);
  auto dead = q.broker.ReadyMessages(amqp::kDeadQueue);
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].message_id == "r2");
}

TEST_CASE("purge asks first (counting from the index) and removes only what was agreed to") {
  Dlq q;
  q.Park("ns1", "c1", amqp::Lane::kChange, "max-attempts", 5);
  q.Park("ns1", "c2", amqp::Lane::kChange, "undecodable", 0);
  DlqOptions options;
  options.action = DlqAction::kPurge;
  options.filter.reason = "undecodable";
  std::ostringstream out, err;
  std::istringstream no("n\n");
  CHECK(RunDlq(options, q.session, q.clock, no, out, err) == 1);
  CHECK(err.str().find("purge 1 dead-lettered message?") != std::string::npos);
  CHECK(q.Dead() == 2);

  std::istringstream yes("y\n");
  CHECK(RunDlq(options, q.session, q.clock, yes, out, err) == 0);
  CHECK(q.Dead() == 1);
  CHECK(err.str().find("purged 1 of 1 matching") != std::string::npos);

  options.filter.reason.clear();
  options.yes = true;
  std::istringstream unused;
  CHECK(RunDlq(options, q.session, q.clock, unused, out, err) == 0);
  CHECK(q.Dead() == 0);
}

TEST_CASE("list prints a table or JSON") {
  Dlq q;
  q.Park("ns1", "c1", amqp::Lane::kChange, "max-attempts", 5);
  DlqOptions options;
  options.output = OutputFormat::kJson;
  std::ostringstream out, err;
  std::istringstream in;
  REQUIRE(RunDlq(options, q.session, q.clock, in, out, err) == 0);
  Json listed = Json::parse(out.str());
  REQUIRE(listed.size() == 1);
  CHECK(listed[0]["cluster"] == "ns1/c1");
  CHECK(listed[0]["attempts"] == 5);
  CHECK(listed[0]["reason"] == "max-attempts");
}

TEST_CASE("a cluster parked again and again is one row with its copies counted") {
  Dlq q;
  q.Park("ns1", "c1", amqp::Lane::kChange, "max-attempts", 8, "r1");
  q.clock.Advance(45min);
  q.Park("ns1", "c2", amqp::Lane::kChange, "max-attempts", 8);
  q.Park("ns1", "c1", amqp::Lane::kChange, "max-attempts", 8, "r2");
  q.clock.Advance(45min);
  q.Park("ns1", "c1", amqp::Lane::kResync, "max-attempts", 8, "r3");
  q.ParkForeign("hello");
  q.clock.Advance(10s);
  auto listed = ListDeadLetters(q.session, {}, 0, q.clock);
  REQUIRE(listed.ok());
  REQUIRE(listed->matched.size() == 5);

  auto groups = GroupDeadLetters(listed->matched);
  REQUIRE(groups.size() == 3);
  CHECK(groups[0].cluster == "ns1/c1");
  CHECK(groups[0].copies.size() == 3);
  CHECK(groups[0].newest().message_id == "r3");
  CHECK(groups[1].cluster == "ns1/c2");
  CHECK(groups[2].reason == "undecodable");

  std::string table = FormatDeadLetterTable(listed->matched, q.clock.WallNow());
  CAPTURE(table);
  CHECK(table.find("CLUSTER  REASON        COPIES  ATTEMPTS  FIRST-FAILURE         OLDEST  "
                   "NEWEST  LAST-ERROR") == 0);
  // c1: three copies, the oldest parked 90 minutes ago, the newest 10 s ago.
  CHECK(table.find("ns1/c1   max-attempts  3       8         2026-01-01T00:00:00Z  90m     10s") !=
        std::string::npos);
  CHECK(table.find("parked: 5 copies of 2 clusters (max-attempts: 2 clusters, 4 copies; "
                   "undecodable: 1 copy)") != std::string::npos);
  // Wide: every copy.
  std::string wide = FormatDeadLetterTable(listed->matched, q.clock.WallNow(), true);
  CHECK(std::count(wide.begin(), wide.end(), '\n') == 8);  // header, 5 copies, the counts
  CHECK(wide.find("MESSAGE-ID") != std::string::npos);
}

TEST_CASE("a replay runs each cluster's request once, from its newest copy, and removes the rest") {
  Dlq q;
  q.Park("ns1", "c1", amqp::Lane::kChange, "max-attempts", 8, "r1");
  q.Park("ns1", "c2", amqp::Lane::kChange, "max-attempts", 8);
  q.Park("ns1", "c1", amqp::Lane::kChange, "max-attempts", 8, "r2");
  q.Park("ns1", "c1", amqp::Lane::kResync, "max-attempts", 8, "r3");  // another lane: runs too
  q.Park("ns1", "c1", amqp::Lane::kChange, "max-attempts", 8, "r4");

  CHECK(q.DryReplay().find("would have replayed 3 of 5 matching (of 5 parked) and removed 2 older "
                           "copies of the same clusters' requests") != std::string::npos);

  DlqScanOptions replay;
  replay.record_removals = true;
  replay.rate_per_second = 10;
  std::vector<std::chrono::milliseconds> slept;
  auto replayed = q.Replay(replay, slept);
  REQUIRE(replayed.ok());
  CHECK(replayed->error.ok());
  CHECK(replayed->progress.matched == 5);
  CHECK(replayed->progress.done == 3);
  CHECK(replayed->progress.coalesced == 2);
  CHECK(slept.size() == 2);  // the rate counts replays only
  CHECK(q.Dead() == 0);
  CHECK(q.Listed().empty());
  std::vector<std::string> change;
  for (const auto& m : q.Work(amqp::Lane::kChange)) change.push_back(m.message_id);
  CHECK(change == std::vector<std::string>{"r4", "c2"});  // in the order the clusters were met
  auto resync = q.Work(amqp::Lane::kResync);
  REQUIRE(resync.size() == 1);
  CHECK(resync[0].message_id == "r3");
}
