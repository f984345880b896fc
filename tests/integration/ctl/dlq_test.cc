// `syncbusctl dlq` on a real RabbitMQ 3.10: listing requeues everything, replay confirms before
// it acks and resets the history (also of a message the broker parked on its delivery limit),
// purge, and the binary reading its broker connection from the daemons' config file.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "common/amqp/session_impl.h"
#include "common/amqp/syncbus_topology.h"
#include "common/sync_message.h"
#include "consumer/retry_policy.h"
#include "ctl/commands.h"
#include "ctl/dead_letters.h"
#include "tests/support/child_process.h"
#include "tests/support/files.h"
#include "tests/support/test_broker.h"

using namespace syncbus;
using namespace syncbus::ctl;
using namespace std::chrono_literals;

namespace {

constexpr std::chrono::milliseconds kTimeout{10000};

struct Broker {
  testing::TestVhost vhost = testing::NewTestVhost();
  amqp::RabbitmqSession session{vhost.Options("dlq-test")};

  Broker() {
    REQUIRE(session.Connect().ok());
    amqp::TopologyOptions t;
    t.retry_tiers = {1s, 2s};
    t.delivery_limit = 1;
    REQUIRE(session.Declare(amqp::SyncbusTopology(t)).ok());
  }
  amqp::Message Request(const std::string& name, amqp::Lane lane) {
    SyncRequest r;
    r.cluster_namespace = "ns1";
    r.cluster_name = name;
    r.lane = lane;
    r.reason = "syncset-changed";
    r.enqueued_at = "2026-01-01T00:00:00.000Z";
    return ToAmqpMessage(r, "syncbus-publisher", name, RealClock().WallNow());
  }
  void Park(const std::string& name, amqp::Lane lane, const std::string& reason) {
    amqp::Delivery d;
    d.routing_key = amqp::LaneName(lane);
    d.message = Request(name, lane);
    d.message.headers[kAttemptHeader] = 4;
    amqp::Publication p = consumer::NextAttempt(d, {{1s, 2s}, 5}, "503 Service Unavailable", false,
                                                RealClock().WallNow());
    if (reason != "max-attempts")
      p = consumer::DeadLetter(d, reason, "bad body", RealClock().WallNow());
    REQUIRE(p.exchange == amqp::kDeadExchange);
    REQUIRE(session.Publish(p, kTimeout).ok());
  }
  uint32_t Ready(const std::string& queue) {
    auto info = session.Inspect(queue);
    REQUIRE_MESSAGE(info.ok(), info.status().ToString());
    return info->messages;
  }
  // Dead-lettering by the broker is asynchronous.
  void WaitReady(const std::string& queue, uint32_t n) {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (Ready(queue) != n && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(50ms);
    REQUIRE(Ready(queue) == n);
  }
};

}  // namespace

TEST_CASE("list requeues every message, replay moves only the matches with attempts reset") {
  Broker b;
  b.Park("c1", amqp::Lane::kChange, "max-attempts");
  b.Park("c2", amqp::Lane::kResync, "max-attempts");
  b.Park("c3", amqp::Lane::kChange, "undecodable");
  b.WaitReady(amqp::kDeadQueue, 3);

  auto listed = ScanDeadLetters(b.session, {}, RealClock());
  REQUIRE(listed.ok());
  REQUIRE(listed->matched.size() == 3);
  CHECK(listed->matched[0].cluster == "ns1/c1");
  CHECK(listed->matched[0].attempts == 5);
  CHECK(listed->matched[0].reason == "max-attempts");
  CHECK(listed->matched[0].dead_at.has_value());
  b.WaitReady(amqp::kDeadQueue, 3);

  DlqScanOptions replay;
  replay.action = DlqAction::kReplay;
  replay.filter.reason = "max-attempts";
  auto replayed = ScanDeadLetters(b.session, replay, RealClock());
  REQUIRE(replayed.ok());
  CHECK(replayed->error.ok());
  CHECK(replayed->progress.done == 2);
  b.WaitReady(amqp::kDeadQueue, 1);
  b.WaitReady(amqp::WorkQueueName(amqp::Lane::kChange), 1);
  b.WaitReady(amqp::WorkQueueName(amqp::Lane::kResync), 1);
  auto back = b.session.Get(amqp::WorkQueueName(amqp::Lane::kResync));
  REQUIRE(back.ok());
  REQUIRE(back->has_value());
  const Json& h = (*back)->message.headers;
  CHECK(h[kClusterHeader] == "ns1/c2");
  CHECK(h[kAttemptHeader] == 0);
  CHECK_FALSE(h.contains(kDeadReasonHeader));
  CHECK_FALSE(h.contains(kLastErrorHeader));
  CHECK(DecodeSyncRequest((*back)->message.body).ok());

  DlqOptions purge;
  purge.action = DlqAction::kPurge;
  purge.yes = true;
  std::ostringstream out, err;
  std::istringstream in;
  CHECK(RunDlq(purge, b.session, RealClock(), in, out, err) == 0);
  b.WaitReady(amqp::kDeadQueue, 0);
}

TEST_CASE("a message parked by the broker's delivery limit is listed as poison and replays clean") {
  Broker b;
  amqp::Publication p{amqp::kWorkExchange, "change", b.Request("poison", amqp::Lane::kChange)};
  REQUIRE(b.session.Publish(p, kTimeout).ok());
  const std::string work = amqp::WorkQueueName(amqp::Lane::kChange);
  // Two deliveries that end unsettled (limit 1): the broker parks it.
  for (int i = 0; i < 2; ++i) {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    std::optional<amqp::Delivery> got;
    while (!got && std::chrono::steady_clock::now() < deadline) {
      auto r = b.session.Get(work);
      REQUIRE(r.ok());
      got = *r;
      if (!got) std::this_thread::sleep_for(50ms);
    }
    REQUIRE(got.has_value());
    REQUIRE(b.session.Reject(got->delivery_tag, true).ok());
  }
  b.WaitReady(amqp::kDeadQueue, 1);

  DlqScanOptions list;
  list.filter.reason = "delivery_limit";
  auto listed = ScanDeadLetters(b.session, list, RealClock());
  REQUIRE(listed.ok());
  REQUIRE(listed->matched.size() == 1);
  CHECK(listed->matched[0].cluster == "ns1/poison");
  CHECK(listed->matched[0].dead_at.has_value());
  b.WaitReady(amqp::kDeadQueue, 1);  // requeued by the listing

  DlqScanOptions replay;
  replay.action = DlqAction::kReplay;
  replay.filter.cluster = "poison";
  auto replayed = ScanDeadLetters(b.session, replay, RealClock());
  REQUIRE(replayed.ok());
  CHECK_MESSAGE(replayed->progress.done == 1, replayed->error.ToString()
                                                  << " matched " << replayed->matched.size());
  b.WaitReady(work, 1);
  auto back = b.session.Get(work);
  REQUIRE(back.ok());
  REQUIRE(back->has_value());
  CHECK_FALSE((*back)->message.headers.contains("x-death"));
  CHECK((*back)->message.headers.value("x-delivery-count", -1) == 0);  // a fresh copy
}

TEST_CASE("syncbusctl dlq reads the broker from the daemons' config file") {
  Broker b;
  b.Park("c1", amqp::Lane::kChange, "max-attempts");
  b.Park("c2", amqp::Lane::kChange, "undecodable");
  b.WaitReady(amqp::kDeadQueue, 2);
  std::string dir = testing::MakeTempDir("syncbus-dlq");
  std::ofstream(dir + "/syncbus.yaml") << b.vhost.ConfigYaml();
  auto run = [&](std::vector<std::string> args, const std::string& log) {
    args.insert(args.begin(), testing::BinaryDir() + "/ctl/syncbusctl");
    auto p = testing::ChildProcess::Start(args, dir + "/" + log);
    REQUIRE_MESSAGE(p.ok(), p.status().ToString());
    auto code = p->Stop(0, 30s);  // signal 0: just wait for the exit
    REQUIRE(code.has_value());
    return std::make_pair(*code, p->Log());
  };
  auto [code, log] =
      run({"dlq", "list", "-c", dir + "/syncbus.yaml", "--reason", "max-attempts", "--json", "-q"},
          "list.log");
  REQUIRE_MESSAGE(code == 0, log);
  Json listed = Json::parse(log);
  REQUIRE(listed.size() == 1);
  CHECK(listed[0]["cluster"] == "ns1/c1");
  CHECK(listed[0]["attempts"] == 5);

  auto [dry_code, dry_log] =
      run({"dlq", "replay", "-c", dir + "/syncbus.yaml", "--dry-run"}, "dry.log");
  CHECK_MESSAGE(dry_code == 0, dry_log);
  CHECK(dry_log.find("would have replayed 2 of 2 matching") != std::string::npos);
  b.WaitReady(amqp::kDeadQueue, 2);

  auto [replay_code, replay_log] =
      run({"dlq", "replay", "-c", dir + "/syncbus.yaml", "--cluster", "ns1/c1", "--rate", "10"},
          "replay.log");
  CHECK_MESSAGE(replay_code == 0, replay_log);
  CHECK(replay_log.find("replayed 1 of 1 matching") != std::string::npos);
  b.WaitReady(amqp::kDeadQueue, 1);
  b.WaitReady(amqp::WorkQueueName(amqp::Lane::kChange), 1);
}
