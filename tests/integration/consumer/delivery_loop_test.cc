// DeliveryLoop on a real RabbitMQ 3.10: delay tiers measured (a retry returns after its tier's
// TTL), the headers a retry and a dead letter carry, and busy deferral between two loops
// sharing one lease store.
#include "consumer/delivery_loop.h"

#include <mutex>
#include <thread>

#include <doctest/doctest.h>

#include "common/amqp/session_impl.h"
#include "common/bus/sync_message.h"
#include "common/bus/topology.h"
#include "common/time_format.h"
#include "tests/support/test_broker.h"
#include "tests/unit/consumer/fake_object_store.h"

using namespace syncbus;
using namespace syncbus::consumer;
using namespace std::chrono_literals;

namespace {

constexpr std::chrono::milliseconds kTimeout{10000};

struct Runs {
  std::mutex mu;
  std::vector<std::pair<std::string, std::chrono::steady_clock::time_point>> at;
  void Add(const std::string& cluster) {
    std::lock_guard lock(mu);
    at.emplace_back(cluster, std::chrono::steady_clock::now());
  }
  size_t size() {
    std::lock_guard lock(mu);
    return at.size();
  }
};

struct Consumer {
  amqp::RabbitmqSession session;
  prometheus::Registry registry;
  DeliveryLoop loop;

  Consumer(const testing::TestVhost& vhost, const std::string& name, SyncFunction sync,
           ClusterLeases* leases, int max_attempts)
      : session(vhost.Options(name)),
        loop(Options(max_attempts), session, std::move(sync), leases, RealClock(), registry) {
    REQUIRE(session.Connect().ok());
    REQUIRE(session.Declare(amqp::SyncbusTopology(Topology())).ok());
    REQUIRE(loop.Subscribe().ok());
  }
  static amqp::TopologyOptions Topology() {
    amqp::TopologyOptions t;
    t.retry_tiers = {1s, 2s};
    return t;
  }
  static DeliveryOptions Options(int max_attempts) {
    DeliveryOptions o;
    o.prefetch = 4;
    o.workers = 2;
    o.retry = {Topology().retry_tiers, max_attempts};
    return o;
  }
};

void Publish(const testing::TestVhost& vhost, const std::string& cluster) {
  amqp::RabbitmqSession s(vhost.Options("test-publisher"));
  REQUIRE(s.Connect().ok());
  REQUIRE(s.Declare(amqp::SyncbusTopology(Consumer::Topology())).ok());
  SyncRequest r;
  r.cluster_namespace = "ns1";
  r.cluster_name = cluster;
  r.lane = amqp::Lane::kChange;
  r.reason = "syncset-changed";
  r.enqueued_at = FormatRfc3339Millis(RealClock().WallNow());
  REQUIRE(s.Publish({amqp::kWorkExchange, "change",
                     ToAmqpMessage(r, "test", cluster, RealClock().WallNow())},
                    kTimeout)
              .ok());
}

SyncOutcome Failing() {
  SyncOutcome o;
  o.failed_sets = {"set-a"};
  o.transient = true;
  o.detail = "resources[0] ConfigMap default/a: 503 Service Unavailable";
  return o;
}

}  // namespace

TEST_CASE(
    "retries come back after their tier's delay and the last one is parked with its history") {
  auto vhost = testing::TestVhost::Create();
  REQUIRE_MESSAGE(vhost.ok(), vhost.status().ToString());
  Runs runs;
  Consumer c(
      *vhost, "consumer",
      [&](const SyncRequest& r, const SyncFence&) -> Result<SyncOutcome> {
        runs.Add(r.cluster_name);
        return Failing();
      },
      nullptr, 3);
  Publish(*vhost, "c1");
  auto deadline = std::chrono::steady_clock::now() + 30s;
  std::optional<uint32_t> dead;
  while (std::chrono::steady_clock::now() < deadline) {
    REQUIRE(c.loop.Step(20ms).ok());
    if (runs.size() == 3 && c.loop.in_flight() == 0) {
      auto info = c.session.Inspect(amqp::kDeadQueue);
      REQUIRE(info.ok());
      if (info->messages == 1) break;
    }
  }
  REQUIRE(runs.size() == 3);
  double first = std::chrono::duration<double>(runs.at[1].second - runs.at[0].second).count();
  double second = std::chrono::duration<double>(runs.at[2].second - runs.at[1].second).count();
  MESSAGE("tier 1s came back after " << first << " s, tier 2s after " << second << " s");
  CHECK(first >= 0.95);
  CHECK(first < 2.0);
  CHECK(second >= 1.95);
  CHECK(second < 3.0);

  auto got = c.session.Get(amqp::kDeadQueue);
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  const Json& h = (*got)->message.headers;
  CHECK(h[kDeadReasonHeader] == "max-attempts");
  CHECK(h[kAttemptHeader] == 3);
  CHECK(h[kLastErrorHeader].get<std::string>().find("503") != std::string::npos);
  CHECK(h.contains(kFirstFailureHeader));
  CHECK(h.contains(kDeadAtHeader));
  CHECK(h[kClusterHeader] == "ns1/c1");
}

TEST_CASE("a cluster leased by one consumer is deferred by the other without an attempt") {
  auto vhost = testing::TestVhost::Create();
  REQUIRE_MESSAGE(vhost.ok(), vhost.status().ToString());
  testing::FakeObjectStore hub;
  prometheus::Registry registry;
  LeaseOptions a_options, b_options;
  a_options.identity = "consumer-a";
  b_options.identity = "consumer-b";
  ClusterLeases a_leases(a_options, hub, RealClock(), registry);
  ClusterLeases b_leases(b_options, hub, RealClock(), registry);
  // consumer-a is busy with c1 elsewhere: it claimed the cluster's ClusterSyncLease, which the
  // cluster's ClusterSync owns.
  REQUIRE(hub.Create(kube::Collection(kube::resources::kClusterSyncs, "ns1"),
                     {{"metadata", {{"name", "c1"}, {"namespace", "ns1"}, {"uid", "uid-c1"}}}})
              .ok());
  auto held = a_leases.Acquire("ns1", "c1");
  REQUIRE(held.ok());
  Runs runs;
  Consumer b(
      *vhost, "consumer-b",
      [&](const SyncRequest& r, const SyncFence& fence) -> Result<SyncOutcome> {
        if (Status owned = fence(); !owned.ok()) return owned;  // the lease is taken here
        runs.Add(r.cluster_name);
        return SyncOutcome{};
      },
      &b_leases, 3);
  Publish(*vhost, "c1");
  auto started = std::chrono::steady_clock::now();
  // Deferred while a holds it (several 1 s rounds), applied once a releases it.
  while (std::chrono::steady_clock::now() < started + 2500ms) REQUIRE(b.loop.Step(20ms).ok());
  CHECK(runs.size() == 0);
  a_leases.Release(*held);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (runs.size() == 0 && std::chrono::steady_clock::now() < deadline)
    REQUIRE(b.loop.Step(20ms).ok());
  while (b.loop.in_flight() > 0 && std::chrono::steady_clock::now() < deadline)
    REQUIRE(b.loop.Step(20ms).ok());
  CHECK(runs.size() == 1);
  auto dead = b.session.Inspect(amqp::kDeadQueue);
  REQUIRE(dead.ok());
  CHECK(dead->messages == 0);
}
