// EventRecorder against the simulator in process: the Events a sync's failures and recovery
// leave on the hub, what kubectl describe finds of them, and what they cost the hub.
#include "consumer/event_recorder.h"

#include <doctest/doctest.h>
#include <prometheus/registry.h>

#include "common/kube/client_impl.h"
#include "consumer/hub_mirror.h"
#include "tests/fakes/common/http/in_process_transport.h"
#include "tests/unit/kubesim/api_test_util.h"

using namespace syncbus;
using namespace syncbus::consumer;
using namespace std::chrono_literals;
namespace res = kube::resources;

namespace {

struct RecorderRig {
  std::unique_ptr<kubesim::Simulation> sim;
  std::shared_ptr<fakes::InProcessTransport> transport;
  std::unique_ptr<kube::ClientImpl> hub;
  prometheus::Registry registry;

  RecorderRig() {
    sim = kubesim::testing::MakeSimulation(
        {.clusters = 2, .syncsets = 1, .selector_syncsets = 0, .resources = 1});
    auto generated = sim->GenerateFleet("http://kubesim.test");
    REQUIRE_MESSAGE(generated.ok(), generated.status().ToString());
    transport = std::make_shared<fakes::InProcessTransport>(*sim);
    kube::ClusterConfig config;
    config.server = "http://kubesim.test";
    hub = std::make_unique<kube::ClientImpl>(config, transport);
  }

  std::unique_ptr<EventRecorder> Recorder(const HubMirror* mirror = nullptr) {
    EventRecorder::Options options;
    options.host = "consumer-1";
    options.max_tries = 2;
    options.retry_interval = 10ms;
    return std::make_unique<EventRecorder>(options, *hub, mirror, RealClock(), RealRandom(),
                                           registry);
  }
  Json CreateClusterSync(const std::string& cluster) {
    Result<Json> made = hub->Create(kube::Collection(res::kClusterSyncs, cluster),
                                    {{"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
                                     {"kind", "ClusterSync"},
                                     {"metadata", {{"name", cluster}, {"namespace", cluster}}},
                                     {"spec", Json::object()}});
    REQUIRE_MESSAGE(made.ok(), made.status().ToString());
    return *made;
  }
  // The Events kubectl describe lists for the object: by its name, namespace, kind and uid.
  std::vector<Json> Described(const Json& object) {
    const Json& meta = object["metadata"];
    kube::ListOptions options;
    options.field_selector = "involvedObject.name=" + meta["name"].get<std::string>() +
                             ",involvedObject.namespace=" + meta["namespace"].get<std::string>() +
                             ",involvedObject.kind=" + object["kind"].get<std::string>() +
                             ",involvedObject.uid=" + meta["uid"].get<std::string>();
    Result<kube::ObjectList> list =
        hub->List(kube::Collection(res::kEvents, meta["namespace"].get<std::string>()), options);
    REQUIRE(list.ok());
    return list->items;
  }
  uint64_t HubCount(const std::string& verb, const std::string& resource) {
    return sim->Stats()["hubRequests"].value(verb, Json::object()).value(resource, uint64_t{0});
  }
  double Counter(const std::string& reason, const std::string& result) {
    for (const auto& family : registry.Collect()) {
      if (family.name != "syncbus_consumer_events_total") continue;
      for (const auto& m : family.metric) {
        std::map<std::string, std::string> labels;
        for (const auto& l : m.label) labels[l.name] = l.value;
        if (labels["reason"] == reason && labels["result"] == result) return m.counter.value;
      }
    }
    return 0;
  }
};

SyncEvent Failed(const std::string& cluster, const std::string& message = "SyncSet a: boom") {
  return {SyncEvent::Kind::kFailed, cluster, cluster, message};
}

}  // namespace

TEST_CASE(
    "a failure is an Event on the ClusterSync that kubectl describe finds, and a repeat counts on "
    "it") {
  RecorderRig rig;
  Json sync = rig.CreateClusterSync("cluster-0000");
  auto recorder = rig.Recorder();
  recorder->Record(Failed("cluster-0000"));
  REQUIRE(recorder->WaitIdle(10s));
  recorder->Record(Failed("cluster-0000"));
  recorder->Record({SyncEvent::Kind::kRecovered, "cluster-0000", "cluster-0000",
                    "every set applied after a failure"});
  REQUIRE(recorder->WaitIdle(10s));

  std::vector<Json> events = rig.Described(sync);
  REQUIRE(events.size() == 2);
  const Json& failed = events[0]["reason"] == "SyncFailed" ? events[0] : events[1];
  const Json& recovered = events[0]["reason"] == "SyncFailed" ? events[1] : events[0];
  CHECK(failed["type"] == "Warning");
  CHECK(failed["count"] == 2);
  CHECK(failed["message"] == "SyncSet a: boom");
  CHECK(failed["source"]["component"] == "syncbus-consumer");
  CHECK(failed["source"]["host"] == "consumer-1");
  CHECK(failed["involvedObject"]["apiVersion"] == "hiveinternal.openshift.io/v1alpha1");
  CHECK(failed["lastTimestamp"].is_string());
  CHECK(recovered["type"] == "Normal");
  CHECK(recovered["reason"] == "SyncRecovered");
  CHECK(recovered["count"] == 1);
  // Two Events, three occurrences: two creates and a patch, no more.
  CHECK(rig.HubCount("create", "events") == 2);
  CHECK(rig.HubCount("patch", "events") == 1);
  CHECK(rig.Counter("SyncFailed", "created") == 1);
  CHECK(rig.Counter("SyncFailed", "patched") == 1);
}

TEST_CASE(
    "before a ClusterSync exists the Event is about the ClusterDeployment, and a gone cluster gets "
    "none") {
  RecorderRig rig;
  auto recorder = rig.Recorder();
  recorder->Record(Failed("cluster-0001", "reading admin kubeconfig Secret: not found"));
  recorder->Record(Failed("no-such-cluster"));
  REQUIRE(recorder->WaitIdle(10s));
  Result<Json> cd =
      rig.hub->Get(kube::Object(res::kClusterDeployments, "cluster-0001", "cluster-0001"));
  REQUIRE(cd.ok());
  std::vector<Json> events = rig.Described(*cd);
  REQUIRE(events.size() == 1);
  CHECK(events[0]["message"] == "reading admin kubeconfig Secret: not found");
  CHECK(rig.Counter("SyncFailed", "no-object") == 1);
}

TEST_CASE(
    "an Event the hub no longer has is created again, and with a mirror the object costs no read") {
  RecorderRig rig;
  Json sync = rig.CreateClusterSync("cluster-0000");
  HubMirror mirror;
  mirror.handler(HubCollection::kClusterSyncs).OnReplace({sync});
  auto recorder = rig.Recorder(&mirror);
  recorder->Record(Failed("cluster-0000"));
  REQUIRE(recorder->WaitIdle(10s));
  std::vector<Json> events = rig.Described(sync);
  REQUIRE(events.size() == 1);
  CHECK(rig.HubCount("get", "clustersyncs") == 0);

  // The apiserver's event TTL removed it: the repeat's patch finds nothing and creates it anew.
  std::string name = events[0]["metadata"]["name"];
  REQUIRE(rig.hub->Delete(kube::Object(res::kEvents, "cluster-0000", name), {}).ok());
  recorder->Record(Failed("cluster-0000"));
  REQUIRE(recorder->WaitIdle(10s));
  events = rig.Described(sync);
  REQUIRE(events.size() == 1);
  CHECK(events[0]["count"] == 2);
  CHECK(rig.HubCount("patch", "events") == 1);
  CHECK(rig.HubCount("create", "events") == 2);
}

TEST_CASE("an object's Events are spam-filtered: 25 written at once, the rest counted later") {
  RecorderRig rig;
  Json sync = rig.CreateClusterSync("cluster-0000");
  auto recorder = rig.Recorder();
  for (int i = 0; i < 30; ++i) recorder->Record(Failed("cluster-0000"));
  REQUIRE(recorder->WaitIdle(30s));
  CHECK(rig.Counter("SyncFailed", "spam-filtered") == 5);
  CHECK(rig.HubCount("create", "events") + rig.HubCount("patch", "events") == 25);
  std::vector<Json> events = rig.Described(sync);
  REQUIRE(events.size() == 1);
  CHECK(events[0]["count"] == 25);
}
