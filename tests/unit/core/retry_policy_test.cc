#include "common/bus/retry_policy.h"

#include <doctest/doctest.h>

#include "common/bus/sync_message.h"
#include "common/bus/topology.h"
#include "tests/fakes/common/fake_clock.h"

using namespace syncbus;
using namespace std::chrono_literals;

namespace {
amqp::Delivery Fresh(const std::string& lane = "change") {
  amqp::Delivery d;
  d.routing_key = lane;
  d.message.body = "{}";
  d.message.headers = Json{{kAttemptHeader, 0}, {kLaneHeader, lane}, {kClusterHeader, "a/b"}};
  return d;
}
}  // namespace

TEST_CASE("attempts walk the tiers, then the dead-letter queue") {
  FakeClock clock;
  RetryPolicy policy{{5s, 30s, 120s, 360s}, 6};
  amqp::Delivery d = Fresh("resync");
  std::vector<std::string> tiers;
  for (int i = 0; i < 5; ++i) {
    amqp::Publication p = NextAttempt(d, policy, "connection refused", false, clock.WallNow());
    REQUIRE(p.exchange == amqp::kRetryExchange);
    CHECK(p.routing_key == "resync");  // back to its own lane
    CHECK(AttemptOf(p.message) == i + 1);
    tiers.push_back(p.message.headers[kRetryTierHeader]);
    d.message = p.message;
    clock.Advance(1min);
  }
  CHECK(tiers == std::vector<std::string>{"5s", "30s", "2m", "6m", "6m"});
  CHECK(d.message.headers[kFirstFailureHeader] ==
        "2026-01-01T00:00:00Z");  // kept from the first failure
  amqp::Publication last = NextAttempt(d, policy, "still refused", false, clock.WallNow());
  CHECK(last.exchange == amqp::kDeadExchange);
  CHECK(last.message.headers[kDeadReasonHeader] == "max-attempts");
  CHECK(last.message.headers[kLastErrorHeader] == "still refused");
  CHECK_FALSE(last.message.headers.contains(kRetryTierHeader));
}

TEST_CASE("permanent failures go straight to the slow tier") {
  FakeClock clock;
  RetryPolicy policy{{5s, 30s, 120s, 360s}, 8};
  auto p = NextAttempt(Fresh(), policy, "422 Invalid", true, clock.WallNow());
  CHECK(p.message.headers[kRetryTierHeader] == "6m");
}

TEST_CASE("error headers are short, single-line and never carry tokens") {
  std::string e = SanitizeError("401 Unauthorized\nAuthorization: Bearer abc.def.ghi rejected");
  CHECK(e.find('\n') == std::string::npos);
  CHECK(e.find("abc.def") == std::string::npos);
  CHECK(e.find("<redacted>") != std::string::npos);
  CHECK(SanitizeError(std::string(2000, 'e')).size() <= kMaxErrorHeaderBytes);
}

TEST_CASE("undecodable messages are parked with their reason") {
  FakeClock clock;
  amqp::Delivery d = Fresh();
  d.message.headers = Json::object();  // a foreign message: no syncbus headers at all
  auto p = ParkedCopy(d, "undecodable", "sync request: body is not valid JSON", clock.WallNow());
  CHECK(p.exchange == amqp::kDeadExchange);
  CHECK(p.message.headers[kDeadReasonHeader] == "undecodable");
  CHECK(p.message.headers[kLastErrorHeader] == "sync request: body is not valid JSON");
}

TEST_CASE("a Retry-After longer than the tier moves the retry to a tier at least that long") {
  FakeClock clock;
  RetryPolicy policy{{5s, 30s, 120s, 360s}, 8};
  auto p = NextAttempt(Fresh(), policy, "429 Too Many Requests", false, clock.WallNow(), 20s);
  CHECK(p.message.headers[kRetryTierHeader] == "30s");
  CHECK(AttemptOf(p.message) == 1);
  auto longest = NextAttempt(Fresh(), policy, "429", false, clock.WallNow(), 1h);
  CHECK(longest.message.headers[kRetryTierHeader] == "6m");
  auto shorter = NextAttempt(Fresh(), policy, "429", false, clock.WallNow(), 1s);
  CHECK(shorter.message.headers[kRetryTierHeader] == "5s");
}

TEST_CASE("a busy cluster is deferred to the shortest tier without counting an attempt") {
  FakeClock clock;
  RetryPolicy policy{{30s, 5s, 120s}, 8};
  amqp::Delivery d = Fresh("resync");
  d.message.headers[kAttemptHeader] = 3;
  d.message.headers[kFirstFailureHeader] = "2025-12-31T00:00:00Z";
  d.message.headers["x-death"] = Json::array({Json{{"reason", "expired"}}});
  auto p = Defer(d, policy);
  CHECK(p.exchange == amqp::kRetryExchange);
  CHECK(p.routing_key == "resync");
  CHECK(p.message.headers[kRetryTierHeader] == "5s");
  CHECK(AttemptOf(p.message) == 3);
  CHECK(p.message.headers[kFirstFailureHeader] == "2025-12-31T00:00:00Z");
  CHECK_FALSE(p.message.headers.contains("x-death"));
}

TEST_CASE("the dead letter after the last attempt says why, when and after how many") {
  FakeClock clock;
  RetryPolicy policy{{1s, 2s}, 3};
  amqp::Delivery d = Fresh();
  d.message.headers[kAttemptHeader] = 2;
  auto p = NextAttempt(d, policy, "503 Service Unavailable", false, clock.WallNow());
  CHECK(p.exchange == amqp::kDeadExchange);
  CHECK(p.message.headers[kDeadReasonHeader] == "max-attempts");
  CHECK(AttemptOf(p.message) == 3);
  CHECK(p.message.headers[kDeadAtHeader] == "2026-01-01T00:00:00Z");
  CHECK(p.message.headers[kLastErrorHeader] == "503 Service Unavailable");
}

TEST_CASE(
    "unsettled deliveries are carried across deferrals and forgotten once a consumer settles") {
  FakeClock clock;
  RetryPolicy policy{{1s, 2s}, 5};
  amqp::Delivery d = Fresh();
  d.message.headers[kDeliveryCountHeader] = 2;  // the broker: two earlier copies were never settled
  d.message.headers[kUnsettledHeader] = 1;
  CHECK(UnsettledDeliveries(d.message) == 3);
  auto deferred = Defer(d, policy);
  CHECK(deferred.message.headers[kUnsettledHeader] == 3);
  CHECK_FALSE(deferred.message.headers.contains(kDeliveryCountHeader));
  auto retried = NextAttempt(d, policy, "503", false, clock.WallNow());
  CHECK(UnsettledDeliveries(retried.message) == 0);
}

TEST_CASE("a delivery that ended unsettled is held back in the tier of its count, once per count") {
  FakeClock clock;
  RetryPolicy policy{{30s, 5s, 120s}, 8};
  amqp::Delivery d = Fresh("resync");
  d.message.headers[kAttemptHeader] = 2;
  CHECK_FALSE(NeedsQuarantine(d.message));  // never delivered before
  d.message.headers[kDeliveryCountHeader] = 1;
  REQUIRE(NeedsQuarantine(d.message));
  auto held = Quarantine(d, policy);
  CHECK(held.exchange == amqp::kRetryExchange);
  CHECK(held.routing_key == "resync");
  CHECK(held.message.headers[kRetryTierHeader] == "5s");  // count 1: the shortest tier
  CHECK(AttemptOf(held.message) == 2);                    // no attempt counted
  CHECK(UnsettledDeliveries(held.message) == 1);
  CHECK_FALSE(NeedsQuarantine(held.message));  // back from the tier: it runs

  // It crashed its consumer once more: held back longer.
  amqp::Delivery again;
  again.routing_key = "resync";
  again.message = held.message;
  again.message.headers[kDeliveryCountHeader] = 1;
  REQUIRE(NeedsQuarantine(again.message));
  auto longer = Quarantine(again, policy);
  CHECK(longer.message.headers[kRetryTierHeader] == "30s");
  CHECK(UnsettledDeliveries(longer.message) == 2);
  amqp::Delivery many = again;
  many.message = longer.message;
  many.message.headers[kUnsettledHeader] = 7;
  CHECK(Quarantine(many, policy).message.headers[kRetryTierHeader] == "2m");  // the last

  // A consumer settled it (a failure retried): the history is forgotten.
  auto retried = NextAttempt(again, policy, "503", false, clock.WallNow());
  CHECK_FALSE(retried.message.headers.contains(kQuarantinedHeader));
  CHECK_FALSE(NeedsQuarantine(retried.message));
}

TEST_CASE(
    "a suspect runs alone from its second unsettled delivery, or when a crash beside it would park "
    "it") {
  CHECK_FALSE(RunsAlone(0, 5));
  CHECK_FALSE(RunsAlone(1, 5));  // most often a lost connection: held back only
  CHECK(RunsAlone(2, 5));
  CHECK(RunsAlone(7, 5));
  CHECK_FALSE(RunsAlone(1, 2));  // a crash beside it leaves it at 2, within the limit
  CHECK(RunsAlone(1, 1));        // ... but over a limit of 1
  CHECK_FALSE(RunsAlone(1, 0));  // no limit of syncbus's
  CHECK(RunsAlone(2, 0));
}

TEST_CASE("a forward goes to the holder's queue on its lane, one hop more, its history carried") {
  amqp::Delivery d = Fresh("resync");
  d.message.headers[kAttemptHeader] = 2;
  d.message.headers[kFirstFailureHeader] = "2025-12-31T00:00:00Z";
  d.message.headers[kDeliveryCountHeader] = 2;
  d.message.headers[kUnsettledHeader] = 1;
  d.message.headers["x-death"] = Json::array({Json{{"reason", "expired"}}});
  auto p = Forwarded(d, "consumer-7");
  CHECK(p.exchange == amqp::kForwardExchange);
  CHECK(p.mandatory);
  CHECK(p.routing_key == "resync");
  CHECK(p.message.persistent);
  CHECK(p.message.headers[kForwardToHeader] == "consumer-7");
  CHECK(p.message.headers[kLaneHeader] == "resync");  // the holder's queue of that lane
  CHECK(HopsOf(p.message) == 1);
  CHECK(AttemptOf(p.message) == 2);
  CHECK(p.message.headers[kFirstFailureHeader] == "2025-12-31T00:00:00Z");
  CHECK(p.message.headers[kClusterHeader] == "a/b");
  CHECK(p.message.body == "{}");
  CHECK(UnsettledDeliveries(p.message) == 3);
  CHECK_FALSE(p.message.headers.contains(kDeliveryCountHeader));
  CHECK_FALSE(p.message.headers.contains("x-death"));

  // It came back from the holder's queue (its TTL dead-lettered it, on its routing key) and is
  // forwarded again, to another holder: the hops and the unsettled count add up.
  amqp::Delivery back;
  back.routing_key = p.routing_key;
  back.message = p.message;
  back.message.headers[kDeliveryCountHeader] = 1;
  auto again = Forwarded(back, "consumer-9");
  CHECK(again.routing_key == "resync");
  CHECK(again.message.headers[kForwardToHeader] == "consumer-9");
  CHECK(HopsOf(again.message) == 2);
  CHECK(UnsettledDeliveries(again.message) == 4);
}

TEST_CASE("a forward keeps the lane of a request without a lane header, back from a retry tier") {
  // A retry tier dead-letters with the routing key the retry was published with: the lane.
  amqp::Delivery d;
  d.exchange = amqp::kWorkExchange;
  d.routing_key = "resync";
  d.message.headers = Json{{kRetryTierHeader, "5s"}};
  CHECK(Forwarded(d, "c").routing_key == "resync");
  // ... and names it for the forward exchange, which routes on it to the holder's resync queue.
  CHECK(Forwarded(d, "c").message.headers[kLaneHeader] == "resync");
  CHECK(HopsOf(d.message) == 0);
}

TEST_CASE(
    "a return from a holder's queue counts once, also where the broker's count travels with the "
    "dead letter (RabbitMQ 4.x)") {
  auto returned = [](int delivery_count, bool count_travels) {
    amqp::Message m;
    m.headers = Json{{kDeathHeader, Json::array({{{"reason", "delivery_limit"},
                                                  {"queue", "syncbus.consumer.consumer-a.change"},
                                                  {"count", 1}}})}};
    if (delivery_count > 0) m.headers[kDeliveryCountHeader] = delivery_count;
    if (count_travels) m.headers[kLastDeathQueueHeader] = "syncbus.consumer.consumer-a.change";
    return UnsettledDeliveries(m);
  };
  // 4.x: the holder died holding it (its queue's count, 1, travels with it), or it nacked it
  // (no count).
  CHECK(returned(1, true) == 1);
  CHECK(returned(0, true) == 1);
  // 3.10: no count travels; one there is the lane's own, a delivery beside the return.
  CHECK(returned(0, false) == 1);
  CHECK(returned(1, false) == 2);
}

TEST_CASE(
    "returns from consumers' own queues in x-death count as unsettled deliveries, others not, "
    "and are carried as such") {
  FakeClock clock;
  amqp::Message m;
  m.headers = Json{
      {kUnsettledHeader, 1},
      {kReturnedHeader, 1},  // one of the carried deliveries was a return too
      {kDeliveryCountHeader, 1},
      {kDeathHeader,
       Json::array(
           {{{"reason", "delivery_limit"},
             {"queue", "syncbus.consumer.consumer-a.change"},
             {"count", 2}},
            {{"reason", "expired"}, {"queue", "syncbus.consumer.consumer-b.resync"}, {"count", 5}},
            // A parked request replayed from the dead-letter queue.
            {{"reason", "delivery_limit"}, {"queue", "syncbus.work.change"}, {"count", 1}}})}};
  CHECK(UnsettledDeliveries(m) == 4);
  CHECK(ReturnsFromConsumers(m) == 3);
  amqp::Delivery d;
  d.routing_key = "change";
  d.message = m;
  // Carried on by a deferral or a forward, which drop x-death: the count stays.
  amqp::Publication deferred = Defer(d, RetryPolicy{{std::chrono::seconds(5)}, 4});
  CHECK_FALSE(deferred.message.headers.contains(kDeathHeader));
  CHECK(UnsettledDeliveries(deferred.message) == 4);
  CHECK(ReturnsFromConsumers(deferred.message) == 3);
  CHECK(ReturnsFromConsumers(Forwarded(d, "consumer-c").message) == 3);
  // A copy a consumer settled forgets them with the unsettled count.
  CHECK(ReturnsFromConsumers(
            NextAttempt(d, RetryPolicy{{std::chrono::seconds(5)}, 4}, "503", false, clock.WallNow())
                .message) == 0);
}
