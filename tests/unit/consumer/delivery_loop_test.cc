#include "consumer/delivery_loop.h"

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <doctest/doctest.h>

#include "common/bus/sync_message.h"
#include "common/bus/topology.h"
#include "common/bus/trace_event.h"
#include "tests/fakes/common/amqp/fake_session.h"
#include "tests/fakes/common/fake_clock.h"
#include "tests/support/wait.h"
#include "tests/unit/consumer/fake_object_store.h"

using namespace syncbus;
using namespace syncbus::consumer;
using namespace std::chrono_literals;

namespace {

SyncRequest Request(const std::string& name, amqp::Lane lane = amqp::Lane::kChange) {
  SyncRequest r;
  r.cluster_namespace = "ns1";
  r.cluster_name = name;
  r.revision = "rev-1";
  r.lane = lane;
  r.reason = "syncset-changed";
  r.enqueued_at = "2026-01-01T00:00:00.000Z";
  return r;
}

SyncOutcome Applied() {
  SyncOutcome o;
  o.applies = 3;
  return o;
}

SyncOutcome FailedSets(bool transient) {
  SyncOutcome o;
  o.failed_sets = {"set-a"};
  o.transient = transient;
  o.detail = transient ? "resources[0] ConfigMap default/a: 503 Service Unavailable"
                       : "resources[0] ConfigMap default/a: 422 Invalid";
  return o;
}

// Runs scripted outcomes per cluster (the last one repeats) and records what ran.
struct Script {
  std::mutex mu;
  std::map<std::string, std::vector<Result<SyncOutcome>>> outcomes;
  std::vector<std::string> ran;
  std::function<void(const SyncRequest&)> during;  // runs inside the "sync"
  int fence_failures = 0;
  kube::Client* hub = nullptr;  // where the cluster's ClusterSync is made before the claim

  SyncFunction Function() {
    return [this](const SyncRequest& r, const SyncFence& fence) -> Result<SyncOutcome> {
      {
        std::lock_guard lock(mu);
        ran.push_back(r.cluster_name);
      }
      // As the real syncer: the cluster's ClusterSync is made, then the first fence call, before
      // any other write, claims the cluster (on its ClusterSyncLease, which the ClusterSync owns).
      if (fence && hub != nullptr) {
        (void)hub->Create(kube::Collection(kube::resources::kClusterSyncs, r.cluster_namespace),
                          {{"metadata",
                            {{"name", r.cluster_name},
                             {"namespace", r.cluster_namespace},
                             {"uid", "uid-" + r.cluster_name}}}});
      }
      if (fence) {
        if (Status claimed = fence(); !claimed.ok()) {
          std::lock_guard lock(mu);
          ++fence_failures;
          return claimed;
        }
      }
      if (during) during(r);
      std::lock_guard lock(mu);
      if (fence && !fence().ok()) {
        ++fence_failures;
        return fence();
      }
      auto& list = outcomes[r.cluster_name];
      if (list.empty()) return Applied();
      Result<SyncOutcome> next = list.front();
      if (list.size() > 1) list.erase(list.begin());
      return next;
    };
  }
  size_t runs() {
    std::lock_guard lock(mu);
    return ran.size();
  }
};

// Keeps what the loop tells the Event sink.
struct RecordedEvents final : SyncEventSink {
  std::mutex mu;
  std::vector<SyncEvent> events;
  void Record(SyncEvent event) override {
    std::lock_guard lock(mu);
    events.push_back(std::move(event));
  }
  std::vector<SyncEvent> Of(const std::string& cluster) {
    std::lock_guard lock(mu);
    std::vector<SyncEvent> out;
    for (const SyncEvent& e : events) {
      if (e.name == cluster) out.push_back(e);
    }
    return out;
  }
};

// Holds the syncs that wait on it until it is opened (from the test's thread, or when it goes,
// so that a failed check does not leave workers blocked).
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;

  void Wait() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return open; });
  }
  void Open() {
    {
      std::lock_guard lock(mu);
      open = true;
    }
    cv.notify_all();
  }
  ~Gate() { Open(); }
};

struct Harness {
  FakeClock clock;
  amqp::FakeBroker broker{clock};
  amqp::FakeSession publisher{broker, "publisher"};
  amqp::FakeSession session{broker, "consumer"};
  syncbus::testing::FakeObjectStore hub;
  prometheus::Registry registry;
  std::unique_ptr<ClusterLeases> leases;
  Script script;
  TraceRecorder trace{"consumer-1", registry};
  RecordedEvents events;
  std::unique_ptr<DeliveryLoop> loop;
  amqp::TopologyOptions topology;

  std::mutex no_write_mu;
  std::map<std::string, std::string> no_write;  // cluster name -> settled_already's answer

  // The cluster's ClusterSync, as its first sync would have made it (a claim needs one).
  void MakeClusterSync(const std::string& name) {
    (void)hub.Create(
        kube::Collection(kube::resources::kClusterSyncs, "ns1"),
        {{"metadata", {{"name", name}, {"namespace", "ns1"}, {"uid", "uid-" + name}}}});
  }

  explicit Harness(int workers = 4, bool with_leases = true) {
    topology.retry_tiers = {1s, 2s, 4s};
    REQUIRE(publisher.Connect().ok());
    REQUIRE(publisher.Declare(amqp::SyncbusTopology(topology)).ok());
    broker.SetPolicies(amqp::SyncbusTopology(topology).policies);
    REQUIRE(session.Connect().ok());
    script.hub = &hub;
    if (with_leases) {
      LeaseOptions o;
      o.identity = "consumer-1";
      leases = std::make_unique<ClusterLeases>(o, hub, clock, registry);
    }
    DeliveryOptions options;
    options.prefetch = 10;
    options.workers = workers;
    options.retry = {topology.retry_tiers, 4};
    options.delivery_limit = 2;
    options.trace = &trace;
    options.events = &events;
    options.settled_already = [this](const SyncRequest& r) {
      std::lock_guard lock(no_write_mu);
      auto it = no_write.find(r.cluster_name);
      return it == no_write.end() ? std::string() : it->second;
    };
    loop = std::make_unique<DeliveryLoop>(options, session, script.Function(), leases.get(), clock,
                                          registry);
    REQUIRE(loop->Subscribe().ok());
  }

  void Send(const SyncRequest& r, const std::string& id = "m") {
    amqp::Publication p{amqp::kWorkExchange, amqp::LaneName(r.lane),
                        ToAmqpMessage(r, "syncbus-publisher", id, clock.WallNow())};
    REQUIRE(publisher.Publish(p, 1s).ok());
  }
  // A request whose earlier copies ended unsettled `unsettled` times, back from being held back
  // for that.
  void SendSuspect(const SyncRequest& r, int unsettled) {
    amqp::Publication p{amqp::kWorkExchange, amqp::LaneName(r.lane),
                        ToAmqpMessage(r, "syncbus-publisher", "suspect", clock.WallNow())};
    p.message.headers[kUnsettledHeader] = unsettled;
    p.message.headers[kQuarantinedHeader] = unsettled;
    REQUIRE(publisher.Publish(p, 1s).ok());
  }
  void SendRaw(const std::string& body) {
    amqp::Publication p{amqp::kWorkExchange, "change", {}};
    p.message.body = body;
    REQUIRE(publisher.Publish(p, 1s).ok());
  }

  // Steps until nothing is queued, running or unsettled (workers are real threads).
  // Steps the loop until `done` (the workers are real threads), at most 10 s.
  void StepUntil(const std::function<bool()>& done) {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!done() && std::chrono::steady_clock::now() < deadline) REQUIRE(loop->Step(0ms).ok());
  }
  void StepUntilIdle() {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
      REQUIRE(loop->Step(0ms).ok());
      bool queued = !broker.ReadyMessages(amqp::WorkQueueName(amqp::Lane::kChange)).empty() ||
                    !broker.ReadyMessages(amqp::WorkQueueName(amqp::Lane::kResync)).empty();
      if (loop->in_flight() == 0 && !queued && Unacked() == 0) return;
      std::this_thread::yield();
    }
    FAIL("the delivery loop did not settle");
  }
  size_t Unacked() {
    return broker.UnackedCount(amqp::WorkQueueName(amqp::Lane::kChange)) +
           broker.UnackedCount(amqp::WorkQueueName(amqp::Lane::kResync));
  }
  double Counter(const std::string& family, const std::map<std::string, std::string>& labels) {
    for (const auto& f : registry.Collect()) {
      if (f.name != family) continue;
      for (const auto& m : f.metric) {
        std::map<std::string, std::string> got;
        for (const auto& l : m.label) got[l.name] = l.value;
        bool match = true;
        for (const auto& [k, v] : labels) match = match && got[k] == v;
        if (match) return m.counter.value;
      }
    }
    return 0;
  }
  double Gauge(const std::string& family) {
    for (const auto& f : registry.Collect()) {
      if (f.name == family && !f.metric.empty()) return f.metric[0].gauge.value;
    }
    FAIL(family << " is not registered");
    return -1;
  }
  std::vector<amqp::Message> Retrying(const std::string& tier) {
    return broker.ReadyMessages("syncbus.retry." + tier);
  }
  // Steps the loop until the first sync has run and its worker has handed the result over (it
  // lowers the busy gauge and does that under one lock): the next Step settles it.
  void WaitForFirstResult() {
    StepUntil([&] { return script.runs() > 0; });
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (Gauge("syncbus_consumer_workers_busy") > 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
  }
  // Request c1 fails its first sync (then applies) while syncbus.retry.1s refuses every publish:
  // once this returns, its refused retry is kept (Step said nothing of it). Returns the tier's
  // topology as it was (delete the tier first).
  amqp::Topology FailWhileTierRefuses() {
    amqp::Topology restored = RefuseTier("syncbus.retry.1s");
    script.outcomes["c1"] = {FailedSets(true), Applied()};
    Send(Request("c1"));
    WaitForFirstResult();
    REQUIRE(loop->Step(0ms).ok());
    return restored;
  }
  // Declares delay queue `tier` again so that it refuses every publish; returns the topology
  // that declares it as before (delete it first).
  amqp::Topology RefuseTier(const std::string& tier) {
    const amqp::Topology full = amqp::SyncbusTopology(topology);
    amqp::Topology refusing, restored;
    for (const auto& q : full.queues) {
      if (q.name != tier) continue;
      restored.queues.push_back(q);
      amqp::QueueSpec spec = q;
      spec.arguments.erase("x-queue-type");
      spec.arguments["x-max-length"] = 0;
      spec.arguments["x-overflow"] = "reject-publish";
      refusing.queues.push_back(spec);
    }
    for (const auto& b : full.bindings) {
      if (b.destination != tier) continue;
      restored.bindings.push_back(b);
      refusing.bindings.push_back(b);
    }
    REQUIRE(restored.queues.size() == 1);
    broker.DeleteQueue(tier);
    REQUIRE(publisher.Declare(refusing).ok());
    return restored;
  }
  std::vector<amqp::Message> Dead() { return broker.ReadyMessages(amqp::kDeadQueue); }
  // The trace events recorded so far, in order: publishes what is buffered on a connection of its
  // own, as the consumer's TraceFlusher does (the loop publishes none itself).
  std::vector<TraceEvent> Traced() {
    auto flushed = trace.Flush(publisher);
    REQUIRE_MESSAGE(flushed.ok(), flushed.status().message());
    std::vector<TraceEvent> out;
    for (const auto& m : broker.ReadyMessages(amqp::kTraceQueue)) {
      auto decoded = DecodeTraceMessage(m.body);
      REQUIRE_MESSAGE(decoded.ok(), decoded.status().message());
      REQUIRE(decoded->invalid == 0);
      for (auto& e : decoded->events) out.push_back(std::move(e));
    }
    return out;
  }
};

// Holds every sync of the harness's script until the test releases its cluster, and records
// which run and in which order they started.
struct HeldSyncs {
  Harness& h;
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::string> open, running;  // guarded by mu (read them in StepUntil's predicate)
  std::vector<std::string> started;
  bool all_open = false;

  explicit HeldSyncs(Harness& harness) : h(harness) {
    h.script.during = [this](const SyncRequest& r) {
      std::unique_lock lock(mu);
      running.insert(r.cluster_name);
      started.push_back(r.cluster_name);
      cv.notify_all();
      cv.wait(lock, [&] { return all_open || open.count(r.cluster_name) > 0; });
      running.erase(r.cluster_name);
    };
  }
  // Releases every sync and stops the workers while this still exists, so that a failed check
  // leaves no worker blocked or calling into it.
  ~HeldSyncs() {
    {
      std::lock_guard lock(mu);
      all_open = true;
    }
    cv.notify_all();
    h.loop.reset();
  }
  void Release(const std::string& name) {
    std::lock_guard lock(mu);
    open.insert(name);
    cv.notify_all();
  }
  // Steps the loop until `done` (called with mu held), at most 10 s.
  void StepUntil(const std::function<bool()>& done) {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
      REQUIRE(h.loop->Step(0ms).ok());
      std::lock_guard lock(mu);
      if (done()) return;
    }
    FAIL("timed out");
  }
  std::set<std::string> Running() {
    std::lock_guard lock(mu);
    return running;
  }
  std::vector<std::string> Started() {
    std::lock_guard lock(mu);
    return started;
  }
};

}  // namespace

TEST_CASE(
    "a delivery is acked once its sync succeeded and nothing is left in any queue [concurrent]") {
  Harness h;
  for (const char* c : {"c1", "c2", "c3"}) h.Send(Request(c));
  h.StepUntilIdle();
  CHECK(h.script.runs() == 3);
  CHECK(h.Unacked() == 0);
  CHECK(h.Retrying("1s").empty());
  CHECK(h.Dead().empty());
  CHECK(h.Counter("syncbus_consumer_deliveries_total",
                  {{"lane", "change"}, {"outcome", "applied"}}) == 3);
  CHECK(h.Counter("syncbus_consumer_leases_total", {{"event", "acquired"}}) == 3);
  CHECK(h.leases->held() == 0);  // released after each sync
}

TEST_CASE("transient failures walk the delay tiers, then park with headers saying why") {
  Harness h;
  h.script.outcomes["c1"] = {FailedSets(true)};
  h.Send(Request("c1", amqp::Lane::kResync));
  h.StepUntilIdle();
  auto r1 = h.Retrying("1s");
  REQUIRE(r1.size() == 1);
  CHECK(r1[0].headers[kAttemptHeader] == 1);
  CHECK(r1[0].headers[kLastErrorHeader].get<std::string>().find("503") != std::string::npos);
  CHECK(h.Unacked() == 0);  // the original was acked after the retry was confirmed

  // The tier's TTL returns it to its own lane; the next failure goes one tier up.
  h.clock.Advance(1100ms);
  CHECK(h.broker.ReadyMessages(amqp::WorkQueueName(amqp::Lane::kResync)).size() == 1);
  h.StepUntilIdle();
  REQUIRE(h.Retrying("2s").size() == 1);
  h.clock.Advance(2100ms);
  h.StepUntilIdle();
  REQUIRE(h.Retrying("4s").size() == 1);
  h.clock.Advance(4100ms);
  h.StepUntilIdle();
  auto dead = h.Dead();
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].headers[kDeadReasonHeader] == "max-attempts");
  CHECK(dead[0].headers[kAttemptHeader] == 4);
  CHECK(dead[0].headers[kFirstFailureHeader] == "2026-01-01T00:00:00Z");
  CHECK(h.script.runs() == 4);
  CHECK(h.Counter("syncbus_consumer_retries_total", {{"tier", "1s"}}) == 1);
  CHECK(h.Counter("syncbus_consumer_retries_total", {{"tier", "4s"}}) == 1);
  CHECK(h.Counter("syncbus_consumer_dead_lettered_total", {{"reason", "max-attempts"}}) == 1);
  CHECK(h.Counter("syncbus_consumer_deliveries_total",
                  {{"lane", "resync"}, {"outcome", "retried"}}) == 3);
}

TEST_CASE(
    "a retry the broker refuses stays with the consumer and is published again shortly "
    "[concurrent]") {
  Harness h;
  // The 1 s tier refuses every publish (as a quorum queue without a leader does while a node is
  // down), until it is declared again as before.
  const amqp::Topology restored = h.FailWhileTierRefuses();  // the refusal is no connection failure
  // Refused: the original is neither acked nor dropped; it waits out the hold-off.
  CHECK(h.Unacked() == 1);
  CHECK(h.loop->in_flight() == 1);
  CHECK(h.Retrying("1s").empty());
  h.clock.Advance(250ms);
  REQUIRE(h.loop->Step(0ms).ok());  // still refused: 500 ms next
  CHECK(h.Unacked() == 1);

  h.broker.DeleteQueue("syncbus.retry.1s");
  REQUIRE(h.publisher.Declare(restored).ok());
  h.clock.Advance(499ms);
  REQUIRE(h.loop->Step(0ms).ok());
  CHECK(h.Unacked() == 1);  // not before its time
  h.clock.Advance(1ms);
  REQUIRE(h.loop->Step(0ms).ok());
  CHECK(h.Unacked() == 0);
  CHECK(h.loop->in_flight() == 0);
  REQUIRE(h.Retrying("1s").size() == 1);
  CHECK(h.Counter("syncbus_consumer_deliveries_total",
                  {{"lane", "change"}, {"outcome", "retried"}}) == 1);
  bool traced = false;
  for (const auto& e : h.Traced())
    traced = traced || (e.step == TraceStep::kSettled && e.outcome == TraceOutcome::kRetry);
  CHECK(traced);
}

TEST_CASE(
    "a retry refused for 3 s on a live channel goes out on a new publishing channel, the "
    "deliveries "
    "staying [concurrent]") {
  // RabbitMQ 3.10 keeps refusing on a channel that first used a queue while it elected a new
  // leader, while a new channel is served (channel_renewal.h). A new connection would give back
  // every delivery the consumer holds.
  Harness h;
  h.broker.StalePublishChannels("syncbus.retry.1s");
  h.script.outcomes["c1"] = {FailedSets(true), Applied()};
  h.Send(Request("c1"));
  h.WaitForFirstResult();
  REQUIRE(h.loop->Step(0ms).ok());  // refused: kept, 250 ms
  for (auto wait : {250ms, 500ms, 1000ms}) {
    h.clock.Advance(wait);
    REQUIRE(h.loop->Step(0ms).ok());  // 1.75 s of refusals
    CHECK(h.Retrying("1s").empty());
  }
  h.clock.Advance(2000ms);
  REQUIRE(h.loop->Step(0ms).ok());  // 3.75 s: a new publishing channel
  REQUIRE(h.loop->Step(0ms).ok());  // tried again at once, on it: taken
  CHECK(h.Retrying("1s").size() == 1);
  CHECK(h.Unacked() == 0);
  CHECK(h.session.connected());
  CHECK(h.broker.LiveConnections() == 2);  // the publisher's and this one: no new connection
  CHECK(h.Counter("syncbus_consumer_redeliveries_total", {}) == 0);
  CHECK(h.Counter("syncbus_consumer_deliveries_total",
                  {{"lane", "change"}, {"outcome", "retried"}}) == 1);
}

TEST_CASE(
    "a retry refused on new publishing channels too ends Step with an error, for a new connection "
    "[concurrent]") {
  Harness h;
  const amqp::Topology restored = h.FailWhileTierRefuses();  // refused whatever the channel
  const SteadyTime refused = h.clock.Now();
  Status renew;
  while (renew.ok() && h.clock.Now() - refused < 20s) {
    h.clock.Advance(250ms);
    renew = h.loop->Step(0ms);
    CHECK(h.Unacked() == 1);  // kept until the connection goes
  }
  // New channels at 3 s and 6 s of refusals, a new connection at 12 s.
  CHECK(renew.code() == Code::kUnavailable);
  CHECK(renew.message().find("opening a new connection") != std::string::npos);
  CHECK(h.clock.Now() - refused >= 12s);
  CHECK(h.clock.Now() - refused < 14s);
  CHECK(h.session.connected());  // the connection itself was fine
  // As the consumer does: a new connection. The request comes back and is tried again.
  h.loop->ConnectionLost();
  h.session.Close();
  h.broker.DeleteQueue("syncbus.retry.1s");
  REQUIRE(h.publisher.Declare(restored).ok());
  REQUIRE(h.session.Connect().ok());
  REQUIRE(h.loop->Subscribe().ok());
  h.StepUntilIdle();
  h.clock.Advance(1100ms);
  h.StepUntilIdle();
  CHECK(h.script.runs() == 2);
  CHECK(h.Unacked() == 0);
  CHECK(h.Retrying("1s").empty());
}

TEST_CASE("a request that recovers after a retry ends acked") {
  Harness h;
  h.script.outcomes["c1"] = {Result<SyncOutcome>(Status(Code::kTimeout, "hub read timed out")),
                             Applied()};
  h.Send(Request("c1"));
  h.StepUntilIdle();
  REQUIRE(h.Retrying("1s").size() == 1);
  h.clock.Advance(1100ms);
  h.StepUntilIdle();
  CHECK(h.Retrying("1s").empty());
  CHECK(h.Dead().empty());
  CHECK(h.Counter("syncbus_consumer_deliveries_total",
                  {{"lane", "change"}, {"outcome", "applied"}}) == 1);
}

TEST_CASE("failed attempts, the parking and a recovery become Events, and a plain success none") {
  Harness h;
  h.script.outcomes["failing"] = {FailedSets(true)};
  h.script.outcomes["healing"] = {Result<SyncOutcome>(Status(Code::kTimeout, "hub read timed out")),
                                  Applied()};
  SyncOutcome after_failure = Applied();
  after_failure.recovered = true;  // its ClusterSync showed a failing set
  h.script.outcomes["healed"] = {after_failure};
  for (const char* name : {"failing", "healing", "healed", "fine"}) h.Send(Request(name), name);
  h.StepUntilIdle();
  for (auto tier : {1100ms, 2100ms, 4100ms}) {
    h.clock.Advance(tier);
    h.StepUntilIdle();
  }
  REQUIRE(h.Dead().size() == 1);

  std::vector<SyncEvent> failing = h.events.Of("failing");
  REQUIRE(failing.size() == 4);
  for (int i = 0; i < 3; ++i) {
    CHECK(failing[i].kind == SyncEvent::Kind::kFailed);
    CHECK(failing[i].ns == "ns1");
    CHECK(failing[i].message == "resources[0] ConfigMap default/a: 503 Service Unavailable");
  }
  CHECK(failing[3].kind == SyncEvent::Kind::kParked);
  CHECK(failing[3].message ==
        "parked in the dead-letter queue after attempt 4 (syncbusctl dlq replay runs it again): "
        "resources[0] ConfigMap default/a: 503 Service Unavailable");

  std::vector<SyncEvent> healing = h.events.Of("healing");
  REQUIRE(healing.size() == 2);
  CHECK(healing[0].kind == SyncEvent::Kind::kFailed);
  CHECK(healing[0].message.find("hub read timed out") != std::string::npos);
  CHECK(healing[1].kind == SyncEvent::Kind::kRecovered);  // its second attempt succeeded

  std::vector<SyncEvent> healed = h.events.Of("healed");
  REQUIRE(healed.size() == 1);
  CHECK(healed[0].kind == SyncEvent::Kind::kRecovered);
  CHECK(h.events.Of("fine").empty());  // steady state: no Event, no hub write
  CHECK(std::string(SyncEventReason(SyncEvent::Kind::kParked)) == "SyncParked");
  CHECK(std::string(SyncEventType(SyncEvent::Kind::kRecovered)) == "Normal");
}

TEST_CASE(
    "429 with Retry-After skips tiers shorter than asked, permanent failures use the slow tier") {
  Harness h;
  h.script.outcomes["throttled"] = {Result<SyncOutcome>(
      Status(Code::kTooManyRequests, "429 Too Many Requests").WithRetryAfter(1500ms))};
  h.script.outcomes["invalid"] = {FailedSets(false)};
  h.script.outcomes["forbidden"] = {
      Result<SyncOutcome>(Status(Code::kUnauthorized, "403 Forbidden"))};
  h.Send(Request("throttled"));
  h.Send(Request("invalid"));
  h.Send(Request("forbidden"));
  h.StepUntilIdle();
  REQUIRE(h.Retrying("2s").size() == 1);
  CHECK(h.Retrying("2s")[0].headers[kClusterHeader] == "ns1/throttled");
  CHECK(h.Retrying("4s").size() == 2);
}

TEST_CASE("a target's Retry-After on failed sets moves the retry to a tier at least that long") {
  Harness h;
  SyncOutcome throttled = FailedSets(true);
  throttled.retry_after = 3s;
  h.script.outcomes["throttled"] = {throttled};
  h.Send(Request("throttled"));
  h.StepUntilIdle();
  CHECK(h.Retrying("1s").empty());
  CHECK(h.Retrying("2s").empty());
  CHECK(h.Retrying("4s").size() == 1);
}

TEST_CASE("an undecodable message is parked at once without running anything") {
  Harness h;
  h.SendRaw("{not json");
  h.StepUntilIdle();
  auto dead = h.Dead();
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].headers[kDeadReasonHeader] == "undecodable");
  CHECK(dead[0].headers.contains(kLastErrorHeader));
  CHECK(h.script.runs() == 0);
  CHECK(h.Unacked() == 0);
}

TEST_CASE(
    "a lost broker connection stops its syncs at their next write and gives their leases back at "
    "once [concurrent]") {
  Harness h(2, true);
  Gate gate;
  h.script.during = [&](const SyncRequest&) { gate.Wait(); };
  h.Send(Request("c1"));
  h.StepUntil([&] { return h.leases->held() > 0; });
  REQUIRE(h.leases->held() == 1);  // claimed at the sync's first fence call
  h.broker.DropConnections();
  CHECK_FALSE(h.loop->Step(0ms).ok());
  h.loop->ConnectionLost();
  gate.Open();
  // The sync's next fence check fails: it writes nothing more, and the lease is given back on
  // the hub (its holder cleared: no status was stored) before any reconnect, so whoever the
  // broker hands the request to can take the cluster.
  auto given_back = [&] {
    auto lease = h.hub.Get(kube::Object(kube::resources::kClusterSyncLeases, "ns1", "c1"));
    return lease.ok() && ClaimOf(*lease).holder.empty();
  };
  CHECK(syncbus::testing::WaitFor(given_back, 10s, 1ms));
  CHECK(h.leases->held() == 0);
  CHECK(h.script.fence_failures == 1);
  LeaseOptions other;
  other.identity = "consumer-2";
  ClusterLeases elsewhere(other, h.hub, h.clock, h.registry);
  auto taken = elsewhere.Acquire("ns1", "c1");
  CHECK_MESSAGE(taken.ok(), taken.status().ToString());  // no need to wait for the lease to lapse
}

TEST_CASE("a cluster busy on another consumer is deferred without counting an attempt") {
  Harness h;
  LeaseOptions other;
  other.identity = "consumer-2";
  ClusterLeases elsewhere(other, h.hub, h.clock, h.registry);
  h.MakeClusterSync("c1");
  auto held = elsewhere.Acquire("ns1", "c1");
  REQUIRE(held.ok());
  h.Send(Request("c1"));
  h.StepUntilIdle();
  // The sync read its state, then its first fence call (before any write) found the lease taken.
  CHECK(h.script.runs() == 1);
  CHECK(h.script.fence_failures == 1);
  auto deferred = h.Retrying("1s");
  REQUIRE(deferred.size() == 1);
  CHECK(deferred[0].headers[kAttemptHeader] == 0);
  CHECK_FALSE(deferred[0].headers.contains(kFirstFailureHeader));
  CHECK(h.Counter("syncbus_consumer_deliveries_total", {{"lane", "change"}, {"outcome", "busy"}}) ==
        1);
  CHECK(h.Counter("syncbus_consumer_retries_total", {{"tier", "1s"}}) == 0);

  elsewhere.Release(*held);
  h.clock.Advance(1100ms);
  h.StepUntilIdle();
  CHECK(h.script.runs() == 2);
  CHECK(h.script.fence_failures == 1);
  CHECK(h.Retrying("1s").empty());
}

TEST_CASE("losing the lease mid-sync fences the writes and defers the delivery") {
  Harness h;
  // The sync stalls past the lease's safe period (no renewals happen in this test).
  h.script.during = [&](const SyncRequest&) { h.clock.Advance(25s); };
  h.script.outcomes["c1"] = {FailedSets(true)};
  h.Send(Request("c1"));
  h.StepUntilIdle();
  CHECK(h.script.fence_failures == 1);
  auto deferred = h.Retrying("1s");
  REQUIRE(deferred.size() == 1);
  CHECK(deferred[0].headers[kAttemptHeader] == 0);
}

TEST_CASE("the change lane is served before the resync lane") {
  Harness h(1);
  Gate gate;
  h.script.during = [&](const SyncRequest& r) {
    if (r.cluster_name != "first") return;
    gate.Wait();
  };
  h.Send(Request("first", amqp::Lane::kResync));
  // Wait until the single worker is busy with "first", then queue the rest behind it.
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (h.script.runs() == 0 && std::chrono::steady_clock::now() < deadline)
    REQUIRE(h.loop->Step(0ms).ok());
  for (const char* c : {"r1", "r2", "r3"}) h.Send(Request(c, amqp::Lane::kResync));
  h.Send(Request("edit", amqp::Lane::kChange));
  while (h.loop->in_flight() < 5 && std::chrono::steady_clock::now() < deadline)
    REQUIRE(h.loop->Step(0ms).ok());
  REQUIRE(h.loop->in_flight() == 5);
  gate.Open();
  h.StepUntilIdle();
  REQUIRE(h.script.ran.size() == 5);
  CHECK(h.script.ran[0] == "first");
  CHECK(h.script.ran[1] == "edit");
}

TEST_CASE("deliveries for one cluster never run at the same time in one process [concurrent]") {
  Harness h(4, false);
  std::atomic<int> running{0}, peak{0};
  h.script.during = [&](const SyncRequest&) {
    int now = ++running;
    peak = std::max(peak.load(), now);
    std::this_thread::yield();
    --running;
  };
  for (int i = 0; i < 8; ++i) h.Send(Request("same"), "m" + std::to_string(i));
  h.StepUntilIdle();
  CHECK(h.script.runs() == 8);
  CHECK(peak.load() == 1);
  CHECK(h.Unacked() == 0);
}

TEST_CASE("busy workers are counted against the workers [concurrent]") {
  Harness h(4, false);
  Gate gate;
  h.script.during = [&gate](const SyncRequest&) { gate.Wait(); };
  CHECK(h.Gauge("syncbus_consumer_workers") == 4);
  CHECK(h.Gauge("syncbus_consumer_workers_busy") == 0);
  for (const char* c : {"c1", "c2", "c3"}) h.Send(Request(c));
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (h.Gauge("syncbus_consumer_workers_busy") < 3 &&
         std::chrono::steady_clock::now() < deadline) {
    REQUIRE(h.loop->Step(0ms).ok());
    std::this_thread::yield();
  }
  CHECK(h.Gauge("syncbus_consumer_workers_busy") == 3);
  gate.Open();
  h.StepUntilIdle();
  CHECK(h.Gauge("syncbus_consumer_workers_busy") == 0);
  CHECK(h.script.runs() == 3);
}

TEST_CASE("after a lost connection the old result is dropped and the redelivery is processed") {
  Harness h(2, false);
  Gate gate;
  h.script.during = [&](const SyncRequest&) { gate.Wait(); };
  h.Send(Request("c1"));
  h.StepUntil([&] { return h.script.runs() > 0; });
  h.broker.DropConnections();
  CHECK_FALSE(h.loop->Step(0ms).ok());
  REQUIRE(h.session.Connect().ok());
  REQUIRE(h.loop->Subscribe().ok());
  gate.Open();
  // The redelivery ended unsettled once: held back in the shortest tier, then run.
  h.StepUntilIdle();
  CHECK(h.script.runs() == 1);
  CHECK(h.Retrying("1s").size() == 1);
  h.clock.Advance(1100ms);
  h.StepUntilIdle();
  CHECK(h.script.runs() == 2);
  CHECK(h.Unacked() == 0);
  CHECK(h.Counter("syncbus_consumer_redeliveries_total", {}) == 1);
  CHECK(h.Counter("syncbus_consumer_deliveries_total",
                  {{"lane", "change"}, {"outcome", "quarantined"}}) == 1);
  CHECK(h.Counter("syncbus_consumer_deliveries_total",
                  {{"lane", "change"}, {"outcome", "applied"}}) == 1);
}

TEST_CASE("a request whose deliveries keep ending unsettled is parked as poison across deferrals") {
  Harness h;
  SyncRequest r = Request("poison");
  amqp::Publication p{amqp::kWorkExchange, "change",
                      ToAmqpMessage(r, "syncbus-publisher", "m", h.clock.WallNow())};
  p.message.headers[kUnsettledHeader] = 2;  // two consumers died holding earlier copies
  REQUIRE(h.publisher.Publish(p, 1s).ok());
  h.Send(Request("healthy"));
  h.StepUntilIdle();
  CHECK(h.script.runs() == 1);  // 2 is within the limit: held back in the 2nd tier
  CHECK(h.Retrying("2s").size() == 1);
  h.clock.Advance(2100ms);
  h.StepUntilIdle();
  CHECK(h.Dead().empty());  // then it runs
  CHECK(h.script.runs() == 2);

  // One more consumer died holding it: over the limit, parked without running.
  p.message.headers[kUnsettledHeader] = 3;
  REQUIRE(h.publisher.Publish(p, 1s).ok());
  h.StepUntilIdle();
  auto dead = h.Dead();
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].headers[kDeadReasonHeader] == "delivery_limit");
  CHECK(h.script.runs() == 2);
}

TEST_CASE(
    "a returned request whose cluster needs no write any more is acked without running, held back "
    "or parked") {
  Harness h;
  h.no_write["done"] = "up-to-date";
  SUBCASE("over the delivery limit") {
    h.SendSuspect(Request("done"), 3);
  }
  SUBCASE("back for the first time, not yet held back") {
    amqp::Publication p{
        amqp::kWorkExchange, "change",
        ToAmqpMessage(Request("done"), "syncbus-publisher", "suspect", h.clock.WallNow())};
    p.message.headers[kUnsettledHeader] = 1;
    REQUIRE(h.publisher.Publish(p, 1s).ok());
  }
  SUBCASE("back again, to run alone") {
    h.SendSuspect(Request("done"), 2);
  }
  h.StepUntilIdle();
  h.loop->Step(0ms);
  CHECK(h.script.runs() == 0);
  CHECK(h.Dead().empty());
  for (const char* tier : {"1s", "2s", "4s"}) CHECK(h.Retrying(tier).empty());
  CHECK(h.Counter("syncbus_consumer_deliveries_total", {{"outcome", "superseded"}}) == 1);
  auto events = h.Traced();
  REQUIRE(events.size() == 1);
  CHECK(events[0].step == TraceStep::kSettled);
  CHECK(events[0].outcome == TraceOutcome::kUpToDate);
  CHECK(events[0].error.find("settled without running") != std::string::npos);
  CHECK(events[0].error.find("up-to-date") != std::string::npos);
}

TEST_CASE(
    "the no-write answer is asked only of returned requests, and a request that still needs work "
    "is parked") {
  Harness h;
  // A fresh request runs even when the mirror says its cluster needs nothing: the sync decides,
  // from the hub when the mirror is behind.
  h.no_write["fresh"] = "up-to-date";
  h.Send(Request("fresh"));
  // A returned request whose cluster still needs a write (a poison's: its change never lands).
  h.SendSuspect(Request("poison"), 3);
  h.StepUntilIdle();
  CHECK(h.script.runs() == 1);
  auto dead = h.Dead();
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].headers[kDeadReasonHeader] == "delivery_limit");
  CHECK(h.Counter("syncbus_consumer_deliveries_total", {{"outcome", "superseded"}}) == 0);
}

TEST_CASE("each delivery is traced when taken and when settled, with how it ended") {
  Harness h;
  SyncOutcome applied = Applied();
  applied.prepare_seconds = 0.25;
  applied.target_seconds = 1.5;
  applied.sets = {{"SyncSet", "set-a", 3, 3, true, ""}};
  h.script.outcomes["ok"] = {applied};
  h.script.outcomes["bad"] = {FailedSets(true)};
  h.Send(Request("ok"), "ns1/ok/rev-1/1");
  h.Send(Request("bad"), "ns1/bad/rev-1/2");
  h.StepUntilIdle();
  h.loop->Step(0ms);
  // The loop records; it never publishes the trace on its own connection.
  CHECK(h.broker.ReadyMessages(amqp::kTraceQueue).empty());
  CHECK(h.trace.buffered() == 4);

  std::map<std::string, std::vector<TraceEvent>> by_cluster;
  for (const auto& e : h.Traced()) by_cluster[e.cluster].push_back(e);
  REQUIRE(by_cluster["ns1/ok"].size() == 2);
  const TraceEvent& taken = by_cluster["ns1/ok"][0];
  CHECK(taken.step == TraceStep::kDelivered);
  CHECK(taken.request == "ns1/ok/rev-1/1");
  CHECK(taken.actor == "consumer-1");
  CHECK(taken.lane == "change");
  const TraceEvent& done = by_cluster["ns1/ok"][1];
  CHECK(done.step == TraceStep::kSettled);
  CHECK(done.outcome == TraceOutcome::kApplied);
  CHECK(done.prepare == 250ms);
  CHECK(done.target == 1500ms);
  REQUIRE(done.sets.size() == 1);
  CHECK(done.sets[0].name == "set-a");
  CHECK(done.sets[0].applies == 3);

  REQUIRE(by_cluster["ns1/bad"].size() == 2);
  const TraceEvent& retried = by_cluster["ns1/bad"][1];
  CHECK(retried.outcome == TraceOutcome::kRetry);
  CHECK(retried.tier == "1s");
  CHECK(retried.attempt == 0);
  CHECK(retried.error.find("503") != std::string::npos);
  CHECK(h.Counter("syncbus_trace_events_total", {{"result", "published"}}) == 4);
}

TEST_CASE("deferrals and parking are traced with their tier and reason") {
  Harness h;
  LeaseOptions other;
  other.identity = "consumer-2";
  ClusterLeases elsewhere(other, h.hub, h.clock, h.registry);
  h.MakeClusterSync("busy");
  auto held = elsewhere.Acquire("ns1", "busy");
  REQUIRE(held.ok());
  h.Send(Request("busy"));
  h.StepUntilIdle();
  h.loop->Step(0ms);
  auto events = h.Traced();
  REQUIRE(events.size() == 2);
  CHECK(events[1].outcome == TraceOutcome::kDeferred);
  CHECK(events[1].tier == "1s");

  elsewhere.Release(*held);
  h.script.outcomes["doomed"] = {FailedSets(false)};
  h.Send(Request("doomed"));
  for (int i = 0; i < 4; ++i) {
    h.StepUntilIdle();
    h.clock.Advance(4100ms);
  }
  h.StepUntilIdle();
  h.loop->Step(0ms);
  std::vector<TraceEvent> doomed;
  for (const auto& e : h.Traced()) {
    if (e.cluster == "ns1/doomed") doomed.push_back(e);
  }
  REQUIRE(doomed.size() == 8);  // four deliveries, each taken and settled
  CHECK(doomed.back().outcome == TraceOutcome::kParked);
  CHECK(doomed.back().dead_reason == "max-attempts");
  CHECK(doomed.back().attempt == 3);
}

TEST_CASE(
    "a request back after two unsettled deliveries runs alone: after the work in flight, before "
    "new work [concurrent]") {
  Harness h(4, false);
  HeldSyncs held(h);
  h.Send(Request("a"));
  h.Send(Request("b"));
  held.StepUntil([&] { return held.running.size() == 2; });

  // Already held back for its two unsettled deliveries: it runs, but only once a and b are done.
  h.SendSuspect(Request("suspect"), 2);
  held.StepUntil([&] { return h.loop->in_flight() == 3; });
  held.Release("a");
  held.StepUntil([&] { return held.running.size() == 1; });
  CHECK(held.Running() == std::set<std::string>{"b"});
  held.Release("b");
  held.StepUntil([&] { return held.running.count("suspect") == 1; });
  // While it runs, nothing else starts.
  h.Send(Request("c"));
  held.StepUntil([&] { return h.loop->in_flight() == 2; });
  CHECK(held.Running() == std::set<std::string>{"suspect"});
  held.Release("suspect");
  held.Release("c");
  h.StepUntilIdle();
  std::vector<std::string> started = held.Started();
  REQUIRE(started.size() == 4);  // a and b start together, in either order
  CHECK(std::set<std::string>{started[0], started[1]} == std::set<std::string>{"a", "b"});
  CHECK(started[2] == "suspect");
  CHECK(started[3] == "c");
}

TEST_CASE(
    "a request that runs alone goes back to the shortest tier when the work in flight takes over a "
    "second [concurrent]") {
  Harness h(4, false);
  HeldSyncs held(h);
  h.Send(Request("slow"));  // e.g. a target that does not answer
  held.StepUntil([&] { return held.running.size() == 1; });
  h.SendSuspect(Request("suspect"), 2);
  h.Send(Request("c"));
  held.StepUntil([&] { return h.loop->in_flight() == 3; });
  CHECK(held.Running() == std::set<std::string>{"slow"});  // c waits behind the suspect
  h.clock.Advance(999ms);
  REQUIRE(h.loop->Step(0ms).ok());
  CHECK(h.Retrying("1s").empty());
  h.clock.Advance(1ms);
  // Deferred with its counts, and c starts.
  held.StepUntil([&] { return held.running.count("c") == 1; });
  auto deferred = h.Retrying("1s");
  REQUIRE(deferred.size() == 1);
  CHECK(UnsettledDeliveries(deferred[0]) == 2);
  CHECK_FALSE(NeedsQuarantine(deferred[0]));  // back from the tier, it runs alone again
  CHECK(held.Started() == std::vector<std::string>{"slow", "c"});
  CHECK(h.Counter("syncbus_consumer_deliveries_total", {{"lane", "change"}, {"outcome", "busy"}}) ==
        1);
  held.Release("slow");
  held.Release("c");
  h.StepUntilIdle();
}

TEST_CASE(
    "a request back after one unsettled delivery (most often a lost connection) runs beside other "
    "work [concurrent]") {
  Harness h(4, false);
  HeldSyncs held(h);
  h.Send(Request("a"));
  held.StepUntil([&] { return held.running.size() == 1; });
  h.SendSuspect(Request("suspect"), 1);
  held.StepUntil([&] { return held.running.count("suspect") == 1; });
  h.Send(Request("c"));
  held.StepUntil([&] { return held.running.size() == 3; });
  CHECK(held.Running() == std::set<std::string>{"a", "suspect", "c"});
  held.Release("a");
  held.Release("suspect");
  held.Release("c");
  h.StepUntilIdle();
  CHECK(h.Counter("syncbus_consumer_deliveries_total",
                  {{"lane", "change"}, {"outcome", "applied"}}) == 3);
}

TEST_CASE(
    "a request that runs alone does not wait for syncs left from a lost connection [concurrent]") {
  Harness h(4, false);
  HeldSyncs held(h);
  h.Send(Request("stuck"));  // e.g. in a target's request timeout
  held.StepUntil([&] { return held.running.size() == 1; });
  h.broker.DropConnections();
  CHECK_FALSE(h.loop->Step(0ms).ok());
  h.loop->ConnectionLost();
  REQUIRE(h.session.Connect().ok());
  REQUIRE(h.publisher.Connect().ok());
  REQUIRE(h.loop->Subscribe().ok());
  // "stuck" still runs for the old connection; its delivery is back in the queue (held back).
  h.SendSuspect(Request("suspect"), 2);
  held.StepUntil([&] { return held.running.count("suspect") == 1; });
  CHECK(held.Running() == std::set<std::string>{"stuck", "suspect"});
  // It still runs alone as far as the live connection's work goes.
  h.Send(Request("c"));
  held.StepUntil([&] { return h.loop->in_flight() == 3; });  // stuck, the suspect and c
  CHECK(held.Running() == std::set<std::string>{"stuck", "suspect"});
  held.Release("suspect");
  held.StepUntil([&] { return held.running.count("c") == 1; });
  held.Release("c");
  held.Release("stuck");
  held.StepUntil([&] { return h.loop->in_flight() == 0 && held.running.empty(); });
  CHECK(h.Counter("syncbus_consumer_deliveries_total",
                  {{"lane", "change"}, {"outcome", "applied"}}) == 2);
  CHECK(h.Retrying("1s").size() == 1);  // the old connection's "stuck", back once: held back
}

TEST_CASE(
    "a held-back request whose cluster is leased elsewhere is deferred at once, without waiting to "
    "run alone [concurrent]") {
  Harness h(4);
  LeaseOptions other;
  other.identity = "consumer-2";
  ClusterLeases elsewhere(other, h.hub, h.clock, h.registry);
  h.MakeClusterSync("suspect");
  auto held = elsewhere.Acquire("ns1", "suspect");
  REQUIRE(held.ok());
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  h.script.during = [&](const SyncRequest& r) {
    if (r.cluster_name != "slow") return;
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return open; });
  };
  h.Send(Request("slow"));
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (h.script.runs() == 0 && std::chrono::steady_clock::now() < deadline)
    REQUIRE(h.loop->Step(0ms).ok());

  h.SendSuspect(Request("suspect"), 1);
  // Deferred while "slow" still runs: it did not wait for the consumer to be idle.
  deadline = std::chrono::steady_clock::now() + 10s;
  while (h.Retrying("1s").empty() && std::chrono::steady_clock::now() < deadline)
    REQUIRE(h.loop->Step(0ms).ok());
  auto deferred = h.Retrying("1s");
  REQUIRE(deferred.size() == 1);
  CHECK(UnsettledDeliveries(deferred[0]) == 1);  // still counted towards the delivery limit
  CHECK(h.script.runs() == 1);                   // "suspect" never ran
  CHECK(h.Counter("syncbus_consumer_deliveries_total", {{"lane", "change"}, {"outcome", "busy"}}) ==
        1);
  {
    std::lock_guard lock(mu);
    open = true;
  }
  cv.notify_all();
  h.StepUntilIdle();
}
