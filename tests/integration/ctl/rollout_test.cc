// `syncbusctl rollout status|resume|abort` and `wait` as an operator runs them, against
// syncbus-kubesim as the hub: a SelectorSyncSet rolled out by ring over six clusters, halted in
// its second wave with the state the publisher's leader writes. The state annotation the commands
// write is read back from the hub. (The unit tests run the same commands in process with the
// set written between their read and their write: the conflict retried.)
#include "common/bus/rollout.h"

#include <doctest/doctest.h>

#include "common/kube/resource.h"
#include "tests/support/process_rig.h"
#include "tests/support/rollout_objects.h"

using namespace syncbus;
using namespace std::chrono_literals;

namespace {

struct RolloutRun {
  int code = -1;
  std::string log;
};

}  // namespace

TEST_CASE("syncbusctl rollout shows a halted rollout wave by wave, resumes and aborts it") {
  testing::ProcessRig rig("syncbus-rollout");
  rig.StartSimulator({"--clusters", "6"});
  kube::Client& hub = *rig.hub;
  auto run = [&](std::vector<std::string> args, const std::string& log) {
    std::vector<std::string> argv = {testing::BinaryDir() + "/ctl/syncbusctl"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--kubeconfig", rig.dir + "/hub.kubeconfig"});
    auto p = testing::ChildProcess::Start(argv, rig.dir + "/" + log);
    REQUIRE_MESSAGE(p.ok(), p.status().ToString());
    auto code = p->Stop(0, 60s);
    REQUIRE(code.has_value());
    return RolloutRun{*code, p->Log()};
  };

  auto set =
      hub.Create(kube::Collection(kube::resources::kSelectorSyncSets),
                 testing::RolledOutSelectorSyncSet(
                     "fleet-cm", R"({"waves": [{"selector": {"matchLabels": {"ring": "canary"}}},
                                                      {"selector": {"matchLabels": {"ring": "early"}}}],
                                            "maxFailures": 0, "healthyFor": "2m"})"));
  REQUIRE_MESSAGE(set.ok(), set.status().ToString());
  testing::LabelFleetCluster(hub, "cluster-0000", "ring", "canary");
  testing::LabelFleetCluster(hub, "cluster-0001", "ring", "early");
  testing::LabelFleetCluster(hub, "cluster-0002", "ring", "early");
  testing::WriteSelectorSetEntry(hub, "cluster-0000", "fleet-cm", 1);
  testing::WriteSelectorSetEntry(hub, "cluster-0001", "fleet-cm", 1,
                                 "admission webhook \"policy\" denied the request");
  rollout::RolloutState halted;
  halted.generation = 1;
  halted.wave = 2;
  halted.waves = 3;
  halted.phase = rollout::Phase::kHalted;
  halted.wave_started_at = "2026-01-01T00:00:00Z";
  halted.message = "wave 2: 1 of 2 clusters failed, more than the 0 allowed";
  halted.failing = {
      {"cluster-0001/cluster-0001", "admission webhook \"policy\" denied the request"}};
  testing::WriteRolloutState(hub, "fleet-cm", halted);

  RolloutRun status = run({"rollout", "status", "sss/fleet-cm"}, "status.log");
  REQUIRE_MESSAGE(status.code == 0, status.log);
  CHECK_MESSAGE(status.log.find("phase:    Halted at wave 2 of 3\n") != std::string::npos,
                status.log);
  CHECK(status.log.find("message:  wave 2: 1 of 2 clusters failed, more than the 0 allowed\n") !=
        std::string::npos);
  CHECK(status.log.find("3     the rest                           no        3         0       0  "
                        "      3        0        0") != std::string::npos);
  CHECK(status.log.find("2     cluster-0001/cluster-0001  admission webhook \"policy\" denied the "
                        "request") != std::string::npos);

  // wait stops at once on the halt, with its own exit code.
  RolloutRun wait = run({"wait", "--timeout", "5m", "-q"}, "wait.log");
  CHECK_MESSAGE(wait.code == 3, wait.log);
  CHECK(wait.log.find("syncbusctl: rollout of SelectorSyncSet fleet-cm is Halted at wave 2 of 3: "
                      "wave 2: 1 of 2 clusters failed") != std::string::npos);
  CHECK(wait.log.find("  failing cluster-0001/cluster-0001: admission webhook") !=
        std::string::npos);

  RolloutRun resume = run({"rollout", "resume", "selectorsyncset/fleet-cm"}, "resume.log");
  REQUIRE_MESSAGE(resume.code == 0, resume.log);
  rollout::RolloutState resumed = testing::ReadRolloutState(hub, "fleet-cm");
  CHECK(resumed.phase == rollout::Phase::kProgressing);
  CHECK(resumed.wave == 2);
  CHECK(resumed.failing.empty());
  CHECK(resumed.message.empty());
  CHECK(resumed.wave_started_at != "2026-01-01T00:00:00Z");
  RolloutRun again = run({"rollout", "resume", "sss/fleet-cm"}, "again.log");
  CHECK(again.code == 1);
  CHECK(
      again.log.find("cannot resume the rollout of SelectorSyncSet fleet-cm: it is Progressing") !=
      std::string::npos);

  RolloutRun abort = run({"rollout", "abort", "sss/fleet-cm"}, "abort.log");
  REQUIRE_MESSAGE(abort.code == 0, abort.log);
  rollout::RolloutState aborted = testing::ReadRolloutState(hub, "fleet-cm");
  CHECK(aborted.phase == rollout::Phase::kAborted);
  CHECK(aborted.message.starts_with("aborted by syncbusctl at 20"));
  RolloutRun json = run({"rollout", "status", "sss/fleet-cm", "-o", "json"}, "json.log");
  REQUIRE_MESSAGE(json.code == 0, json.log);
  Json doc = Json::parse(json.log);
  CHECK(doc["phase"] == "Aborted");
  CHECK(doc["waves"][0]["synced"] == 1);

  CHECK(run({"rollout", "status", "sss/missing"}, "missing.log").code == 1);
  CHECK(run({"rollout", "abort", "fleet-cm"}, "usage.log").code == 2);
}
