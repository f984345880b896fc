// syncbusctl as a shell user meets it, the binary against the simulator and a real broker with a
// publisher's requests queued and one message parked: every read command in every -o format
// (json and yaml carry the same document), kubectl's exit codes (0 ok, 1 the operation failed,
// 2 usage or parse error, never CLI11's own), the `kubectl syncbus` name, and bash completion.
#include <algorithm>
#include <fstream>
#include <map>

#include <doctest/doctest.h>

#include "common/amqp/session_impl.h"
#include "common/bus/sync_message.h"
#include "common/bus/topology.h"
#include "common/yaml_json.h"
#include "tests/support/files.h"
#include "tests/support/process_rig.h"
#include "tests/support/wait.h"

using namespace syncbus;
using namespace syncbus::testing;
using namespace std::chrono_literals;

namespace {

struct Run {
  int code = -1;
  std::string out, err;
};

struct Shell : ProcessRig {
  Shell() : ProcessRig("syncbus-ctl-cli") {}

  // `program` (a path) with `args`; stdout and stderr apart.
  Run Exec(const std::string& program, const std::vector<std::string>& args) {
    std::string base = dir + "/run-" + std::to_string(++runs_);
    std::vector<std::string> argv = {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>\"" + base + ".err\"",
                                     program};
    argv.insert(argv.end(), args.begin(), args.end());
    auto p = ChildProcess::Start(argv, base + ".out");
    REQUIRE_MESSAGE(p.ok(), p.status().ToString());
    auto code = p->Stop(0, 60s);
    REQUIRE(code.has_value());
    return {*code, p->Log(), ReadFile(base + ".err")};
  }
  Run Ctl(std::vector<std::string> args) { return Exec(BinaryDir() + "/ctl/syncbusctl", args); }
  std::vector<std::string> WithConfig(std::vector<std::string> args) const {
    args.insert(args.begin() + 1, {"-c", dir + "/syncbus.yaml"});
    return args;
  }

 private:
  int runs_ = 0;
};

// A dead-lettered request, as the consumer parks one.
void Park(amqp::Session& session, const std::string& cluster) {
  SyncRequest r;
  r.cluster_namespace = cluster;
  r.cluster_name = cluster;
  r.lane = amqp::Lane::kChange;
  r.reason = "syncset-changed";
  r.enqueued_at = "2026-01-01T00:00:00.000Z";
  amqp::Publication p;
  p.exchange = amqp::kDeadExchange;
  p.routing_key = "change";
  p.message = ToAmqpMessage(r, "syncbus-publisher", cluster, RealClock().WallNow());
  REQUIRE(session.Publish(p, 10s).ok());
}

}  // namespace

TEST_CASE("every read command prints table, wide, json and yaml, and exits like kubectl") {
  Shell sh;
  sh.StartSimulator({"--clusters", "3", "--syncsets", "1", "--resources", "1"});
  // A free admin port: 8080 may be taken (another copy of this test, Hive's manager).
  sh.WriteConfig(
      "publisher: {leaderElection: {enabled: false}}\n"
      "admin: {listen: \"127.0.0.1:0\"}\n");
  amqp::RabbitmqSession session(sh.vhost.Options("ctl-cli-test"));
  REQUIRE(session.Connect().ok());
  REQUIRE(session.Declare(amqp::SyncbusTopology(amqp::TopologyOptions{})).ok());
  Park(session, "cluster-0001");
  // The publisher's start-up resync: a request per cluster, on the trace stream too. No consumer
  // runs, so the clusters stay pending.
  ChildProcess publisher = sh.StartDaemon("publisher/syncbus-publisher", {}, "publisher.log");
  REQUIRE_MESSAGE(WaitFor(
                      [&] {
                        Run all = sh.Ctl(sh.WithConfig({"trace", "--all", "--since", "10m"}));
                        return all.code == 0 &&
                               std::count(all.out.begin(), all.out.end(), '\n') >= 3;
                      },
                      60s, 500ms),
                  publisher.Log());

  const std::string cluster = "cluster-0000/cluster-0000";
  const std::vector<std::vector<std::string>> reads = {
      {"status"},         {"status", cluster}, {"trace", cluster},
      {"trace", "--all"}, {"dlq", "list"},     {"wait", "--timeout", "1s", "-q"},
      {"topology"},
  };
  for (const auto& read : reads) {
    std::vector<std::string> base = read;
    if (base[0] == "dlq") {
      base.insert(base.begin() + 2, {"-c", sh.dir + "/syncbus.yaml"});
    } else {
      base = sh.WithConfig(base);
    }
    const int expected = read[0] == "wait" ? 1 : 0;  // no consumer: the barrier times out
    std::map<std::string, Run> runs;
    for (const char* format : {"table", "wide", "json", "yaml"}) {
      std::vector<std::string> args = base;
      args.insert(args.end(), {"-o", format});
      Run r = sh.Ctl(args);
      CAPTURE(args);
      CHECK_MESSAGE(r.code == expected, r.out << r.err);
      CHECK_MESSAGE(!r.out.empty(), r.err);
      runs[format] = r;
    }
    CAPTURE(read);
    if (read.size() > 1 && read[1] == "--all") {
      // JSON lines and YAML documents: one per event either way.
      auto docs = YamlDocumentsToJson(runs["yaml"].out);
      REQUIRE(docs.ok());
      CHECK(docs->size() == static_cast<size_t>(std::count(runs["json"].out.begin(),
                                                           runs["json"].out.end(), '\n')));
      CHECK(Json::parse(runs["json"].out.substr(0, runs["json"].out.find('\n')))["step"] ==
            (*docs)[0]["step"]);
    } else {
      Json json = Json::parse(runs["json"].out, nullptr, false);
      REQUIRE_MESSAGE(!json.is_discarded(), runs["json"].out);
      auto yaml = YamlToJson(runs["yaml"].out);
      REQUIRE_MESSAGE(yaml.ok(), runs["yaml"].out);
      // The same document (ages and times move between the two runs: compare the shape).
      std::vector<std::string> json_keys, yaml_keys;
      for (auto it = json.begin(); json.is_object() && it != json.end(); ++it)
        json_keys.push_back(it.key());
      for (auto it = yaml->begin(); yaml->is_object() && it != yaml->end(); ++it)
        yaml_keys.push_back(it.key());
      CHECK(json_keys == yaml_keys);
      CHECK(json.type() == yaml->type());
      CHECK(json.size() == yaml->size());
    }
    // Wide says more than table.
    CHECK_MESSAGE(runs["wide"].out.size() > runs["table"].out.size(), runs["table"].out
                                                                          << "\n"
                                                                          << runs["wide"].out);
  }

  // What the formats say.
  Run status = sh.Ctl(sh.WithConfig({"status", "-o", "yaml"}));
  auto fleet = YamlToJson(status.out);
  REQUIRE(fleet.ok());
  CHECK((*fleet)["queues"]["syncbus.dead"] == 1);
  CHECK((*fleet)["clusters"].size() == 3);
  CHECK(sh.Ctl(sh.WithConfig({"status", "-o", "wide"})).out.find("CLUSTER") != std::string::npos);
  Run dlq = sh.Ctl({"dlq", "list", "-c", sh.dir + "/syncbus.yaml", "-o", "wide"});
  CHECK(dlq.out.find("MESSAGE-ID") != std::string::npos);
  CHECK(dlq.out.find("cluster-0001/cluster-0001") != std::string::npos);
  Json listed = Json::parse(
      sh.Ctl({"dlq", "list", "-c", sh.dir + "/syncbus.yaml", "--json"}).out);  // deprecated alias
  REQUIRE(listed.size() == 1);
  Run wait = sh.Ctl(sh.WithConfig({"wait", "--timeout", "1s", "-q", "-o", "wide"}));
  CHECK(wait.out.find("pending: cluster-0002/cluster-0002") != std::string::npos);
  Run topology = sh.Ctl(sh.WithConfig({"topology", "-o", "table"}));
  CHECK(topology.out.find("queue     syncbus.work.change") != std::string::npos);

  // The operation failed: exit 1.
  Run missing = sh.Ctl(sh.WithConfig({"status", "nosuch/cluster"}));
  CHECK(missing.code == 1);
  CHECK(missing.err.find("ClusterDeployment nosuch/cluster") != std::string::npos);
  std::ofstream(sh.dir + "/closed.yaml")
      << "amqp: {host: 127.0.0.1, port: 1, connectTimeout: 1s}\n";
  CHECK(sh.Ctl({"dlq", "list", "-c", sh.dir + "/closed.yaml"}).code == 1);

  // Usage and parse errors: exit 2, with a message.
  const std::vector<std::vector<std::string>> usage_errors = {
      {},                             // no command
      {"nosuch"},                     // unknown command
      {"status", "--bogus"},          // unknown flag
      {"status", "-o", "xml"},        // unknown format
      {"status", "--since", "soon"},  // bad duration
      {"status", "a/b", "c/d"},       // extra argument
      {"dlq", "list"},                // no -c (nor $SYNCBUS_CONFIG)
      {"dlq"},                        // a subcommand is required
      {"dlq", "list", "-c", "x.yaml", "--limit", "many"},
      {"trace", "-c", sh.dir + "/syncbus.yaml"},  // neither a cluster nor --all
      {"wait", "--timeout", "never"},
      {"completion", "fish"},
      {"topology", "-c", sh.dir + "/nosuch.yaml"},
  };
  for (const auto& args : usage_errors) {
    CAPTURE(args);
    Run r = sh.Ctl(args);
    CHECK_MESSAGE(r.code == 2, r.out << r.err);
    CHECK(!r.err.empty());
  }
  // Without -c the config comes from $SYNCBUS_CONFIG (the daemons' pods set it); with neither,
  // a command that needs the broker says what is missing.
  const std::string ctl = BinaryDir() + "/ctl/syncbusctl";
  for (const char* command : {"status", "trace", "dlq"}) {
    std::vector<std::string> args = {"-u", "SYNCBUS_CONFIG", ctl, command};
    if (std::string(command) == "dlq") args.push_back("list");
    if (std::string(command) == "trace") args.push_back("--all");
    Run r = sh.Exec("/usr/bin/env", args);
    CAPTURE(command);
    CHECK(r.code == 2);
    CHECK_MESSAGE(
        r.err.find("no broker address: pass -c CONFIG or set SYNCBUS_CONFIG") != std::string::npos,
        r.err);
  }
  Run from_env = sh.Exec("/usr/bin/env", {"SYNCBUS_CONFIG=" + sh.dir + "/syncbus.yaml", ctl, "dlq",
                                          "list", "-o", "json"});
  CHECK_MESSAGE(from_env.code == 0, from_env.err);
  CHECK(Json::parse(from_env.out) ==
        Json::parse(sh.Ctl({"dlq", "list", "-c", sh.dir + "/syncbus.yaml", "-o", "json"}).out));
  Run env_status = sh.Exec(
      "/usr/bin/env", {"SYNCBUS_CONFIG=" + sh.dir + "/syncbus.yaml", ctl, "status", "-o", "yaml"});
  CHECK_MESSAGE(env_status.code == 0, env_status.err);

  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--help"}, {"--version"}, {"dlq", "purge", "--help"}}) {
    CAPTURE(args);
    CHECK(sh.Ctl(args).code == 0);
  }
}

TEST_CASE("syncbusctl is also the kubectl plugin `kubectl syncbus`, and completes in bash") {
  Shell sh;
  // The build tree has the plugin's names beside syncbusctl.
  const std::string plugin = BinaryDir() + "/ctl/kubectl-syncbus";
  Run help = sh.Exec(plugin, {"--help"});
  CHECK(help.code == 0);
  CHECK(help.out.find("kubectl syncbus [OPTIONS] SUBCOMMAND") != std::string::npos);
  Run bad = sh.Exec(plugin, {"status", "--bogus"});
  CHECK(bad.code == 2);
  Run defs = sh.Exec(plugin, {"topology", "-o", "yaml"});
  CHECK(defs.code == 0);
  CHECK(YamlToJson(defs.out)->contains("queues"));
  // kubectl's plugin completion runs kubectl_complete-syncbus with the words after `syncbus`.
  Run complete = sh.Exec(BinaryDir() + "/ctl/kubectl_complete-syncbus", {"dlq", ""});
  CHECK(complete.code == 0);
  CHECK(complete.out ==
        "list\tshow parked messages, one row per cluster and reason with its copies counted (-o "
        "wide: every copy), from the dead-letter index, without touching the queue\n"
        "replay\trepublish matching messages to the work exchange with attempts reset, each "
        "cluster's newest copy once (the older copies are removed)\n"
        "purge\tdelete matching messages (asks first unless --yes)\n"
        "reindex\trebuild the dead-letter index from the queue (messages parked before it "
        "existed; run it while no replay or purge runs)\n:4\n");

  // The bash script, sourced, answers through the binary.
  std::ofstream(sh.dir + "/complete.sh")
      << "source <(\"$1\" completion bash)\n"
         "COMP_WORDS=(\"$1\" dlq list --ou); COMP_CWORD=3; _syncbusctl; echo \"${COMPREPLY[*]}\"\n"
         "COMP_WORDS=(\"$1\" status -o ''); COMP_CWORD=3; _syncbusctl; echo \"${COMPREPLY[*]}\"\n";
  Run bash = sh.Exec("/bin/bash", {sh.dir + "/complete.sh", BinaryDir() + "/ctl/syncbusctl"});
  CHECK_MESSAGE(bash.code == 0, bash.err);
  CHECK(bash.out == "--output\ntable wide json yaml\n");
}
