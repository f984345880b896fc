// Two syncbus-publisher processes with leader election against the syncbus-kubesim process and
// the real broker: only the leader publishes; SIGKILL on the leader hands over to the standby
// within the lease; SIGTERM releases the lease and exits 0.
#include <thread>

#include <doctest/doctest.h>
#include <signal.h>
#include <stdlib.h>

#include "common/amqp/session_impl.h"
#include "common/bus/sync_message.h"
#include "common/bus/topology.h"
#include "common/kube/client_impl.h"
#include "tests/support/process_rig.h"
#include "tests/support/wait.h"

using namespace syncbus;
using namespace syncbus::testing;
using namespace std::chrono_literals;

namespace {

constexpr int kClusters = 6;
constexpr auto kLease = 5s;

struct Failover : ProcessRig {
  Failover() : ProcessRig("syncbus-failover") {}

  std::unique_ptr<amqp::RabbitmqSession> reader;

  // The simulator (its hub has the namespace syncbus, where the election lease lives), the
  // config and a reader of the queues.
  void Start() {
    StartSimulator(
        {"--clusters", std::to_string(kClusters), "--selector-syncsets", "1", "--resources", "1"});
    WriteConfig(
        "log: {level: debug}\n"
        "admin: {listen: off}\n"
        "publisher: {leaderElection: {leaseDuration: 5s, renewDeadline: 3s, retryPeriod: "
        "500ms}}\n");
    reader = std::make_unique<amqp::RabbitmqSession>(vhost.Options("reader"));
  }

  ChildProcess StartPublisher(const std::string& name) {
    setenv("POD_NAME", name.c_str(), 1);  // the election identity's prefix
    ChildProcess p = StartDaemon("publisher/syncbus-publisher", {}, name + ".log");
    unsetenv("POD_NAME");
    return p;
  }

  std::string Holder() {
    auto lease = hub->Get(kube::Object(kube::resources::kLeases, "syncbus", "syncbus-publisher"));
    if (!lease.ok()) return "";
    return (*lease)["spec"].value("holderIdentity", "");
  }

  // Requests taken off both work queues.
  std::vector<SyncRequest> Take() {
    std::vector<SyncRequest> out;
    if (!reader->connected() && !reader->Connect().ok()) return out;
    for (auto lane : {amqp::Lane::kChange, amqp::Lane::kResync}) {
      while (true) {
        auto d = reader->Get(amqp::WorkQueueName(lane));
        if (!d.ok() || !d->has_value()) break;
        auto r = DecodeSyncRequest((*d)->message.body);
        REQUIRE(r.ok());
        out.push_back(*r);
        REQUIRE(reader->Ack((*d)->delivery_tag).ok());
      }
    }
    return out;
  }
};

}  // namespace

TEST_CASE(
    "publisher failover: SIGKILL on the leader hands over within the lease, SIGTERM releases it") {
  Failover f;
  f.Start();
  ChildProcess a = f.StartPublisher("pub-a");
  REQUIRE_MESSAGE(WaitFor([&] { return f.Holder().rfind("pub-a", 0) == 0; }, 30s), a.Log());
  ChildProcess b = f.StartPublisher("pub-b");
  // The leader's startup round: every cluster once (nothing has a ClusterSync yet).
  std::vector<SyncRequest> first;
  REQUIRE_MESSAGE(WaitFor(
                      [&] {
                        for (auto& r : f.Take()) first.push_back(r);
                        return first.size() >= static_cast<size_t>(kClusters);
                      },
                      30s),
                  a.Log());
  std::this_thread::sleep_for(2s);  // the standby, warm and waiting, publishes nothing
  CHECK(f.Take().empty());
  CHECK(first.size() == static_cast<size_t>(kClusters));
  CHECK(f.Holder().rfind("pub-a", 0) == 0);

  auto killed_at = std::chrono::steady_clock::now();
  REQUIRE(a.Stop(SIGKILL, 5s).has_value());
  // The standby takes over and, as a new leader, enqueues what is out of sync.
  std::vector<SyncRequest> second;
  bool handed_over = WaitFor(
      [&] {
        for (auto& r : f.Take()) second.push_back(r);
        return !second.empty();
      },
      30s);
  auto handover = std::chrono::steady_clock::now() - killed_at;
  REQUIRE_MESSAGE(handed_over, b.Log());
  MESSAGE("handover after SIGKILL: "
          << std::chrono::duration_cast<std::chrono::milliseconds>(handover).count() << " ms");
  // The standby measures the lease from when it last saw it renewed (at most one retry period
  // after the kill), then needs one retry period to notice: lease + 2 retry periods, and a
  // moment to publish.
  CHECK(handover <= kLease + 2 * 500ms + 2s);
  CHECK(f.Holder().rfind("pub-b", 0) == 0);
  CHECK(WaitFor(
      [&] {
        for (auto& r : f.Take()) second.push_back(r);
        return second.size() >= static_cast<size_t>(kClusters);
      },
      10s));
  for (const auto& r : second) CHECK(r.reason == "startup");

  auto code = b.Stop(SIGTERM, 20s);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  CHECK(f.Holder().empty());  // released: a successor would not wait out the lease
}
