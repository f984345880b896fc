// `syncbusctl status` and `trace`: read the hub, the trace stream and the dead-letter index (never
// the dead-letter queue itself, see ctl/dead_letter_index.h).
#include <iostream>

#include "common/amqp/session_impl.h"
#include "common/bus/cluster_claim.h"
#include "common/bus/config.h"
#include "common/bus/daemon.h"
#include "common/bus/topology.h"
#include "common/http/curl_transport.h"
#include "common/kube/api_error.h"
#include "common/kube/client_impl.h"
#include "common/kube/resource_version.h"
#include "common/log.h"
#include "common/time_format.h"
#include "ctl/commands.h"
#include "ctl/fleet_status.h"
#include "ctl/request_timeline.h"
#include "ctl/text_table.h"
#include "ctl/trace_reader.h"

namespace syncbus::ctl {
namespace {

int Fail(const std::string& message, int code = 1) {
  std::cerr << "syncbusctl: " << message << std::endl;
  return code;
}

Result<std::unique_ptr<amqp::RabbitmqSession>> ConnectBroker(const Config& config,
                                                             const std::string& what) {
  amqp::ConnectionOptions options = config.amqp;
  options.connection_name = "syncbusctl " + what;
  auto session = std::make_unique<amqp::RabbitmqSession>(options);
  if (Status s = session->Connect(); !s.ok()) return s.Annotate("connecting to the broker");
  return session;
}

// A missing trace stream (nothing of this version has connected yet) is reported and read as
// empty: status still shows the hub's view and what is parked.
Result<TraceRead> ReadWindow(amqp::Session& session, const std::string& cluster,
                             std::chrono::milliseconds since, WallTime now) {
  TraceQuery query;
  query.since = now - since;
  query.until = now;
  query.cluster = cluster;
  auto read = ReadTrace(session, query);
  if (!read.ok() && read.status().code() == Code::kNotFound) {
    std::cerr << "syncbusctl: " << read.status().message() << "; requests cannot be located"
              << std::endl;
    return TraceRead{};
  }
  return read;
}

// What is parked (of `cluster`, or all), from the dead-letter index. A missing index (no daemon
// of this version has connected yet) is reported and read as empty; so is a disagreement between
// the index and the queue.
Result<DlqListing> ParkedLetters(amqp::Session& session, const std::string& cluster) {
  DeadLetterFilter filter;
  filter.cluster = cluster;
  auto listed = ListDeadLetters(session, filter, 0, RealClock());
  if (!listed.ok() && listed.status().code() == Code::kNotFound) {
    std::cerr << "syncbusctl: " << listed.status().message() << "; parked requests cannot be shown"
              << std::endl;
    return DlqListing{};
  }
  if (listed.ok()) {
    if (std::string note = listed->Discrepancy(); !note.empty())
      std::cerr << "syncbusctl: note: " << note << std::endl;
  }
  return listed;
}

std::map<std::string, uint32_t> QueueDepths(amqp::Session& session, const Config& config) {
  std::map<std::string, uint32_t> out;
  for (const auto& q : amqp::SyncbusTopology(config.topology).queues) {
    // A stream keeps what it was sent: not a backlog.
    if (q.name == amqp::kTraceQueue || q.name == amqp::kDeadIndexQueue) continue;
    if (auto info = session.Inspect(q.name); info.ok()) out[q.name] = info->messages;
  }
  return out;
}

// "ns/name", or a bare name completed with -n.
Result<std::pair<std::string, std::string>> SplitCluster(const std::string& cluster,
                                                         const std::string& ns) {
  size_t slash = cluster.find('/');
  if (slash != std::string::npos)
    return std::pair{cluster.substr(0, slash), cluster.substr(slash + 1)};
  if (ns.empty())
    return InvalidArgument("cluster \"" + cluster +
                           "\": give it as NAMESPACE/NAME or with -n NAMESPACE");
  return std::pair{ns, cluster};
}

int ClusterStatusReport(kube::Client& hub, amqp::Session& broker, const StatusOptions& options,
                        WallTime now) {
  namespace res = kube::resources;
  auto names = SplitCluster(options.cluster, options.ns);
  if (!names.ok()) return Fail(names.status().message(), 2);
  const auto& [ns, name] = *names;
  const std::string key = ns + "/" + name;
  auto cd = hub.Get(kube::Object(res::kClusterDeployments, ns, name));
  if (!cd.ok()) return Fail(cd.status().Annotate("reading ClusterDeployment " + key).message());
  auto ss = hub.List(kube::Collection(res::kSyncSets, ns), {});
  if (!ss.ok()) return Fail(ss.status().Annotate("listing SyncSets").message());
  auto sss = hub.List(kube::Collection(res::kSelectorSyncSets), {});
  if (!sss.ok()) return Fail(sss.status().Annotate("listing SelectorSyncSets").message());
  auto cs = hub.Get(kube::Object(res::kClusterSyncs, ns, name));
  if (!cs.ok() && cs.status().code() != Code::kNotFound)
    return Fail(cs.status().Annotate("reading ClusterSync").message());
  auto lease = hub.Get(kube::Object(res::kClusterSyncLeases, ns, name));
  if (!lease.ok() && lease.status().code() != Code::kNotFound)
    return Fail(lease.status().Annotate("reading ClusterSyncLease").message());

  auto trace = ReadWindow(broker, key, options.since, now);
  if (!trace.ok()) return Fail(trace.status().message());
  auto parked = ParkedLetters(broker, key);
  if (!parked.ok())
    return Fail(parked.status().Annotate("reading the dead-letter index").message());

  ClusterReport report;
  report.key = key;
  report.sets =
      DescribeSets(*cd, ss->items, sss->items, cs.ok() ? &*cs : nullptr, &report.skip_reason);
  FleetProgress hub_view = ComputeProgress({*cd}, ss->items, sss->items,
                                           cs.ok() ? std::vector<Json>{*cs} : std::vector<Json>{});
  report.position = LocateRequest(trace->events, parked->matched);
  if (!hub_view.states.empty())
    report.state = ClusterStateOf(hub_view.states.front(), report.position).state;
  if (lease.ok()) {
    const ClaimRecord claim = ClaimOf(*lease);
    report.lease_holder = claim.holder;
    report.lease_renewed = claim.renew_time;
    report.lease_seconds = static_cast<int>(claim.duration_seconds);
    if (cs.ok()) {
      auto status_rv = kube::ParseResourceVersion((*cs)["metadata"].value("resourceVersion", ""));
      auto lease_rv = kube::ParseResourceVersion((*lease)["metadata"].value("resourceVersion", ""));
      report.lease_released_by_status = status_rv && lease_rv && *status_rv > *lease_rv;
    }
  }
  report.recent = std::move(trace->events);
  if (IsDocument(options.output)) {
    std::cout << FormatDocument(report.ToJson(now), options.output) << std::flush;
  } else {
    std::cout << FormatClusterReport(report, now);
    // wide: the request's recent steps too, as `trace -o wide` shows them.
    if (options.output == OutputFormat::kWide && !report.recent.empty()) {
      std::cout << "\n" << FormatTimeline(report.recent, true);
    }
  }
  return 0;
}

}  // namespace

int RunStatus(const StatusOptions& options) {
  auto config = LoadOptionalConfig(options.config_file);
  if (!config.ok()) return Fail(config.status().message(), 2);
  log::Init("warn", config->log.format, "syncbusctl");
  HubConfig hub_config = config->hub;
  if (!options.kubeconfig.empty()) hub_config.kubeconfig = options.kubeconfig;
  if (!options.context.empty()) hub_config.context = options.context;
  auto cluster = CommandLineHubConfig(hub_config);
  if (!cluster.ok()) return Fail(cluster.status().message(), 2);
  auto transport = http::CurlTransport::Create({});
  if (!transport.ok()) return Fail(transport.status().message(), 2);
  kube::ClientImpl hub(*cluster, std::shared_ptr<http::Transport>(std::move(*transport)));
  auto broker = ConnectBroker(*config, "status");
  if (!broker.ok()) return Fail(broker.status().message());
  const WallTime now = RealClock().WallNow();
  if (!options.cluster.empty()) {
    int code = ClusterStatusReport(hub, **broker, options, now);
    (*broker)->Close();
    return code;
  }
  auto progress = ReadProgress(hub, options.ns);
  if (!progress.ok()) return Fail(progress.status().message());
  auto trace = ReadWindow(**broker, "", options.since, now);
  if (!trace.ok()) return Fail(trace.status().message());
  auto parked = ParkedLetters(**broker, "");
  if (!parked.ok())
    return Fail(parked.status().Annotate("reading the dead-letter index").message());
  // The depths last: a consumer traces a request parked or retried only once its copy is
  // confirmed in its queue, so every copy the trace shows is counted (read first, a park between
  // the two reads showed the request parked beside an empty dead-letter queue).
  std::map<std::string, uint32_t> depths = QueueDepths(**broker, *config);
  FleetStatus status =
      ComputeFleetStatus(*progress, trace->events, parked->matched, std::move(depths));
  status.trace_since = now - options.since;
  (*broker)->Close();
  if (trace->undecodable > 0) {
    std::cerr << "syncbusctl: skipped " << trace->undecodable << " undecodable trace events"
              << std::endl;
  }
  if (IsDocument(options.output)) {
    std::cout << FormatDocument(status.ToJson(now, true), options.output) << std::flush;
    return 0;
  }
  std::cout << FormatFleetStatus(status, now);
  if (options.output == OutputFormat::kWide) {
    std::vector<std::vector<std::string>> rows = {{"CLUSTER", "STATE", "FOR", "DETAIL"}};
    for (const auto& c : status.clusters) {
      std::string age =
          c.since == WallTime{}
              ? "-"
              : FormatAge(std::chrono::duration_cast<std::chrono::seconds>(now - c.since));
      rows.push_back({c.key, FleetStateName(c.state), age, c.detail});
    }
    std::cout << "\n" << FormatTable(rows);
  }
  return 0;
}

int RunTrace(const TraceOptions& options) {
  auto config = LoadOptionalConfig(options.config_file);
  if (!config.ok()) return Fail(config.status().message(), 2);
  log::Init("warn", config->log.format, "syncbusctl");
  auto broker = ConnectBroker(*config, "trace");
  if (!broker.ok()) return Fail(broker.status().message());
  const WallTime now = RealClock().WallNow();
  if (options.follow) {
    const auto& stop = InstallStopSignals();
    TraceQuery query;
    query.since = now - options.since;
    query.cluster = options.cluster;  // empty with --all: every cluster
    query.quiet = std::chrono::milliseconds(500);
    query.keep_going = [&stop] { return !stop.load(); };
    query.on_event = [&](const TraceEvent& e) {
      if (IsDocument(options.output)) {
        std::cout << FormatStreamItem(Json::parse(EncodeTraceEvent(e)), options.output)
                  << std::flush;
      } else {
        std::string table = FormatTimeline({e}, options.output == OutputFormat::kWide);
        std::cout << table.substr(table.find('\n') + 1) << std::flush;  // rows without the header
      }
    };
    auto read = ReadTrace(**broker, query);
    (*broker)->Close();
    if (!read.ok()) return Fail(read.status().message());
    return 0;
  }
  auto trace = ReadWindow(**broker, options.cluster, options.since, now);
  if (!trace.ok()) return Fail(trace.status().message());
  if (options.all) {
    (*broker)->Close();
    if (IsDocument(options.output)) {
      for (const TraceEvent& e : trace->events)
        std::cout << FormatStreamItem(Json::parse(EncodeTraceEvent(e)), options.output);
    } else {
      std::cout << FormatTimeline(trace->events, options.output == OutputFormat::kWide);
    }
    std::cout << std::flush;
    return 0;
  }
  auto parked = ParkedLetters(**broker, options.cluster);
  (*broker)->Close();
  if (!parked.ok())
    return Fail(parked.status().Annotate("reading the dead-letter index").message());
  RequestPosition position = LocateRequest(trace->events, parked->matched);
  if (IsDocument(options.output)) {
    std::cout << FormatDocument(TimelineJson(trace->events, position, now), options.output)
              << std::flush;
  } else {
    if (trace->events.empty()) {
      std::cout << "no trace events for " << options.cluster << " since "
                << FormatRfc3339(now - options.since) << " (scanned " << trace->scanned << ")\n";
    } else {
      std::cout << FormatTimeline(trace->events, options.output == OutputFormat::kWide);
    }
    std::cout << "\nnow: " << position.Describe(now) << "\n";
  }
  return trace->events.empty() && parked->matched.empty() ? 1 : 0;
}

}  // namespace syncbus::ctl
