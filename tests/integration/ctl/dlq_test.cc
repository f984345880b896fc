// `syncbusctl dlq` on each RabbitMQ version: listing (and status, trace) read the dead-letter
// index and leave the queue exactly as it was, 50 times over and beside a replay; replay confirms
// before it acks and resets the history (also of a message the broker parked on its delivery
// limit); purge; reindex; and the binary reading its broker connection from the daemons' config.
#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include <doctest/doctest.h>

#include "common/amqp/session_impl.h"
#include "common/bus/retry_policy.h"
#include "common/bus/sync_message.h"
#include "common/bus/topology.h"
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
    REQUIRE(vhost.SetUpSyncbus(session, t).ok());
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
    amqp::Publication p =
        NextAttempt(d, {{1s, 2s}, 5}, "503 Service Unavailable", false, RealClock().WallNow());
    if (reason != "max-attempts") p = ParkedCopy(d, reason, "bad body", RealClock().WallNow());
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
  std::vector<DeadLetter> Listed(const DeadLetterFilter& filter = {}) {
    auto listed = ListDeadLetters(session, filter, 0, RealClock());
    REQUIRE_MESSAGE(listed.ok(), listed.status().ToString());
    return listed->matched;
  }
};

// What a consumer of the queue gets, in order: message id, redelivered, the broker's count.
struct Taken {
  std::string id;
  bool redelivered = false;
  int64_t delivery_count = -1;  // -1: no x-delivery-count header
  bool operator==(const Taken&) const = default;
};
std::string Describe(const std::vector<Taken>& taken) {
  std::string out;
  for (const Taken& t : taken) {
    out += t.id + (t.redelivered ? " redelivered" : "") + " count " +
           std::to_string(t.delivery_count) + "; ";
  }
  return out;
}

// Takes every message of syncbus.dead (acked), as the consumer of a replay would see them.
std::vector<Taken> TakeAll(amqp::Session& session) {
  std::vector<Taken> out;
  for (;;) {
    auto got = session.Get(amqp::kDeadQueue);
    REQUIRE_MESSAGE(got.ok(), got.status().ToString());
    if (!got->has_value()) return out;
    const amqp::Delivery& d = **got;
    out.push_back({d.message.message_id, d.redelivered,
                   d.message.headers.value("x-delivery-count", int64_t{-1})});
    REQUIRE(session.Ack(d.delivery_tag).ok());
  }
}

}  // namespace

TEST_CASE(
    "50 inspections of a dead-letter queue holding 10 parked requests leave the same 10, in order, "
    "with unchanged counts") {
  Broker b;
  for (int i = 0; i < 10; ++i) b.Park("c" + std::to_string(i), amqp::Lane::kChange, "max-attempts");
  b.WaitReady(amqp::kDeadQueue, 10);
  std::vector<std::string> parked;
  for (int i = 0; i < 10; ++i) parked.push_back("ns1/c" + std::to_string(i));
  // `dlq list` (also --json and filtered, as status CLUSTER and trace CLUSTER read it) and the
  // fleet-wide listing of `status`, in turn.
  for (int i = 0; i < 50; ++i) {
    CAPTURE(i);
    if (i % 5 == 0) {
      DlqOptions list;
      list.output = i % 10 == 0 ? OutputFormat::kJson : OutputFormat::kYaml;
      std::ostringstream out, err;
      std::istringstream in;
      REQUIRE(RunDlq(list, b.session, RealClock(), in, out, err) == 0);
      CHECK(err.str().find("note") == std::string::npos);
      CHECK(out.str().find("ns1/c9") != std::string::npos);
    } else if (i % 5 == 1) {
      DeadLetterFilter one;
      one.cluster = "c" + std::to_string(i % 10);
      auto listed = b.Listed(one);
      REQUIRE(listed.size() == 1);
      CHECK(listed[0].cluster == "ns1/" + one.cluster);
    } else {
      std::vector<std::string> clusters;
      for (const auto& d : b.Listed()) clusters.push_back(d.cluster);
      REQUIRE(clusters == parked);
    }
  }
  std::vector<Taken> expected;
  for (int i = 0; i < 10; ++i) expected.push_back({"c" + std::to_string(i), false, -1});
  // Never delivered before: not redelivered, no count (RabbitMQ 3.10 adds none on a first get
  // either when nothing was returned).
  std::vector<Taken> taken = TakeAll(b.session);
  for (auto& t : taken) {
    if (t.delivery_count == 0) t.delivery_count = -1;
  }
  CHECK_MESSAGE(taken == expected, Describe(taken));
}

TEST_CASE("a replay beside a stream of inspections sees and takes every parked request") {
  Broker b;
  for (int i = 0; i < 10; ++i) b.Park("c" + std::to_string(i), amqp::Lane::kChange, "max-attempts");
  b.WaitReady(amqp::kDeadQueue, 10);
  std::atomic<bool> stop{false};
  std::atomic<int> inspections{0}, failures{0};
  std::thread inspector([&] {
    amqp::RabbitmqSession session(b.vhost.Options("inspector"));
    if (!session.Connect().ok()) {
      ++failures;
      return;
    }
    while (!stop.load()) {
      auto listed = ListDeadLetters(session, {}, 0, RealClock());
      if (!listed.ok()) ++failures;
      ++inspections;
    }
  });
  while (inspections.load() < 3) std::this_thread::sleep_for(10ms);
  DlqScanOptions replay;
  replay.action = DlqAction::kReplay;
  replay.record_removals = true;
  replay.rate_per_second = 20;  // long enough for inspections to run in between
  auto replayed = ScanDeadLetters(b.session, replay, RealClock());
  stop = true;
  inspector.join();
  REQUIRE(replayed.ok());
  CHECK(replayed->error.ok());
  CHECK(replayed->progress.scanned == 10);
  CHECK(replayed->progress.done == 10);
  CHECK(failures.load() == 0);
  MESSAGE("inspections during the replay: " << inspections.load());
  b.WaitReady(amqp::kDeadQueue, 0);
  b.WaitReady(amqp::WorkQueueName(amqp::Lane::kChange), 10);
  CHECK(b.Listed().empty());
}

TEST_CASE(
    "list reads the index and requeues nothing, replay moves only the matches with attempts "
    "reset") {
  Broker b;
  b.Park("c1", amqp::Lane::kChange, "max-attempts");
  b.Park("c2", amqp::Lane::kResync, "max-attempts");
  b.Park("c3", amqp::Lane::kChange, "undecodable");
  b.WaitReady(amqp::kDeadQueue, 3);

  auto listed = b.Listed();
  REQUIRE(listed.size() == 3);
  CHECK(listed[0].cluster == "ns1/c1");
  CHECK(listed[0].attempts == 5);
  CHECK(listed[0].reason == "max-attempts");
  CHECK_FALSE(listed[0].by_broker);
  CHECK(listed[0].dead_at.has_value());
  b.WaitReady(amqp::kDeadQueue, 3);

  DlqScanOptions replay;
  replay.action = DlqAction::kReplay;
  replay.record_removals = true;
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
  listed = b.Listed();
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].cluster == "ns1/c3");

  DlqOptions purge;
  purge.action = DlqAction::kPurge;
  purge.yes = true;
  std::ostringstream out, err;
  std::istringstream in;
  CHECK(RunDlq(purge, b.session, RealClock(), in, out, err) == 0);
  b.WaitReady(amqp::kDeadQueue, 0);
  CHECK(b.Listed().empty());
}

TEST_CASE(
    "reindex lists what was parked before the index existed, in order, and keeps every message") {
  Broker b;
  b.Park("c1", amqp::Lane::kChange, "max-attempts");
  // Straight into the queue, as before the index existed.
  amqp::Publication old{"", amqp::kDeadQueue, b.Request("old", amqp::Lane::kChange)};
  REQUIRE(b.session.Publish(old, kTimeout).ok());
  b.Park("c2", amqp::Lane::kChange, "max-attempts");
  b.WaitReady(amqp::kDeadQueue, 3);
  auto listed = ListDeadLetters(b.session, {}, 0, RealClock());
  REQUIRE(listed.ok());
  CHECK(listed->listed == 2);
  CHECK(listed->Discrepancy().find("reindex") != std::string::npos);

  DlqOptions reindex;
  reindex.action = DlqAction::kReindex;
  std::ostringstream out, err;
  std::istringstream in;
  REQUIRE_MESSAGE(RunDlq(reindex, b.session, RealClock(), in, out, err) == 0, err.str());
  b.WaitReady(amqp::kDeadQueue, 3);
  std::vector<std::string> clusters;
  for (const auto& d : b.Listed()) clusters.push_back(d.cluster);
  CHECK(clusters == std::vector<std::string>{"ns1/c1", "ns1/old", "ns1/c2"});
  std::vector<std::string> ids;
  for (const auto& t : TakeAll(b.session)) ids.push_back(t.id);
  CHECK(ids == std::vector<std::string>{"c1", "old", "c2"});
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

  DeadLetterFilter poison;
  poison.reason = "delivery_limit";
  // The broker dead-letters into the queue and the index on its own time.
  std::vector<DeadLetter> listed;
  for (auto deadline = std::chrono::steady_clock::now() + 20s;
       (listed = b.Listed(poison)).empty() && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(200ms);
  }
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].cluster == "ns1/poison");
  CHECK(listed[0].by_broker);
  // The index's copy on RabbitMQ 3.10 has no x-death array (a stream drops it), so no time.
  if (b.vhost.env().version != "3.10") CHECK(listed[0].dead_at.has_value());
  b.WaitReady(amqp::kDeadQueue, 1);

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
  // A fresh copy: never returned (RabbitMQ 3.10 says 0 on a get, later versions nothing).
  CHECK((*back)->message.headers.value("x-delivery-count", 0) == 0);
  CHECK_FALSE((*back)->redelivered);
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
