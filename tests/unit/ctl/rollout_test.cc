// syncbusctl's view of a rollout in waves (it must agree with rollout_release.h, which the daemons
// use), the state changes of resume and abort, the commands against a simulated hub (a conflict
// with the publisher's write read again and retried), and wait and status that know rollouts.
#include "ctl/rollout.h"

#include <atomic>
#include <sstream>

#include <doctest/doctest.h>

#include "common/kube/client_impl.h"
#include "common/time_format.h"
#include "ctl/commands.h"
#include "ctl/fleet_progress.h"
#include "ctl/fleet_status.h"
#include "tests/fakes/common/fake_clock.h"
#include "tests/fakes/common/kube/forwarding_client.h"
#include "tests/fakes/common/kube/simulated_hub.h"
#include "tests/support/rollout_objects.h"

using namespace syncbus;
using namespace syncbus::ctl;
using namespace std::chrono_literals;

namespace {

constexpr char kRoBySelector[] =
    R"({"waves": [{"selector": {"matchLabels": {"ring": "canary"}}},
                  {"selector": {"matchLabels": {"ring": "early"}}}],
        "maxFailures": 0, "healthyFor": "1m"})";

Json RoCd(const std::string& name, const std::string& ring, bool running = true) {
  Json cd = {
      {"metadata", {{"name", name}, {"namespace", name}, {"labels", {{"fleet", "a"}}}}},
      {"spec", {{"installed", running}}},
      {"status", {{"conditions", Json::array({{{"type", "Unreachable"}, {"status", "False"}}})}}}};
  if (!ring.empty()) cd["metadata"]["labels"]["ring"] = ring;
  return cd;
}

Json RoSet(int generation, const std::string& spec,
           const std::optional<rollout::RolloutState>& st) {
  Json set = {{"metadata", {{"name", "s"}, {"generation", generation}}},
              {"spec", {{"clusterDeploymentSelector", {{"matchLabels", {{"fleet", "a"}}}}}}}};
  if (!spec.empty()) set["metadata"]["annotations"][rollout::kSpecAnnotation] = spec;
  if (st) set["metadata"]["annotations"][rollout::kStateAnnotation] = rollout::EncodeState(*st);
  return set;
}

Json RoCs(const std::string& name, int generation, const std::string& failure = "") {
  return {
      {"metadata", {{"name", name}, {"namespace", name}}},
      {"status",
       {{"selectorSyncSets", Json::array({{{"name", "s"},
                                           {"observedGeneration", generation},
                                           {"result", failure.empty() ? "Success" : "Failure"},
                                           {"failureMessage", failure},
                                           {"lastTransitionTime", "2026-01-01T00:00:00Z"}}})}}}};
}

rollout::RolloutState RoState(int64_t generation, int wave, int waves, rollout::Phase phase) {
  rollout::RolloutState s;
  s.generation = generation;
  s.wave = wave;
  s.waves = waves;
  s.phase = phase;
  s.wave_started_at = "2026-01-01T00:00:00Z";
  return s;
}

const SetRef kRoSss = *ParseSetRef("selectorsyncset/s");

}  // namespace

TEST_CASE(
    "rollout: a set is named syncset/NAMESPACE/NAME or selectorsyncset/NAME, or ss/ and sss/") {
  auto ss = ParseSetRef("ss/ns1/app");
  REQUIRE(ss.ok());
  CHECK(ss->kind == hive::SetKind::kSyncSet);
  CHECK(ss->Ref() == "syncset/ns1/app");
  CHECK(ss->Describe() == "SyncSet ns1/app");
  auto sss = ParseSetRef("SelectorSyncSet/fleet-cm");
  REQUIRE(sss.ok());
  CHECK(sss->Ref() == "selectorsyncset/fleet-cm");
  CHECK(ParseSetRef("sss/fleet-cm")->name == "fleet-cm");
  for (const char* bad :
       {"fleet-cm", "syncset/app", "selectorsyncset/ns/x", "sss/", "ss//x", "configmap/x"}) {
    auto r = ParseSetRef(bad);
    CHECK_MESSAGE(r.status().code() == Code::kInvalidArgument, bad);
    CHECK(r.status().message().find("syncset/NAMESPACE/NAME") != std::string::npos);
  }
}

TEST_CASE("rollout: the view by selector counts each wave's clusters at the rollout's generation") {
  rollout::RolloutState st = RoState(2, 2, 3, rollout::Phase::kHalted);
  st.message = "wave 2: 1 of 2 clusters fail, more than the 0 allowed";
  st.failing = {{"c1/c1", "boom"}};
  auto view = ComputeRolloutView(
      kRoSss, RoSet(2, kRoBySelector, st),
      {RoCd("c0", "canary"), RoCd("c1", "early"), RoCd("c2", "early"), RoCd("c3", ""),
       RoCd("c4", ""), RoCd("c5", "", /*running=*/false)},
      {RoCs("c0", 2), RoCs("c1", 2, "webhook says no"), RoCs("c2", 1), RoCs("c3", 1)});
  REQUIRE_MESSAGE(view.ok(), view.status().ToString());
  CHECK(view->Phase() == "Halted");
  CHECK(view->Message() == st.message);
  REQUIRE(view->waves.size() == 3);
  const WaveView &w1 = view->waves[0], &w2 = view->waves[1], &w3 = view->waves[2];
  CHECK(w1.takes == R"({"matchLabels":{"ring":"canary"}})");
  CHECK(w3.takes == "the rest");
  CHECK((w1.released && w2.released && !w3.released));
  CHECK((w1.clusters == 1 && w1.synced == 1));
  CHECK((w2.clusters == 2 && w2.synced == 0 && w2.failing == 1 && w2.pending == 1));
  REQUIRE(w2.failures.size() == 1);
  CHECK(w2.failures[0].cluster == "c1/c1");
  CHECK(w2.failures[0].message == "webhook says no");
  CHECK((w3.clusters == 3 && w3.pending == 2 && w3.skipped == 1));

  const std::string table = FormatRolloutView(*view, *ParseRfc3339("2026-01-01T00:05:00Z"), false);
  CHECK(table.find("phase:    Halted at wave 2 of 3\n") != std::string::npos);
  CHECK(table.find("halted on:     c1/c1: boom\n") != std::string::npos);
  CHECK(table.find("wave started:  2026-01-01T00:00:00Z (5m ago)") != std::string::npos);
  CHECK(table.find("2     {\"matchLabels\":{\"ring\":\"early\"}}   yes       2         0       "
                   "1        1        0        0") != std::string::npos);
  CHECK(table.find("2     c1/c1            webhook says no") != std::string::npos);
  Json doc = view->ToJson();
  CHECK(doc["set"] == "selectorsyncset/s");
  CHECK(doc["waves"][1]["failingClusters"][0]["message"] == "webhook says no");
  CHECK(doc["state"]["phase"] == "Halted");
}

TEST_CASE("rollout: the view by count puts each cluster in the wave the daemons release it with") {
  const std::string spec = R"({"waves": [{"clusters": 1}, {"clusters": "40%"}]})";
  std::vector<Json> cds;
  std::vector<std::string> keys;
  for (int i = 0; i < 10; ++i) {
    cds.push_back(RoCd("c" + std::to_string(i), ""));
    keys.push_back("c" + std::to_string(i) + "/c" + std::to_string(i));
  }
  // No state yet: the waves the publisher would start with (1, 4 and the other 5).
  auto starting = ComputeRolloutView(kRoSss, RoSet(3, spec, std::nullopt), cds, {});
  REQUIRE(starting.ok());
  CHECK(starting->Phase() == "Starting");
  CHECK(starting->Message() == "no state yet; the publisher starts generation 3 at wave 1");
  REQUIRE(starting->waves.size() == 3);
  CHECK(starting->waves[0].clusters == 1);
  CHECK(starting->waves[1].clusters == 4);
  CHECK(starting->waves[1].takes == "40%");
  CHECK(starting->waves[2].clusters == 5);
  for (const auto& w : starting->waves) CHECK_FALSE(w.released);

  // Under way at wave 2: a wave is released exactly when ReleaseOf releases its clusters.
  rollout::RolloutState st = RoState(3, 2, 3, rollout::Phase::kProgressing);
  st.bounds = rollout::BoundsFor(*rollout::ParseSpec(spec), keys);
  const Json set = RoSet(3, spec, st);
  auto view = ComputeRolloutView(kRoSss, set, cds, {});
  REQUIRE(view.ok());
  auto meta = hive::ObjectMeta::FromJson(set);
  REQUIRE(meta.ok());
  size_t released = 0;
  for (const WaveView& w : view->waves) released += w.released ? w.clusters : 0;
  size_t released_by_daemons = 0;
  for (const Json& j : cds) {
    auto cd = hive::ClusterDeployment::FromJson(j);
    REQUIRE(cd.ok());
    const auto release = rollout::ReleaseOf(*meta, *cd);
    const int wave = rollout::WaveOf(*rollout::ParseSpec(spec), st, *cd);
    CHECK(view->waves[static_cast<size_t>(wave - 1)].released ==
          (release == rollout::Release::kReleased));
    released_by_daemons += release == rollout::Release::kReleased ? 1 : 0;
  }
  CHECK(released == 5);
  CHECK(released_by_daemons == released);
}

TEST_CASE("rollout: a set without the annotation, or with an unreadable one, is said so") {
  auto plain = ComputeRolloutView(kRoSss, RoSet(1, "", std::nullopt), {RoCd("c0", "")}, {});
  CHECK(plain.status().code() == Code::kNotFound);
  CHECK(plain.status().message().find("has no syncbus.io/rollout annotation") != std::string::npos);
  auto bad =
      ComputeRolloutView(kRoSss, RoSet(1, R"({"waves": []})", std::nullopt), {RoCd("c0", "")}, {});
  REQUIRE(bad.ok());
  CHECK(bad->Phase() == "Halted");
  CHECK(bad->Message().find("waves must be a list of at least one wave") != std::string::npos);
  CHECK(bad->waves.empty());
}

TEST_CASE("rollout: resume takes Halted or Aborted, abort takes Progressing or Halted") {
  const WallTime now = *ParseRfc3339("2026-03-04T05:06:07Z");
  auto view_in = [&](rollout::Phase phase, int64_t state_generation = 2) {
    rollout::RolloutState st = RoState(state_generation, 2, 3, phase);
    st.message = "wave 2 failed";
    st.failing = {{"c1/c1", "boom"}};
    st.healthy_since = "2026-01-01T00:01:00Z";
    return *ComputeRolloutView(kRoSss, RoSet(2, kRoBySelector, st), {}, {});
  };
  using P = rollout::Phase;
  for (P from : {P::kHalted, P::kAborted}) {
    auto next = NextState(view_in(from), RolloutAction::kResume, now);
    REQUIRE_MESSAGE(next.ok(), next.status().ToString());
    CHECK(next->phase == P::kProgressing);
    CHECK(next->message.empty());
    CHECK(next->failing.empty());
    CHECK(next->healthy_since.empty());
    CHECK(next->wave_started_at == "2026-03-04T05:06:07Z");
    CHECK((next->wave == 2 && next->waves == 3 && next->generation == 2));
  }
  for (P from : {P::kProgressing, P::kComplete}) {
    auto refused = NextState(view_in(from), RolloutAction::kResume, now);
    CHECK(refused.status().code() == Code::kInvalidArgument);
    CHECK(refused.status().message().find("resume takes a rollout that is Halted or Aborted") !=
          std::string::npos);
  }
  for (P from : {P::kProgressing, P::kHalted}) {
    auto next = NextState(view_in(from), RolloutAction::kAbort, now);
    REQUIRE(next.ok());
    CHECK(next->phase == P::kAborted);
    CHECK(next->message == "aborted by syncbusctl at 2026-03-04T05:06:07Z");
    CHECK(next->wave == 2);
  }
  for (P from : {P::kAborted, P::kComplete}) {
    auto refused = NextState(view_in(from), RolloutAction::kAbort, now);
    CHECK(refused.status().message().find("abort takes a rollout that is Progressing or Halted") !=
          std::string::npos);
  }
  // A state of an older generation: the publisher restarts the new one at wave 1.
  auto stale = NextState(view_in(P::kHalted, 1), RolloutAction::kResume, now);
  CHECK(stale.status().message().find("its state is for generation 1, the set is at 2") !=
        std::string::npos);
  auto none = NextState(*ComputeRolloutView(kRoSss, RoSet(2, kRoBySelector, std::nullopt), {}, {}),
                        RolloutAction::kAbort, now);
  CHECK(none.status().message().find("it has no state yet") != std::string::npos);
  rollout::RolloutState halted = RoState(2, 0, 0, P::kHalted);
  auto unreadable = NextState(*ComputeRolloutView(kRoSss, RoSet(2, "{}", halted), {}, {}),
                              RolloutAction::kResume, now);
  CHECK(unreadable.status().message().find("annotation is unreadable") != std::string::npos);
}

TEST_CASE("rollout: the state patch is conditional on the resourceVersion read") {
  Json patch = Json::parse(StatePatch(RoState(2, 1, 3, rollout::Phase::kAborted), "417"));
  CHECK(patch["metadata"]["resourceVersion"] == "417");
  auto state = rollout::ParseState(
      patch["metadata"]["annotations"][rollout::kStateAnnotation].get<std::string>());
  REQUIRE(state.ok());
  CHECK(state->phase == rollout::Phase::kAborted);
}

namespace {

// The hub, but the publisher's leader writes the set between syncbusctl's read and its write,
// `conflicts` times: each of those writes fails with a real 409 from the simulator.
class RoRacingHub final : public fakes::ForwardingClient {
 public:
  RoRacingHub(kube::Client& hub, int conflicts) : ForwardingClient(hub), conflicts_(conflicts) {}
  int patches = 0;

  Result<Json> Patch(const kube::ObjectRef& r, kube::PatchType t, const std::string& body,
                     const kube::WriteOptions& o) override {
    ++patches;
    if (conflicts_ > 0) {
      --conflicts_;
      Json touch = {
          {"metadata", {{"annotations", {{"test/publisher-wrote", std::to_string(patches)}}}}}};
      auto written = to_.Patch(r, kube::PatchType::kMerge, touch.dump(), o);
      if (!written.ok()) return written.status();
    }
    return to_.Patch(r, t, body, o);
  }

 private:
  int conflicts_;
};

// A simulated hub with 6 fleet clusters and SelectorSyncSet "s" rolled out by ring: cluster-0000
// canary (synced), cluster-0001 and cluster-0002 early (one failing, one pending), the other
// three the rest.
struct RoHub {
  RoHub() {
    auto set = hub->Create(kube::Collection(kube::resources::kSelectorSyncSets),
                           testing::RolledOutSelectorSyncSet("s", kRoBySelector));
    REQUIRE_MESSAGE(set.ok(), set.status().ToString());
    testing::LabelFleetCluster(*hub, "cluster-0000", "ring", "canary");
    testing::LabelFleetCluster(*hub, "cluster-0001", "ring", "early");
    testing::LabelFleetCluster(*hub, "cluster-0002", "ring", "early");
    testing::WriteSelectorSetEntry(*hub, "cluster-0000", "s", 1);
    testing::WriteSelectorSetEntry(*hub, "cluster-0001", "s", 1, "webhook says no");
  }
  // Runs `syncbusctl rollout ...` against the hub.
  int Run(RolloutCommand command, const std::string& set, kube::Client* through = nullptr,
          OutputFormat output = OutputFormat::kTable) {
    RolloutOptions options;
    options.command = command;
    options.set = set;
    options.output = output;
    out.str("");
    err.str("");
    return RunRollout(options, through != nullptr ? *through : *hub, clock, out, err);
  }

  fakes::SimulatedHub simulated{{.clusters = 6}};
  kube::ClientImpl* hub = simulated.hub.get();
  FakeClock clock;
  std::ostringstream out, err;
};

}  // namespace

TEST_CASE("rollout status, resume and abort against the hub, a conflict read again and retried") {
  RoHub h;
  h.clock.Advance(3h + 25min + 9s);
  // Before the publisher wrote a state: nothing to resume or abort.
  CHECK(h.Run(RolloutCommand::kStatus, "sss/s") == 0);
  CHECK(h.out.str().find("phase:    Starting\n") != std::string::npos);
  CHECK(h.Run(RolloutCommand::kAbort, "sss/s") == 1);
  CHECK(h.err.str().find("it has no state yet") != std::string::npos);

  rollout::RolloutState st = RoState(1, 2, 3, rollout::Phase::kHalted);
  st.message = "wave 2: 1 of 2 clusters fail, more than the 0 allowed";
  st.failing = {{"cluster-0001/cluster-0001", "webhook says no"}};
  testing::WriteRolloutState(*h.hub, "s", st);
  CHECK(h.Run(RolloutCommand::kStatus, "selectorsyncset/s", nullptr, OutputFormat::kJson) == 0);
  Json doc = Json::parse(h.out.str());
  CHECK(doc["phase"] == "Halted");
  CHECK(doc["waves"][1]["failing"] == 1);
  CHECK(doc["waves"][1]["pending"] == 1);
  CHECK(doc["waves"][2]["clusters"] == 3);

  // The publisher writes the set between the read and the write twice: read again, and written.
  RoRacingHub racing(*h.hub, 2);
  CHECK(h.Run(RolloutCommand::kResume, "sss/s", &racing) == 0);
  CHECK(racing.patches == 3);
  CHECK(h.err.str().find("changed since it was read") != std::string::npos);
  CHECK(h.out.str() == "rollout of SelectorSyncSet s resumed at wave 2 of 3 (generation 1)\n");
  rollout::RolloutState resumed = testing::ReadRolloutState(*h.hub, "s");
  CHECK(resumed.phase == rollout::Phase::kProgressing);
  CHECK(resumed.message.empty());
  CHECK(resumed.failing.empty());
  CHECK(resumed.wave_started_at == "2026-01-01T03:25:09Z");
  CHECK(resumed.wave == 2);

  CHECK(h.Run(RolloutCommand::kResume, "sss/s") == 1);
  CHECK(h.err.str().find("it is Progressing") != std::string::npos);
  // The set keeps changing: after its attempts, the command gives up.
  RoRacingHub hostile(*h.hub, 100);
  CHECK(h.Run(RolloutCommand::kAbort, "sss/s", &hostile) == 1);
  CHECK(hostile.patches == 5);
  CHECK(testing::ReadRolloutState(*h.hub, "s").phase == rollout::Phase::kProgressing);
  CHECK(h.Run(RolloutCommand::kAbort, "sss/s") == 0);
  rollout::RolloutState aborted = testing::ReadRolloutState(*h.hub, "s");
  CHECK(aborted.phase == rollout::Phase::kAborted);
  CHECK(aborted.message == "aborted by syncbusctl at 2026-01-01T03:25:09Z");

  CHECK(h.Run(RolloutCommand::kStatus, "sss/nope") == 1);
  CHECK(h.err.str() == "syncbusctl: no SelectorSyncSet nope on the hub\n");
  CHECK(h.Run(RolloutCommand::kStatus, "ss/cluster-0000/nope") == 1);
  CHECK(h.Run(RolloutCommand::kStatus, "nope") == 2);
  auto plain = h.hub->Create(kube::Collection(kube::resources::kSelectorSyncSets),
                             testing::RolledOutSelectorSyncSet("plain", ""));
  REQUIRE(plain.ok());
  CHECK(h.Run(RolloutCommand::kResume, "sss/plain") == 1);
  CHECK(h.err.str().find("has no syncbus.io/rollout annotation") != std::string::npos);
}

TEST_CASE("wait counts clusters held by a rollout as pending and stops at once on a halt") {
  RoHub h;
  WaitOptions options;
  options.timeout = 0ms;  // one read
  options.quiet = true;
  options.output = OutputFormat::kJson;
  std::atomic<bool> stop{false};
  std::ostringstream out, err;
  // Wave 1 released: the canary is synced; cluster-0001 reports the set failing (at this
  // generation: counted as failing, not held), the other four are held back.
  testing::WriteRolloutState(*h.hub, "s", RoState(1, 1, 3, rollout::Phase::kProgressing));
  CHECK(RunWait(options, *h.hub, nullptr, stop, out, err) == 1);
  Json doc = Json::parse(out.str());
  CHECK(doc["synced"] == 1);
  CHECK(doc["held"] == 4);
  CHECK(doc["failing"] == 1);
  CHECK(doc["rollouts"][0]["phase"] == "Progressing");
  CHECK(doc["haltedRollouts"].empty());
  auto progress = ReadProgress(*h.hub, "");
  REQUIRE(progress.ok());
  CHECK(progress->states[2].detail ==
        "held by rollout of SelectorSyncSet s, wave 2 (1 of 3 released)");

  rollout::RolloutState st = RoState(1, 2, 3, rollout::Phase::kHalted);
  st.message = "wave 2: 1 of 2 clusters fail, more than the 0 allowed";
  st.failing = {{"cluster-0001/cluster-0001", "webhook says no"}};
  testing::WriteRolloutState(*h.hub, "s", st);
  options.timeout = 60s;  // a halt ends the wait at once, not at the timeout
  out.str("");
  err.str("");
  CHECK(RunWait(options, *h.hub, nullptr, stop, out, err) == kWaitRolloutStopped);
  CHECK(err.str() ==
        "syncbusctl: rollout of SelectorSyncSet s is Halted at wave 2 of 3: wave 2: 1 of 2 "
        "clusters fail, more than the 0 allowed\n"
        "  failing cluster-0001/cluster-0001: webhook says no\n");
  doc = Json::parse(out.str());
  CHECK(doc["elapsedSeconds"].get<double>() < 30);
  CHECK(doc["reached"] == false);
  CHECK(doc["haltedRollouts"][0]["set"] == "selectorsyncset/s");

  // An unreadable annotation holds the set back everywhere: a halt as well.
  Json patch = {{"metadata", {{"annotations", {{rollout::kSpecAnnotation, "{\"waves\": 3}"}}}}}};
  REQUIRE(h.hub
              ->Patch(kube::Object(kube::resources::kSelectorSyncSets, "", "s"),
                      kube::PatchType::kMerge, patch.dump())
              .ok());
  err.str("");
  CHECK(RunWait(options, *h.hub, nullptr, stop, out, err) == kWaitRolloutStopped);
  CHECK(err.str().find("is Halted at wave 2 of 3: rollout annotation syncbus.io/rollout: waves "
                       "must be a list") != std::string::npos);
}

TEST_CASE("status lists each rollout with its phase and wave, a halted one with its failures") {
  rollout::RolloutState st = RoState(2, 2, 3, rollout::Phase::kHalted);
  st.message = "wave 2 fails";
  st.failing = {{"c1/c1", "webhook says no"}};
  FleetProgress hub =
      ComputeProgress({RoCd("c0", "canary"), RoCd("c1", "early"), RoCd("c2", "")}, {},
                      {RoSet(2, kRoBySelector, st)},
                      {RoCs("c0", 2), RoCs("c1", 2, "webhook says no"), RoCs("c2", 1)});
  REQUIRE(hub.rollouts.size() == 1);
  CHECK(hub.held == 1);
  FleetStatus status = ComputeFleetStatus(hub, {}, {});
  const std::string text = FormatFleetStatus(status, *ParseRfc3339("2026-01-01T00:00:00Z"));
  CHECK(text.find("ROLLOUT            PHASE   WAVE  HELD  MESSAGE\n"
                  "selectorsyncset/s  Halted  2/3   1     wave 2 fails\n"
                  "                                       failing c1/c1: webhook says no\n") !=
        std::string::npos);
  Json doc = status.ToJson(*ParseRfc3339("2026-01-01T00:00:00Z"), true);
  CHECK(doc["rollouts"][0]["phase"] == "Halted");
  CHECK(doc["rollouts"][0]["failing"][0]["cluster"] == "c1/c1");
  CHECK(doc["clusters"][2]["detail"] ==
        "held by rollout of SelectorSyncSet s, wave 3 (2 of 3 released, Halted)");

  // One cluster's report says why its entry is behind.
  ClusterReport report;
  report.key = "c2/c2";
  const Json c2_status = RoCs("c2", 1);
  std::string skip;
  report.sets = DescribeSets(RoCd("c2", ""), {}, {RoSet(2, kRoBySelector, st)}, &c2_status, &skip);
  REQUIRE(report.sets.size() == 1);
  const WallTime now = *ParseRfc3339("2026-01-01T00:00:00Z");
  CHECK(report.ToJson(now)["sets"][0]["heldBy"] ==
        "held by rollout of SelectorSyncSet s, wave 3 (2 of 3 released, Halted)");
  CHECK(FormatClusterReport(report, now)
            .find("1         Success  2026-01-01T00:00:00Z  held by rollout of SelectorSyncSet s, "
                  "wave 3 (2 of 3 released, Halted)") != std::string::npos);
}

TEST_CASE("rollout: a SyncSet's rollout covers the clusters it names in its namespace") {
  const SetRef ref = *ParseSetRef("ss/fleet/app");
  auto cd = [](const std::string& name) {
    Json j = RoCd(name, "");
    j["metadata"]["namespace"] = "fleet";
    return j;
  };
  Json ss = {
      {"metadata",
       {{"name", "app"},
        {"namespace", "fleet"},
        {"generation", 5},
        {"annotations", {{rollout::kSpecAnnotation, R"({"waves": [{"clusters": 1}]})"}}}}},
      {"spec", {{"clusterDeploymentRefs", Json::array({{{"name", "a"}}, {{"name", "b"}}})}}}};
  Json cs = {{"metadata", {{"name", "a"}, {"namespace", "fleet"}}},
             {"status",
              {{"syncSets", Json::array({{{"name", "app"},
                                          {"observedGeneration", 5},
                                          {"result", "Success"},
                                          {"lastTransitionTime", "2026-01-01T00:00:00Z"}}})}}}};
  Json elsewhere = RoCd("a", "");  // a cluster of the same name in another namespace
  auto view = ComputeRolloutView(ref, ss, {cd("a"), cd("b"), cd("c"), elsewhere}, {cs});
  REQUIRE_MESSAGE(view.ok(), view.status().ToString());
  CHECK(view->ToJson()["namespace"] == "fleet");
  size_t clusters = 0, synced = 0;
  for (const WaveView& w : view->waves) {
    clusters += w.clusters;
    synced += w.synced;
  }
  CHECK(clusters == 2);  // a and b of fleet: c is not named, the other a is elsewhere
  CHECK(synced == 1);
  CHECK(view->waves.size() == 2);  // one cluster, then the rest
}
