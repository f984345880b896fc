// LeaderElector against the in-process Kubernetes simulator (real REST on a coordination.k8s.io/v1
// Lease), with time driven by a FakeClock: nothing sleeps.
#include "publisher/leader_elector.h"

#include <doctest/doctest.h>

#include "common/kube/client_impl.h"
#include "tests/fakes/common/fake_clock.h"
#include "tests/fakes/common/http/in_process_transport.h"
#include "tests/kubesim/sim_simulation.h"

using namespace syncbus;
using namespace syncbus::publisher;
using namespace std::chrono_literals;

namespace {

struct Hub {
  std::unique_ptr<kubesim::Simulation> sim;
  std::shared_ptr<fakes::InProcessTransport> transport;
  std::unique_ptr<kube::ClientImpl> client;
  FakeClock clock;
  LeaderElectionConfig config;

  Hub() {
    auto created = kubesim::Simulation::Create({});
    REQUIRE_MESSAGE(created.ok(), created.status().ToString());
    sim = std::move(*created);
    transport = std::make_shared<fakes::InProcessTransport>(*sim);
    kube::ClusterConfig cc;
    cc.server = "http://hub.invalid";
    client = std::make_unique<kube::ClientImpl>(cc, transport);
    config.ns = "syncbus";
    config.name = "syncbus-publisher";
    REQUIRE(client
                ->Create(kube::Collection(kube::resources::kNamespaces),
                         Json{{"apiVersion", "v1"},
                              {"kind", "Namespace"},
                              {"metadata", {{"name", "syncbus"}}}})
                .ok());
  }
  LeaderElector Elector(const std::string& id) { return LeaderElector(*client, config, id, clock); }
  Json Lease() {
    auto got = client->Get(kube::Object(kube::resources::kLeases, config.ns, config.name));
    REQUIRE_MESSAGE(got.ok(), got.status().ToString());
    return *got;
  }
  void HubDown(bool down) {
    kubesim::FaultSpec spec;
    spec.error_rate = down ? 1.0 : 0.0;
    REQUIRE(sim->faults().Set("hub", spec).ok());
  }
};

}  // namespace

TEST_CASE("leader election: the first replica creates the Lease and renews it") {
  Hub hub;
  auto a = hub.Elector("a");
  CHECK_FALSE(a.is_leader());
  CHECK(a.Tick());
  Json lease = hub.Lease();
  CHECK(lease["spec"]["holderIdentity"] == "a");
  CHECK(lease["spec"]["leaseDurationSeconds"] == 10);
  std::string first_renew = lease["spec"]["renewTime"];
  hub.clock.Advance(2s);
  CHECK(a.Tick());
  CHECK(hub.Lease()["spec"]["renewTime"] != first_renew);
  CHECK(hub.Lease()["spec"]["holderIdentity"] == "a");
  CHECK(a.transitions() == 1);
}

TEST_CASE("leader election: a standby waits out the whole lease, then takes over") {
  Hub hub;
  auto a = hub.Elector("a");
  auto b = hub.Elector("b");
  REQUIRE(a.Tick());
  CHECK_FALSE(b.Tick());
  // While a keeps renewing, b never takes over, however long it waits.
  for (int i = 0; i < 20; ++i) {
    hub.clock.Advance(2s);
    CHECK(a.Tick());
    CHECK_FALSE(b.Tick());
  }
  // a stops renewing (killed). b measures the lease on its own clock from when it last saw the
  // record change (just now): not before 10 s.
  hub.clock.Advance(2s);
  CHECK_FALSE(b.Tick());
  hub.clock.Advance(7s);
  CHECK_FALSE(b.Tick());
  hub.clock.Advance(2s);
  CHECK(b.Tick());  // 11 s without a change: expired
  Json lease = hub.Lease();
  CHECK(lease["spec"]["holderIdentity"] == "b");
  CHECK(lease["spec"]["leaseTransitions"] == 1);
  // The old leader comes back: it sees b holding a live lease and stays a follower.
  CHECK_FALSE(a.Tick());
  CHECK_FALSE(a.is_leader());
}

TEST_CASE("leader election: a standby's next attempt is timed to the lease's lapse") {
  Hub hub;
  auto a = hub.Elector("a");
  auto b = hub.Elector("b");
  CHECK(b.NextAttemptIn() == 2s);  // nothing observed yet: retryPeriod
  REQUIRE(a.Tick());
  CHECK(a.NextAttemptIn() == 2s);  // the leader renews every retryPeriod
  CHECK_FALSE(b.Tick());           // sees a's record now: it lapses in 10 s
  CHECK(b.NextAttemptIn() == 2s);
  // a dies. b's attempts come every 2 s until the last one before the lapse, then one just
  // after it instead of up to 2 s later.
  hub.clock.Advance(8500ms);
  CHECK_FALSE(b.Tick());
  CHECK(b.NextAttemptIn() == 1501ms);
  hub.clock.Advance(b.NextAttemptIn());
  CHECK(b.Tick());
  CHECK(b.NextAttemptIn() == 2s);
}

TEST_CASE("leader election: a leader that cannot renew stops leading before its lease can expire") {
  Hub hub;
  auto a = hub.Elector("a");
  auto b = hub.Elector("b");
  REQUIRE(a.Tick());
  CHECK_FALSE(b.Tick());  // b saw the record at t=0
  hub.HubDown(true);
  for (int i = 0; i < 3; ++i) {
    hub.clock.Advance(2s);
    a.Tick();
    CHECK(a.is_leader());  // up to t=6 s: still within the 7 s renew deadline
  }
  hub.clock.Advance(1s + 1ms);
  a.Tick();
  CHECK_FALSE(a.is_leader());  // t=7 s: no renewal for renewDeadline -> not leader
  // Nobody else could have taken over yet: the lease is valid until 10 s after b saw it.
  hub.HubDown(false);
  CHECK_FALSE(b.Tick());
  hub.clock.Advance(3s);
  CHECK(b.Tick());
  CHECK_FALSE(a.Tick());
}

TEST_CASE("leader election: a lease that cannot be created says why, until it can") {
  Hub hub;
  hub.config.ns = "missing";  // its namespace does not exist: every create is refused
  auto a = hub.Elector("a");
  CHECK_FALSE(a.Tick());
  CHECK(a.problem().find("cannot create the lease missing/syncbus-publisher") != std::string::npos);
  CHECK(a.problem().find("missing") != std::string::npos);
  hub.clock.Advance(2s);
  CHECK_FALSE(a.Tick());
  CHECK_FALSE(a.problem().empty());
  REQUIRE(hub.client
              ->Create(kube::Collection(kube::resources::kNamespaces),
                       Json{{"apiVersion", "v1"},
                            {"kind", "Namespace"},
                            {"metadata", {{"name", "missing"}}}})
              .ok());
  hub.clock.Advance(2s);
  CHECK(a.Tick());
  CHECK(a.problem().empty());
}

TEST_CASE("leader election: an unreadable lease is a problem until an answer clears it") {
  Hub hub;
  auto a = hub.Elector("a");
  hub.HubDown(true);
  CHECK_FALSE(a.Tick());
  CHECK(a.problem().find("cannot read the lease syncbus/syncbus-publisher") != std::string::npos);
  hub.HubDown(false);
  hub.clock.Advance(2s);
  CHECK(a.Tick());
  CHECK(a.problem().empty());
}

TEST_CASE("leader election: release hands over at once") {
  Hub hub;
  auto a = hub.Elector("a");
  auto b = hub.Elector("b");
  REQUIRE(a.Tick());
  CHECK_FALSE(b.Tick());
  REQUIRE(a.Release().ok());
  CHECK_FALSE(a.is_leader());
  CHECK(hub.Lease()["spec"]["holderIdentity"] == "");
  CHECK(b.Tick());  // no waiting: the holder is empty
  CHECK(hub.Lease()["spec"]["holderIdentity"] == "b");
  // Releasing a lease someone else holds changes nothing.
  REQUIRE(a.Release().ok());
  CHECK(hub.Lease()["spec"]["holderIdentity"] == "b");
}

TEST_CASE(
    "leader election: a leader renews with one write, and a lease written by another is read") {
  Hub hub;
  auto a = hub.Elector("a");
  REQUIRE(a.Tick());
  kubesim::ApiServer& api = hub.sim->hub();
  for (int i = 0; i < 5; ++i) {
    hub.clock.Advance(2s);
    uint64_t before = api.stats().requests;
    CHECK(a.Tick());
    CHECK(api.stats().requests == before + 1);  // the Update, no Get
  }
  // Another writes the lease (an operator hands it to b): a's renewal is refused (409), a reads
  // the lease, sees b live, and stops leading at once.
  Json taken = hub.Lease();
  taken["spec"]["holderIdentity"] = "b";
  REQUIRE(
      hub.client
          ->Update(kube::Object(kube::resources::kLeases, hub.config.ns, hub.config.name), taken)
          .ok());
  hub.clock.Advance(2s);
  CHECK_FALSE(a.Tick());
  CHECK_FALSE(a.is_leader());
  CHECK(hub.Lease()["spec"]["holderIdentity"] == "b");
}
