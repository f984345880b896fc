// RouteDelivery as a table: each row a situation (a delivery's history in its headers, what the
// cluster's facts say, how its run ended) and where it must go, with what the router asked.
#include "common/bus/route.h"

#include <doctest/doctest.h>

#include "common/bus/headers.h"
#include "common/bus/sync_message.h"
#include "common/bus/topology.h"
#include "tests/fakes/common/fake_clock.h"

using namespace syncbus;
using namespace std::chrono_literals;

namespace {

class TableFacts final : public ClusterFacts {
 public:
  TableFacts(std::string settled, std::string holder)
      : settled_(std::move(settled)), holder_(std::move(holder)) {}
  std::string SettledAlready(const SyncRequest&) override {
    ++asked_settled;
    return settled_;
  }
  std::string HolderElsewhere(const SyncRequest&) override {
    ++asked_holder;
    return holder_;
  }
  std::string StickyHolder(const SyncRequest&) override { return sticky; }
  int asked_settled = 0, asked_holder = 0;
  std::string sticky;  // what StickyHolder answers

 private:
  std::string settled_, holder_;
};

SyncRequest Request() {
  SyncRequest r;
  r.cluster_namespace = "ns";
  r.cluster_name = "c1";
  r.lane = amqp::Lane::kChange;
  r.reason = "generation-changed";
  r.revision = "rev";
  r.enqueued_at = "2026-01-01T00:00:00Z";
  return r;
}

struct Row {
  const char* name;
  Situation::When when;
  bool decodable = true;
  int attempt = 0;      // x-syncbus-attempt
  int unsettled = 0;    // x-syncbus-unsettled (carried) + x-delivery-count (the broker's)
  int quarantined = 0;  // x-syncbus-quarantined
  std::string settled;  // what SettledAlready answers
  std::string holder;   // what HolderElsewhere answers
  RunEnd ran;
  // Expected:
  Step step;
  std::string outcome;
  std::string tier;
  std::string dead_reason;
  int asks_settled = 0, asks_holder = 0;
};

RunEnd Failed(std::string error, bool permanent = false,
              std::chrono::milliseconds retry_after = 0ms) {
  RunEnd r;
  r.error = std::move(error);
  r.permanent = permanent;
  r.retry_after = retry_after;
  return r;
}
RunEnd Busy() {
  RunEnd r;
  r.busy = true;
  return r;
}
RunEnd Succeeded() {
  RunEnd r;
  r.succeeded = true;
  return r;
}

using W = Situation::When;
const std::vector<Row>& Table() {
  static const std::vector<Row> rows = {
      // name, when, decodable, attempt, unsettled, quarantined, settled, holder, ran,
      //   step, outcome, tier, dead reason, asks settled, asks holder
      {"undecodable: parked at once",
       W::kArrived,
       false,
       0,
       0,
       0,
       "",
       "",
       {},
       Step::kDeadLetter,
       "dead-lettered",
       "",
       "undecodable",
       0,
       0},
      {"fresh: run, asking nothing",
       W::kArrived,
       true,
       0,
       0,
       0,
       "",
       "",
       {},
       Step::kRun,
       "",
       "",
       "",
       0,
       0},
      {"a retry's copy: run, asking nothing",
       W::kArrived,
       true,
       2,
       0,
       0,
       "",
       "",
       {},
       Step::kRun,
       "",
       "",
       "",
       0,
       0},
      {"returned once, its work done: acked unrun",
       W::kArrived,
       true,
       0,
       1,
       0,
       "up-to-date",
       "",
       {},
       Step::kAckSuperseded,
       "superseded",
       "",
       "",
       1,
       0},
      {"returned once: held back in the first tier",
       W::kArrived,
       true,
       0,
       1,
       0,
       "",
       "",
       {},
       Step::kHoldBack,
       "quarantined",
       "5s",
       "",
       1,
       0},
      {"back from its hold-back: run",
       W::kArrived,
       true,
       0,
       1,
       1,
       "",
       "",
       {},
       Step::kRun,
       "",
       "",
       "",
       1,
       1},
      {"back from its hold-back, the cluster leased elsewhere: deferred",
       W::kArrived,
       true,
       0,
       1,
       1,
       "",
       "consumer-b",
       {},
       Step::kDefer,
       "busy",
       "5s",
       "",
       1,
       1},
      {"returned twice: held back in the second tier",
       W::kArrived,
       true,
       0,
       2,
       1,
       "",
       "",
       {},
       Step::kHoldBack,
       "quarantined",
       "30s",
       "",
       1,
       0},
      {"returned twice, back from its hold-back: run alone",
       W::kArrived,
       true,
       0,
       2,
       2,
       "",
       "",
       {},
       Step::kRunAlone,
       "",
       "",
       "",
       1,
       1},
      {"one more crash would reach the limit: run alone",
       W::kArrived,
       true,
       0,
       5,
       5,
       "",
       "",
       {},
       Step::kRunAlone,
       "",
       "",
       "",
       1,
       1},
      {"over the delivery limit: parked as poison",
       W::kArrived,
       true,
       0,
       6,
       5,
       "",
       "",
       {},
       Step::kDeadLetter,
       "dead-lettered",
       "",
       "delivery_limit",
       1,
       0},
      {"over the limit, but its work done: acked unrun",
       W::kArrived,
       true,
       0,
       6,
       5,
       "cluster-gone",
       "",
       {},
       Step::kAckSuperseded,
       "superseded",
       "",
       "",
       1,
       0},
      {"ran: done", W::kRan, true, 0, 0, 0, "", "", Succeeded(), Step::kAckDone, "", "", "", 0, 0},
      {"ran: the cluster busy elsewhere: deferred", W::kRan, true, 0, 0, 0, "", "", Busy(),
       Step::kDefer, "busy", "5s", "", 0, 0},
      {"ran: failed, first attempt: the first tier", W::kRan, true, 0, 0, 0, "", "", Failed("503"),
       Step::kRetry, "retried", "5s", "", 0, 0},
      {"ran: failed, second attempt: the second tier", W::kRan, true, 1, 0, 0, "", "",
       Failed("503"), Step::kRetry, "retried", "30s", "", 0, 0},
      {"ran: failed for good: the slowest tier", W::kRan, true, 0, 0, 0, "", "",
       Failed("forbidden", true), Step::kRetry, "retried", "6m", "", 0, 0},
      {"ran: throttled for 20 s: no tier shorter", W::kRan, true, 0, 0, 0, "", "",
       Failed("429", false, 20s), Step::kRetry, "retried", "30s", "", 0, 0},
      {"ran: failed on its last attempt: parked", W::kRan, true, 3, 0, 0, "", "", Failed("503"),
       Step::kDeadLetter, "dead-lettered", "", "max-attempts", 0, 0},
      {"waited too long to run alone: deferred",
       W::kAloneWaitedTooLong,
       true,
       0,
       2,
       2,
       "",
       "",
       {},
       Step::kDefer,
       "busy",
       "5s",
       "",
       0,
       0},
  };
  return rows;
}

}  // namespace

TEST_CASE("route: every situation of the table goes where it must, asking only what it needs") {
  FakeClock clock;
  RoutePolicy policy{{{5s, 30s, 120s, 360s}, 4}, 5};
  for (const Row& row : Table()) {
    CAPTURE(row.name);
    amqp::Delivery d;
    d.routing_key = "change";
    d.message.body = row.decodable ? EncodeSyncRequest(Request()) : "{not json";
    d.message.headers = Json{{kAttemptHeader, row.attempt}, {kLaneHeader, "change"}};
    // Half of an unsettled count is carried by syncbus, the rest counted by the broker.
    if (row.unsettled > 0) {
      d.message.headers[kUnsettledHeader] = row.unsettled / 2;
      d.message.headers[kDeliveryCountHeader] = row.unsettled - row.unsettled / 2;
    }
    if (row.quarantined > 0) d.message.headers[kQuarantinedHeader] = row.quarantined;
    const Result<SyncRequest> request = DecodeSyncRequest(d.message.body);
    REQUIRE(request.ok() == row.decodable);
    TableFacts facts(row.settled, row.holder);
    const Situation situation = row.when == W::kArrived ? Situation::Arrived(d, request)
                                : row.when == W::kRan   ? Situation::Ran(d, row.ran)
                                                        : Situation::AloneWaitedTooLong(d);
    const Route route = RouteDelivery(situation, policy, facts, clock.WallNow());
    CHECK(std::string(StepName(route.step)) == StepName(row.step));
    CHECK(route.outcome == row.outcome);
    CHECK(route.tier() == row.tier);
    CHECK(route.dead_reason == row.dead_reason);
    CHECK(facts.asked_settled == row.asks_settled);
    CHECK(facts.asked_holder == row.asks_holder);
    const bool publishes = row.step != Step::kRun && row.step != Step::kRunAlone &&
                           row.step != Step::kAckDone && row.step != Step::kAckSuperseded;
    REQUIRE(route.publication.has_value() == publishes);
    if (!publishes) continue;
    const amqp::Publication& p = *route.publication;
    CHECK(p.exchange == (row.step == Step::kDeadLetter ? amqp::kDeadExchange
                         : policy.retry.tiers.empty()  ? amqp::kWorkExchange
                                                       : amqp::kRetryExchange));
    CHECK(p.routing_key == "change");  // back to its own lane
    CHECK_FALSE(route.why.empty());
    const int attempt = AttemptOf(p.message);
    const int unsettled = UnsettledDeliveries(p.message);
    switch (row.step) {
      case Step::kRetry:  // an attempt counted; a settled copy carries no unsettled count
        CHECK(attempt == row.attempt + 1);
        CHECK(unsettled == 0);
        break;
      case Step::kDefer:  // nothing counted, the unsettled count travels along
        CHECK(attempt == row.attempt);
        CHECK(unsettled == row.unsettled);
        break;
      case Step::kHoldBack:  // held back for its unsettled count, which travels along
        CHECK(unsettled == row.unsettled);
        CHECK(QuarantinedFor(p.message) == row.unsettled);
        break;
      case Step::kDeadLetter:  // the limit's count is kept for `dlq list`
        CHECK(unsettled == (row.dead_reason == "delivery_limit" ? row.unsettled : 0));
        break;
      default: break;
    }
  }
}

TEST_CASE("route: a request that fails for good the first time waits in the slowest tier") {
  // The same rule for a one-tier policy: the only tier is the slowest.
  FakeClock clock;
  RoutePolicy policy{{{30s}, 4}, 0};
  amqp::Delivery d;
  d.routing_key = "resync";
  d.message.body = EncodeSyncRequest(Request());
  TableFacts facts("", "");
  const Route route =
      RouteDelivery(Situation::Ran(d, Failed("forbidden", true)), policy, facts, clock.WallNow());
  CHECK(route.step == Step::kRetry);
  CHECK(route.tier() == "30s");
  CHECK(route.publication->routing_key == "resync");
}

TEST_CASE("route: a poison parked by a consumer keeps its count and its returns from consumers") {
  FakeClock clock;
  RoutePolicy policy{{{5s, 30s}, 4}, 5};
  amqp::Delivery d;
  d.routing_key = "change";
  d.message.body = EncodeSyncRequest(Request());
  // 4 carried (1 of them a return), 1 counted by the broker, 1 return from a holder's queue.
  d.message.headers =
      Json{{kLaneHeader, "change"},
           {kUnsettledHeader, 4},
           {kReturnedHeader, 1},
           {kDeliveryCountHeader, 1},
           {kDeathHeader, Json::array({{{"reason", "delivery_limit"},
                                        {"queue", "syncbus.consumer.consumer-a.change"},
                                        {"count", 1}}})}};
  TableFacts facts("", "");
  const Route route = RouteDelivery(Situation::Arrived(d, DecodeSyncRequest(d.message.body)),
                                    policy, facts, clock.WallNow());
  REQUIRE(route.step == Step::kDeadLetter);
  REQUIRE(route.publication.has_value());
  const Json& parked = route.publication->message.headers;
  CHECK(parked[kUnsettledHeader] == 6);
  CHECK(parked[kReturnedHeader] == 2);
  CHECK_FALSE(parked.contains(kDeathHeader));
}

TEST_CASE("route: a request whose cluster another consumer holds goes to that consumer's queue") {
  FakeClock clock;
  RoutePolicy policy{{{5s, 30s, 120s, 360s}, 4}, 5};
  policy.max_hops = 2;
  amqp::Delivery d;
  d.routing_key = "resync";
  d.message.body = EncodeSyncRequest(Request());
  d.message.headers = Json{{kAttemptHeader, 1}, {kLaneHeader, "resync"}};
  const Result<SyncRequest> request = DecodeSyncRequest(d.message.body);
  TableFacts facts("", "");
  facts.sticky = "consumer-b";

  SUBCASE("fresh: forwarded, its lane, attempt and hops kept") {
    const Route route =
        RouteDelivery(Situation::Arrived(d, request), policy, facts, clock.WallNow());
    REQUIRE(route.step == Step::kForward);
    CHECK(route.outcome == "forwarded");
    const amqp::Publication& p = *route.publication;
    CHECK(p.exchange == amqp::kForwardExchange);
    CHECK(p.routing_key == "resync");
    CHECK(p.mandatory);
    CHECK(p.message.headers[kForwardToHeader] == "consumer-b");
    CHECK(HopsOf(p.message) == 1);
    CHECK(AttemptOf(p.message) == 1);
  }
  SUBCASE("forwarded max_hops times: deferred instead") {
    d.message.headers[kHopsHeader] = 2;
    const Route route =
        RouteDelivery(Situation::Arrived(d, request), policy, facts, clock.WallNow());
    CHECK(route.step == Step::kDefer);
    CHECK(route.outcome == "busy");
  }
  SUBCASE("back from its hold-back: forwarded with its unsettled count") {
    d.message.headers[kUnsettledHeader] = 1;
    d.message.headers[kDeliveryCountHeader] = 1;
    d.message.headers[kQuarantinedHeader] = 2;
    const Route route =
        RouteDelivery(Situation::Arrived(d, request), policy, facts, clock.WallNow());
    REQUIRE(route.step == Step::kForward);
    CHECK(UnsettledDeliveries(route.publication->message) == 2);
  }
  SUBCASE("a run that found the cluster held: forwarded to the holder it names") {
    RunEnd busy;
    busy.busy = true;
    busy.holder = "consumer-c";
    const Route route = RouteDelivery(Situation::Ran(d, busy), policy, facts, clock.WallNow());
    REQUIRE(route.step == Step::kForward);
    CHECK(route.publication->message.headers[kForwardToHeader] == "consumer-c");
    busy.holder = "";
    CHECK(RouteDelivery(Situation::Ran(d, busy), policy, facts, clock.WallNow()).step ==
          Step::kDefer);
  }
}
