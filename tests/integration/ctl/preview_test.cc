// `syncbusctl preview` on each RabbitMQ version, with the simulator as hub: the requests reach
// the preview queue in batches with a reply queue and the preview id, and a stand-in consumer
// (this test's, answering canned replies per cluster) is heard: the command groups the answers,
// ignores malformed and foreign replies with a warning, and ends in the timeout path when a
// cluster never answers.
#include <atomic>
#include <fstream>
#include <thread>

#include <doctest/doctest.h>

#include "common/amqp/session_impl.h"
#include "common/bus/preview_message.h"
#include "common/bus/topology.h"
#include "tests/kubesim/fleet.h"
#include "tests/support/process_rig.h"

using namespace syncbus;
using namespace std::chrono_literals;

namespace {

// Answers the preview queue as a consumer would, from a table instead of dry runs:
// cluster-0000 and cluster-0001 would change, cluster-0002 refuses, cluster-0003 never answers.
// Before its first real answer it sends a malformed reply and one of another preview.
class StandInConsumer {
 public:
  explicit StandInConsumer(amqp::ConnectionOptions options)
      : session_(std::move(options)), thread_([this] { Run(); }) {}
  ~StandInConsumer() { Stop(); }
  size_t requests() const { return requests_.load(); }
  size_t most_clusters() const { return most_clusters_.load(); }
  // What went wrong on its thread ("" = nothing): read after it stopped.
  std::string Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return error_;
  }

 private:
  void Run() {
    Status s = Serve();
    if (!s.ok()) error_ = s.ToString();
    session_.Close();
  }

  Status Serve() {
    SYNCBUS_RETURN_IF_ERROR(session_.Connect());
    auto tag = session_.Consume(amqp::kPreviewQueue, 10);
    SYNCBUS_RETURN_IF_ERROR(tag.status());
    while (!stop_) {
      auto d = session_.Next(100ms);
      SYNCBUS_RETURN_IF_ERROR(d.status());
      if (!d->has_value()) continue;
      const amqp::Message& m = (*d)->message;
      auto request = DecodePreviewRequest(m.body);
      SYNCBUS_RETURN_IF_ERROR(request.status());
      if (m.correlation_id != request->preview_id || m.reply_to.empty())
        return Internal("a request without its reply queue or correlation id");
      ++requests_;
      most_clusters_ = std::max(most_clusters_.load(), request->clusters.size());
      std::vector<amqp::Publication> replies;
      if (!sent_junk_) {
        sent_junk_ = true;
        amqp::Message junk =
            ToAmqpMessage(Reply(request->preview_id, "cluster-0000"), "t", RealClock().WallNow());
        junk.body = "{\"version\":1,\"previewId\":";
        replies.push_back({"", m.reply_to, junk});
        replies.push_back(
            {"", m.reply_to,
             ToAmqpMessage(Reply("pv-other", "cluster-0002"), "t", RealClock().WallNow())});
      }
      for (const PreviewCluster& c : request->clusters) {
        if (c.name == "cluster-0003") continue;
        replies.push_back(
            {"", m.reply_to,
             ToAmqpMessage(Reply(request->preview_id, c.name), "t", RealClock().WallNow())});
      }
      for (const Status& s : session_.PublishAll(replies, 10s)) {
        // kNotFound: the caller has gone, and its reply queue with it.
        if (s.code() != Code::kNotFound) SYNCBUS_RETURN_IF_ERROR(s);
      }
      SYNCBUS_RETURN_IF_ERROR(session_.Ack((*d)->delivery_tag));
    }
    return Status::Ok();
  }

  static PreviewReply Reply(const std::string& id, const std::string& cluster) {
    PreviewReply r;
    r.preview_id = id;
    r.cluster = {cluster, cluster};
    if (cluster == "cluster-0002") {
      r.objects = {{"v1",
                    "ConfigMap",
                    "app",
                    "cm",
                    ObjectOutcome::kRefused,
                    {},
                    "namespaces \"app\" not found"}};
    } else {
      r.objects = {{"v1", "Namespace", "", "app", ObjectOutcome::kCreated, {}, ""},
                   {"v1",
                    "ConfigMap",
                    "app",
                    "cm",
                    ObjectOutcome::kChanged,
                    {"data.a: \"1\" -> \"2\""},
                    ""}};
    }
    return r;
  }

  amqp::RabbitmqSession session_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> requests_{0}, most_clusters_{0};
  bool sent_junk_ = false;
  std::string error_;
  std::thread thread_;
};

struct PreviewRun {
  int code = -1;
  std::string log;
};

// The first line of `text` that starts with `prefix` ("" when none does).
std::string OutputLine(const std::string& text, const std::string& prefix) {
  for (size_t at = 0; at < text.size();) {
    size_t end = std::min(text.find('\n', at), text.size());
    if (text.compare(at, prefix.size(), prefix) == 0) return text.substr(at, end - at);
    at = end + 1;
  }
  return "";
}

}  // namespace

TEST_CASE("syncbusctl preview groups the consumers' answers and waits no longer than --timeout") {
  testing::ProcessRig rig("syncbus-preview");
  rig.StartSimulator({"--clusters", "5"});
  rig.WriteConfig("");
  amqp::RabbitmqSession admin(rig.vhost.Options("preview-test"));
  REQUIRE(admin.Connect().ok());
  REQUIRE(admin.Declare(amqp::SyncbusTopology()).ok());
  {
    std::ofstream set(rig.dir + "/set.yaml");
    set << "apiVersion: hive.openshift.io/v1\nkind: SelectorSyncSet\n"
           "metadata: {name: fleet-preview}\n"
           "spec:\n  clusterDeploymentSelector:\n    matchLabels: {"
        << kubesim::kFleetLabel << ": " << kubesim::kFleetLabelValue
        << "}\n    matchExpressions: [{key: cluster-index, operator: NotIn, values: ['4']}]\n"
           "  resources: [{apiVersion: v1, kind: ConfigMap, metadata: {name: cm, namespace: "
           "app}}]\n";
  }
  StandInConsumer consumer(rig.vhost.Options("stand-in-consumer"));
  auto run = [&](std::vector<std::string> args, const std::string& log) {
    std::vector<std::string> argv = {testing::BinaryDir() + "/ctl/syncbusctl", "preview", "-c",
                                     rig.dir + "/syncbus.yaml"};
    if (args.empty() || args[0] != "-f") argv.insert(argv.end(), {"-f", rig.dir + "/set.yaml"});
    argv.insert(argv.end(), args.begin(), args.end());
    auto p = testing::ChildProcess::Start(argv, rig.dir + "/" + log);
    REQUIRE_MESSAGE(p.ok(), p.status().ToString());
    auto code = p->Stop(0, 60s);
    REQUIRE(code.has_value());
    return PreviewRun{*code, p->Log()};
  };

  // Every cluster the selector matches (not cluster-0004): one refuses, one never answers.
  PreviewRun all = run({"--timeout", "4s", "--batch", "2"}, "all.log");
  CHECK_MESSAGE(all.code == 1, all.log);
  CHECK_MESSAGE(all.log.find("preview of SelectorSyncSet fleet-preview: 3 of 4 clusters "
                             "answered") != std::string::npos,
                all.log);
  CHECK_MESSAGE(
      all.log.find("would create 1, change 1 objects on 2 clusters; unchanged on 0 "
                   "clusters; 1 cluster refuses; 1 cluster did not answer") != std::string::npos,
      all.log);
  std::string refuse = OutputLine(all.log, "refuse     1         ConfigMap app/cm: ");
  CHECK(refuse.find("namespaces \"app\" not found  cluster-0002/cluster-0002") !=
        std::string::npos);
  CHECK(OutputLine(all.log, "no-answer  1 ").find("cluster-0003/cluster-0003") !=
        std::string::npos);
  CHECK(all.log.find("warning: ignoring a reply: preview reply: body is not valid JSON") !=
        std::string::npos);
  CHECK(consumer.requests() == 2);  // 4 clusters in batches of 2
  CHECK(consumer.most_clusters() == 2);

  // Only the silent one besides a good one: the timeout path.
  PreviewRun silent = run(
      {"--clusters", "cluster-0000/cluster-0000,cluster-0003", "--timeout", "3s"}, "silent.log");
  CHECK_MESSAGE(silent.code == 3, silent.log);
  CHECK(OutputLine(silent.log, "no-answer  1 ").find("cluster-0003/cluster-0003") !=
        std::string::npos);

  // All answer, none refuses: 0, with every reply in full in JSON.
  PreviewRun clean =
      run({"--clusters", "cluster-0000,cluster-0001", "-o", "json", "-q", "--timeout", "30s"},
          "clean.log");
  REQUIRE_MESSAGE(clean.code == 0, clean.log);
  Json doc = Json::parse(clean.log);
  CHECK(doc["summary"]["change"] == 2);
  CHECK(doc["replies"].size() == 2);
  CHECK(doc["replies"][0]["objects"][1]["diff"][0] == "data.a: \"1\" -> \"2\"");

  // A cluster named but not on the hub is reported, and fails the run.
  PreviewRun missing =
      run({"--clusters", "cluster-0000,nope/nope", "--timeout", "20s"}, "missing.log");
  CHECK_MESSAGE(missing.code == 1, missing.log);
  CHECK(OutputLine(missing.log, "not-found  1 ").find("nope/nope") != std::string::npos);

  // Anything but a set is refused before anything is sent.
  std::ofstream(rig.dir + "/cm.yaml") << "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n";
  PreviewRun bad = run({"-f", rig.dir + "/cm.yaml"}, "bad.log");
  CHECK(bad.code == 2);
  CHECK(bad.log.find("preview takes a hive.openshift.io/v1 SyncSet or SelectorSyncSet") !=
        std::string::npos);
  CHECK(consumer.Stop() == "");
}
