// End to end, as an operator meets it: one cluster is behind. `syncbusctl status` shows it parked
// while the rest are synced; `status CLUSTER` shows its failing set; `trace` shows its request
// from the publisher's decision through each attempt to the dead-letter queue; after the fix,
// `dlq replay` brings it back and both commands show it synced, the replay in its timeline.
#include <doctest/doctest.h>
#include <signal.h>

#include "tests/support/files.h"
#include "tests/support/process_rig.h"
#include "tests/support/wait.h"

using namespace syncbus;
using namespace syncbus::testing;
using namespace std::chrono_literals;

namespace {

constexpr int kTraceClusters = 6;
constexpr char kBroken[] = "cluster-0002";
const std::string kBrokenKey = std::string(kBroken) + "/" + kBroken;

struct Operator : ProcessRig {
  Operator() : ProcessRig("syncbus-e2e-status") {}

  // Runs syncbusctl with `args`; returns its exit code and output (stdout then stderr).
  std::pair<int, std::string> Ctl(std::vector<std::string> args) {
    args.insert(args.begin(), BinaryDir() + "/ctl/syncbusctl");
    std::string log = dir + "/ctl-" + std::to_string(++runs_) + ".log";
    auto p = ChildProcess::Start(args, log);
    REQUIRE_MESSAGE(p.ok(), p.status().ToString());
    auto code = p->Stop(0, 60s);
    REQUIRE(code.has_value());
    return {*code, p->Log()};
  }
  Json CtlJson(std::vector<std::string> args) {
    args.push_back("-o");
    args.push_back("json");
    auto [code, out] = Ctl(args);
    REQUIRE_MESSAGE(code == 0, out);
    Json j = Json::parse(out, nullptr, false);
    REQUIRE_MESSAGE(!j.is_discarded(), out);
    return j;
  }
  // Null until the daemons have declared the topology (before that, status fails or warns on
  // stderr, which shares the log with the JSON).
  Json Status() {
    auto [code, out] = Ctl({"status", "-c", dir + "/syncbus.yaml", "--since", "10m", "-o", "json"});
    if (code != 0) return Json();
    Json j = Json::parse(out, nullptr, false);
    return j.is_discarded() ? Json() : j;
  }
  void Faults(double error_rate) {
    http::Request r;
    r.method = "PUT";
    r.url = "http://127.0.0.1:" + std::to_string(sim_port) + "/_sim/faults";
    r.headers = {{"Content-Type", "application/json"}};
    r.body = Json{{"clusters", Json::array({kBroken})}, {"errorRate", error_rate}}.dump();
    auto set = transport->Call(r);
    REQUIRE_MESSAGE(set.ok(), set.status().ToString());
    REQUIRE_MESSAGE(set->status == 200, set->body);
  }

 private:
  int runs_ = 0;
};

std::vector<std::string> Steps(const Json& events) {
  std::vector<std::string> out;
  for (const auto& e : events)
    out.push_back(e["step"].get<std::string>() + ":" + e.value("outcome", ""));
  return out;
}

}  // namespace

TEST_CASE(
    "an operator follows a cluster that is behind from status to trace to the DLQ and replay") {
  Operator op;
  op.StartSimulator({"--clusters", std::to_string(kTraceClusters), "--syncsets", "1",
                     "--selector-syncsets", "1", "--resources", "2"});
  op.Faults(1.0);  // the broken cluster's apiserver answers every request with a 5xx
  op.WriteConfig(
      "log: {level: info}\n"
      "admin: {listen: \"127.0.0.1:0\"}\n"
      "topology: {retryTiers: [1s, 2s]}\n"
      "publisher: {leaderElection: {enabled: false}}\n"
      "consumer: {prefetch: 4, maxAttempts: 3}\n");
  ChildProcess publisher = op.StartDaemon("publisher/syncbus-publisher", {}, "publisher.log");
  ChildProcess consumer =
      op.StartDaemon("consumer/syncbus-consumer", {"--name", "consumer-1"}, "consumer.log");

  Json status;
  bool parked = WaitFor(
      [&] {
        status = op.Status();
        return !status.is_null() && status["states"]["parked"]["count"] == 1 &&
               status["states"]["synced"]["count"] == kTraceClusters - 1 &&
               status["trace"].value("events", 0) >= 2 * kTraceClusters;
      },
      90s, 500ms);
  REQUIRE_MESSAGE(parked, status.dump(2) << "\n" << consumer.Log().substr(0, 3000));
  CHECK(status["states"]["parked"]["oldest"]["cluster"] == kBrokenKey);
  CHECK(status["states"]["parked"]["breakdown"]["max-attempts"] == 1);
  CHECK(status["queues"]["syncbus.dead"] == 1);
  CHECK(status["states"]["in-flight"]["count"] == 0);

  auto [table_code, table] = op.Ctl({"status", "-c", op.dir + "/syncbus.yaml"});
  CHECK(table_code == 0);
  CHECK_MESSAGE(table.find("parked     1         " + kBrokenKey) != std::string::npos, table);
  CHECK_MESSAGE(table.find("synced     5") != std::string::npos, table);

  // One cluster: where its request is, and which set fails with what.
  Json one = op.CtlJson({"status", "-c", op.dir + "/syncbus.yaml", kBrokenKey});
  CHECK(one["state"] == "parked");
  CHECK(one["request"]["where"] == "parked");
  CHECK(one["request"]["queue"] == "syncbus.dead");
  bool failing_set = false;
  for (const auto& s : one["sets"]) failing_set = failing_set || s.value("result", "") == "Failure";
  CHECK_MESSAGE(failing_set, one.dump(2));
  auto [bare_code, bare] = op.Ctl({"status", "-c", op.dir + "/syncbus.yaml", kBroken});
  CHECK(bare_code == 2);  // a bare name needs -n
  CHECK(bare.find("NAMESPACE/NAME") != std::string::npos);

  // Its timeline: decided and published once, then three attempts, the last parked. (A daemon
  // publishes its trace events every 250 ms, after the step they record.)
  Json trace;
  std::vector<std::string> steps;
  WaitFor(
      [&] {
        trace = op.CtlJson({"trace", "-c", op.dir + "/syncbus.yaml", kBroken});
        steps = Steps(trace["events"]);
        return steps.size() >= 7;
      },
      10s, 250ms);
  INFO(trace.dump(2));
  REQUIRE(steps.size() == 7);
  CHECK(steps[0] == "published:");
  CHECK(steps[1] == "delivered:");
  CHECK(steps[2] == "settled:retry");
  CHECK(trace["events"][2]["tier"] == "1s");
  CHECK(steps[4] == "settled:retry");
  CHECK(trace["events"][4]["tier"] == "2s");
  CHECK(steps[6] == "settled:parked");
  CHECK(trace["events"][6]["deadReason"] == "max-attempts");
  CHECK(trace["events"][6]["sets"][0]["success"] == false);
  CHECK(trace["position"]["where"] == "parked");
  auto [trace_code, timeline] = op.Ctl({"trace", "-c", op.dir + "/syncbus.yaml", kBrokenKey});
  CHECK(trace_code == 0);
  CHECK(timeline.find("parked     ") != std::string::npos);
  CHECK(timeline.find("now: parked in syncbus.dead") != std::string::npos);

  // The fix, then the replay: the cluster syncs and its timeline says how.
  op.Faults(0.0);
  auto [replay_code, replay] =
      op.Ctl({"dlq", "replay", "-c", op.dir + "/syncbus.yaml", "--cluster", kBrokenKey});
  REQUIRE_MESSAGE(replay_code == 0, replay);
  bool synced = WaitFor(
      [&] {
        status = op.Status();
        return !status.is_null() && status["states"]["synced"]["count"] == kTraceClusters;
      },
      60s, 500ms);
  REQUIRE_MESSAGE(synced, status.dump(2));
  CHECK(status["queues"]["syncbus.dead"] == 0);
  WaitFor(
      [&] {
        trace = op.CtlJson({"trace", "-c", op.dir + "/syncbus.yaml", kBrokenKey});
        steps = Steps(trace["events"]);
        return !steps.empty() && steps.back() == "settled:applied";
      },
      10s, 250ms);
  REQUIRE(steps.size() >= 10);
  CHECK(steps[7] == "replayed:");
  CHECK(steps.back() == "settled:applied");
  CHECK(trace["position"]["where"] == "none");

  for (ChildProcess* d : {&publisher, &consumer})
    CHECK(d->Stop(SIGTERM, 30s) == std::optional<int>(0));
}
