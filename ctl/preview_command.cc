// `syncbusctl preview`: asks the consumers what a changed set would do on each of its clusters,
// over the preview queue, and prints their answers grouped (ctl/preview.h).
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include <unistd.h>

#include "common/amqp/session_impl.h"
#include "common/bus/daemon.h"
#include "common/bus/topology.h"
#include "common/http/curl_transport.h"
#include "common/kube/client_impl.h"
#include "common/log.h"
#include "common/random.h"
#include "ctl/commands.h"
#include "ctl/preview.h"

namespace syncbus::ctl {
namespace {

using Steady = std::chrono::steady_clock;

int FailWith(std::ostream& err, const std::string& message, int code = 1) {
  err << "syncbusctl: " << message << std::endl;
  return code;
}

Result<std::string> ReadInput(const std::string& file) {
  std::stringstream text;
  if (file == "-") {
    text << std::cin.rdbuf();
    return text.str();
  }
  std::ifstream in(file);
  if (!in) return NotFound("cannot read " + file);
  text << in.rdbuf();
  return text.str();
}

std::string NewPreviewId() {
  char id[24];
  auto draw = [] { return static_cast<uint32_t>(RealRandom().Uniform() * 4294967296.0); };
  std::snprintf(id, sizeof id, "pv-%08" PRIx32 "%08" PRIx32, draw(), draw());
  return id;
}

// The clusters of the set, read from the hub page by page.
Result<ClusterPicker::Choice> PickClusters(kube::Client& hub, const Json& set,
                                           const PreviewOptions& options) {
  auto narrow = ParseSelectorFlag(options.selector);
  if (!narrow.ok()) return narrow.status();
  auto picker = ClusterPicker::Create(set, std::move(*narrow), options.clusters);
  if (!picker.ok()) return picker.status();
  kube::ListOptions list;
  list.on_page = [&](std::vector<Json>& page) {
    for (const Json& cd : page) picker->Add(cd);
    page.clear();
  };
  auto listed = hub.List(
      kube::Collection(kube::resources::kClusterDeployments, picker->ListNamespace()), list);
  if (!listed.ok()) return listed.status().Annotate("listing ClusterDeployments");
  return std::move(*picker).Finish();
}

// Publishes one request per batch of clusters, confirmed.
Status PublishRequests(amqp::Session& session, const Json& set, const std::string& preview_id,
                       const std::vector<PreviewCluster>& clusters, size_t batch,
                       const std::string& reply_queue) {
  std::vector<amqp::Publication> publications;
  const WallTime now = RealClock().WallNow();
  for (size_t first = 0; first < clusters.size(); first += batch) {
    PreviewRequest request;
    request.preview_id = preview_id;
    request.set = set;
    auto end = clusters.begin() + static_cast<ptrdiff_t>(std::min(clusters.size(), first + batch));
    request.clusters.assign(clusters.begin() + static_cast<ptrdiff_t>(first), end);
    amqp::Message message = ToAmqpMessage(
        request, "syncbusctl", preview_id + "/" + std::to_string(first / batch), reply_queue, now);
    if (message.body.size() > kMaxPreviewRequestBytes) {
      return InvalidArgument("a request of " + std::to_string(request.clusters.size()) +
                             " clusters takes " + std::to_string(message.body.size()) +
                             " bytes, over the limit of " +
                             std::to_string(kMaxPreviewRequestBytes) + "; use a smaller --batch");
    }
    publications.push_back({amqp::kWorkExchange, amqp::kPreviewRoutingKey, std::move(message)});
  }
  for (const Status& s : session.PublishAll(publications, std::chrono::seconds(30))) {
    if (s.code() == Code::kNotFound) {
      return NotFound(std::string("the broker has no ") + amqp::kPreviewQueue +
                      " queue to take the requests (consumers of a version with previews "
                      "declare it when they start)");
    }
    SYNCBUS_RETURN_IF_ERROR(s);
  }
  return Status::Ok();
}

}  // namespace

Result<Json> ReadPreviewFile(const std::string& file) {
  auto text = ReadInput(file);
  if (!text.ok()) return text.status();
  auto set = ReadPreviewSet(*text);
  if (!set.ok()) return InvalidArgument(file + ": " + set.status().message());
  return set;
}

int RunPreview(const PreviewOptions& options, const Json& set, amqp::Session& session,
               kube::Client& hub, const std::atomic<bool>& stop, std::ostream& out,
               std::ostream& err) {
  const Steady::time_point start = Steady::now();
  auto choice = PickClusters(hub, set, options);
  if (!choice.ok()) {
    return FailWith(err, choice.status().message(),
                    choice.status().code() == Code::kInvalidArgument ? 2 : 1);
  }
  const std::string preview_id = NewPreviewId();
  ReplyCollector replies(preview_id, choice->clusters);
  if (!choice->clusters.empty()) {
    auto queue = session.Inspect(amqp::kPreviewQueue);
    if (queue.ok() && queue->consumers == 0) {
      err << "syncbusctl: warning: no consumer serves " << amqp::kPreviewQueue
          << "; the requests wait there until --timeout" << std::endl;
    }
    auto reply_queue = session.DeclareReplyQueue();
    if (!reply_queue.ok()) return FailWith(err, reply_queue.status().message());
    auto tag = session.Consume(*reply_queue, 500);
    if (!tag.ok()) return FailWith(err, tag.status().message());
    Status sent =
        PublishRequests(session, set, preview_id, choice->clusters, options.batch, *reply_queue);
    if (!sent.ok()) return FailWith(err, "publishing the preview requests: " + sent.message());
  }
  const bool terminal = isatty(STDERR_FILENO) == 1 && !options.quiet;
  const Steady::time_point deadline = start + options.timeout;
  Steady::time_point last_line = start;
  size_t ignored = 0;
  auto progress = [&] {
    err << "preview: " << WithThousands(replies.answered()) << "/" << WithThousands(replies.asked())
        << " clusters answered" << std::endl;
  };
  while (!replies.done() && !stop.load()) {
    const Steady::time_point now = Steady::now();
    if (now >= deadline) break;
    if (terminal && now - last_line >= std::chrono::seconds(1)) {
      progress();
      last_line = now;
    }
    auto wait = std::min<Steady::duration>(deadline - now, std::chrono::milliseconds(250));
    auto delivery = session.Next(std::chrono::duration_cast<std::chrono::milliseconds>(wait));
    if (!delivery.ok()) {
      return FailWith(err, "lost the broker connection, and the replies with it: " +
                               delivery.status().message());
    }
    if (!delivery->has_value()) continue;
    const amqp::Delivery& d = **delivery;
    std::string why;
    auto verdict = replies.Accept(d.message.correlation_id, d.message.body, &why);
    if (verdict == ReplyCollector::Verdict::kMalformed ||
        verdict == ReplyCollector::Verdict::kUnknownCluster) {
      if (++ignored <= 10) err << "syncbusctl: warning: ignoring a reply: " << why << std::endl;
    }
    if (Status s = session.Ack(d.delivery_tag); !s.ok()) return FailWith(err, s.message());
  }
  if (ignored > 10)
    err << "syncbusctl: warning: ignored " << ignored << " replies in all" << std::endl;
  if (!options.quiet) progress();
  auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - start);
  PreviewReport report = BuildPreviewReport(set, replies, *choice, elapsed);
  report.preview_id = preview_id;
  out << FormatPreviewReport(report, options.output) << std::flush;
  return report.ExitCode(choice->named_missing);
}

int RunPreview(const PreviewOptions& options) {
  auto config = LoadOptionalConfig(options.config_file);
  if (!config.ok()) return FailWith(std::cerr, config.status().message(), 2);
  auto set = ReadPreviewFile(options.file);  // bad input is told before any connection
  if (!set.ok()) return FailWith(std::cerr, set.status().message(), 2);
  log::Init("warn", config->log.format, "syncbusctl");
  HubConfig hub_config = config->hub;
  if (!options.kubeconfig.empty()) hub_config.kubeconfig = options.kubeconfig;
  if (!options.context.empty()) hub_config.context = options.context;
  auto cluster = CommandLineHubConfig(hub_config);
  if (!cluster.ok()) return FailWith(std::cerr, cluster.status().message(), 2);
  auto transport = http::CurlTransport::Create({});
  if (!transport.ok()) return FailWith(std::cerr, transport.status().message(), 2);
  kube::ClientImpl hub(*cluster, std::shared_ptr<http::Transport>(std::move(*transport)));
  amqp::ConnectionOptions amqp_options = config->amqp;
  amqp_options.connection_name = "syncbusctl preview";
  amqp::RabbitmqSession session(amqp_options);
  if (Status s = session.Connect(); !s.ok())
    return FailWith(std::cerr, "connecting to the broker: " + s.message());
  int code = RunPreview(options, *set, session, hub, InstallStopSignals(), std::cout, std::cerr);
  session.Close();
  return code;
}

}  // namespace syncbus::ctl
