#include "ctl/commands.h"

#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <set>
#include <string_view>
#include <thread>

#include "common/amqp/session_impl.h"
#include "common/bus/config.h"
#include "common/bus/daemon.h"
#include "common/bus/topology.h"
#include "common/http/curl_transport.h"
#include "common/kube/client_impl.h"
#include "common/log.h"
#include "ctl/fleet_progress.h"
#include "ctl/metrics_scrape.h"
#include "ctl/text_table.h"

namespace syncbus::ctl {

Result<Config> LoadOptionalConfig(const std::string& path) {
  if (path.empty()) return ParseConfig("", "config", DaemonConfigOptions(false));
  auto config = LoadConfigFile(path, DaemonConfigOptions(false));
  if (config.ok()) {
    for (const std::string& warning : config->warnings)
      std::cerr << "syncbusctl: warning: " << warning << "\n";
  }
  return config;
}

namespace {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

int RunWait(const WaitOptions& options) {
  auto config = LoadOptionalConfig(options.config_file);
  if (!config.ok()) {
    std::cerr << "syncbusctl: " << config.status().message() << "\n";
    return 2;
  }
  HubConfig hub = config->hub;
  if (!options.kubeconfig.empty()) hub.kubeconfig = options.kubeconfig;
  if (!options.context.empty()) hub.context = options.context;
  auto cluster = CommandLineHubConfig(hub);
  auto transport = http::CurlTransport::Create({});
  if (!cluster.ok() || !transport.ok()) {
    std::cerr << "syncbusctl: " << (!cluster.ok() ? cluster.status() : transport.status()).message()
              << "\n";
    return 2;
  }
  std::shared_ptr<http::Transport> shared = std::move(*transport);
  kube::ClientImpl client(*cluster, shared);
  return RunWait(options, client, shared.get(), InstallStopSignals(), std::cout, std::cerr);
}

int RunWait(const WaitOptions& options, kube::Client& client, http::Transport* metrics,
            const std::atomic<bool>& stop, std::ostream& out, std::ostream& err) {
  double start = options.start_time > 0 ? options.start_time : NowSeconds();
  auto deadline = std::chrono::steady_clock::now() + options.timeout;
  FleetProgress progress;
  std::string last_line;
  bool reached = false;
  std::vector<const RolloutSummary*> stopped;
  while (true) {
    auto read = ReadProgress(client, options.ns);
    if (read.ok()) {
      progress = std::move(*read);
      char line[200];
      std::snprintf(line, sizeof line,
                    "progress: synced=%zu/%zu failing=%zu pending=%zu skipped=%zu elapsed=%.1fs",
                    progress.synced, progress.clusters, progress.failing, progress.pending,
                    progress.skipped, NowSeconds() - start);
      std::string text = line;
      if (progress.held > 0) text += " held-by-rollouts=" + std::to_string(progress.held);
      std::string key = std::to_string(progress.synced) + "/" + std::to_string(progress.failing) +
                        "/" + std::to_string(progress.held);
      if (!options.quiet && key != last_line) {
        err << text << std::endl;
        last_line = key;
      }
      if (progress.done()) {
        reached = true;
        break;
      }
      // A halted or aborted rollout does not move on by itself: waiting longer cannot help.
      stopped = progress.Stopped();
      if (!stopped.empty()) break;
    } else if (!options.quiet) {
      err << "syncbusctl: " << read.status().message() << " (retrying)" << std::endl;
    }
    if (stop.load() || std::chrono::steady_clock::now() >= deadline) break;
    SleepUnlessStopped(options.interval, stop);
  }
  double elapsed = NowSeconds() - start;
  double applies = 0, failed = static_cast<double>(progress.failing);
  if (!options.metrics_urls.empty() && metrics != nullptr) {
    auto ok = ScrapeSum(*metrics, options.metrics_urls, "syncbus_consumer_resources_applied_total",
                        "result=\"success\"");
    auto bad = ScrapeSum(*metrics, options.metrics_urls, "syncbus_consumer_resources_applied_total",
                         "result=\"failure\"");
    if (ok.ok()) applies = *ok;
    if (bad.ok()) failed = *bad;
    if (!ok.ok()) err << "syncbusctl: " << ok.status().message() << "\n";
  }
  // The halt is reported whatever the output format: on stderr, as the reason for the exit code.
  for (const RolloutSummary* r : stopped) err << "syncbusctl: " << r->StopReport();
  if (IsDocument(options.output)) {
    Json doc = progress.ToJson();
    doc["reached"] = reached;
    Json halted = Json::array();
    for (const RolloutSummary* r : stopped) halted.push_back(r->ToJson());
    doc["haltedRollouts"] = std::move(halted);
    doc["elapsedSeconds"] = elapsed;
    doc["applies"] = applies;
    doc["failedApplies"] = failed;
    out << FormatDocument(doc, options.output) << std::flush;
  } else {
    if (!reached && stopped.empty() && !options.quiet) {
      err << "syncbusctl: not every cluster reached its desired state";
      if (!progress.failing_clusters.empty())
        err << "; failing: " << progress.failing_clusters.front() << " ...";
      if (!progress.pending_clusters.empty())
        err << "; pending: " << progress.pending_clusters.front() << " ...";
      err << std::endl;
    }
    char summary[200];
    std::snprintf(
        summary, sizeof summary,
        "summary: synced=%zu/%zu clusters applies=%.0f failed=%.0f elapsed=%.1fs rate=%.0f/s\n",
        progress.synced, progress.clusters, applies, failed, elapsed,
        elapsed > 0 ? applies / elapsed : 0);
    out << summary;
    if (options.output == OutputFormat::kWide) {
      for (const auto& [label, clusters] : {std::pair{"failing", &progress.failing_clusters},
                                            std::pair{"pending", &progress.pending_clusters}}) {
        for (const auto& c : *clusters) out << label << ": " << c << "\n";
      }
    }
    out << std::flush;
  }
  if (reached) return 0;
  return stopped.empty() ? 1 : kWaitRolloutStopped;
}

int RunTopology(const std::string& config_file, const std::string& vhost, OutputFormat output) {
  auto config = LoadOptionalConfig(config_file);
  if (!config.ok()) {
    std::cerr << "syncbusctl: " << config.status().message() << "\n";
    return 2;
  }
  Json defs = amqp::ToDefinitions(amqp::SyncbusTopology(config->topology), vhost);
  Json out = {{"vhosts", Json::array({Json{{"name", vhost}}})}};
  for (const char* k : {"exchanges", "queues", "bindings", "policies"}) out[k] = defs[k];
  if (IsDocument(output)) {
    std::cout << FormatDocument(out, output) << std::flush;
    return 0;
  }
  const bool wide = output == OutputFormat::kWide;
  std::vector<std::vector<std::string>> rows = {{"KIND", "NAME", "TYPE", "DETAIL"}};
  if (wide) rows[0].push_back("ARGUMENTS");
  auto arguments = [](const Json& j) { return j.value("arguments", Json::object()).dump(); };
  for (const auto& e : out["exchanges"]) {
    rows.push_back({"exchange", e.value("name", ""), e.value("type", ""),
                    e.value("durable", false) ? "durable" : "transient"});
    if (wide) rows.back().push_back(arguments(e));
  }
  for (const auto& q : out["queues"]) {
    const Json args = q.value("arguments", Json::object());
    std::string detail;
    for (const char* key :
         {"x-message-ttl", "x-max-length", "x-delivery-limit", "x-dead-letter-exchange"}) {
      if (args.contains(key))
        detail += std::string(detail.empty() ? "" : " ") + (key + 2) + "=" +
                  (args[key].is_string() ? args[key].get<std::string>() : args[key].dump());
    }
    rows.push_back({"queue", q.value("name", ""), args.value("x-queue-type", "classic"),
                    detail.empty() ? "-" : detail});
    if (wide) rows.back().push_back(arguments(q));
  }
  for (const auto& b : out["bindings"]) {
    std::string key = b.value("routing_key", "");
    rows.push_back({"binding", b.value("source", "") + " -> " + b.value("destination", ""),
                    b.value("destination_type", ""), key.empty() ? "-" : "key=" + key});
    if (wide) rows.back().push_back(arguments(b));
  }
  for (const auto& p : out["policies"]) {
    const Json definition = p.value("definition", Json::object());
    std::string detail = "pattern=" + p.value("pattern", "");
    for (const auto& [key, value] : definition.items()) {
      detail += " " + key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
    }
    rows.push_back({"policy", p.value("name", ""), p.value("apply-to", ""), detail});
    if (wide) rows.back().push_back(definition.dump());
  }
  std::cout << FormatTable(rows) << std::flush;
  return 0;
}

namespace {

const char* Verb(DlqAction action) {
  switch (action) {
    case DlqAction::kReplay: return "replay";
    case DlqAction::kPurge: return "purge";
    case DlqAction::kReindex: return "reindex";
    case DlqAction::kList: break;
  }
  return "list";
}

void PrintLetters(const std::vector<DeadLetter>& letters, OutputFormat output, WallTime now,
                  std::ostream& out) {
  if (IsDocument(output)) {
    Json array = Json::array();
    for (const auto& d : letters) array.push_back(d.ToJson(now, /*with_message=*/true));
    out << FormatDocument(array, output) << std::flush;
  } else {
    out << FormatDeadLetterTable(letters, now, output == OutputFormat::kWide) << std::flush;
  }
}

// Progress lines on `err` for long passes (50 messages or more), at most one a second.
std::function<void(const DlqProgress&)> ProgressPrinter(const DlqOptions& options,
                                                        std::ostream& err) {
  auto last_report =
      std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
  return [&options, &err, last_report](const DlqProgress& p) {
    if (options.quiet || p.total < 50) return;
    auto now = std::chrono::steady_clock::now();
    if (now - *last_report < std::chrono::seconds(1) && p.scanned != p.total) return;
    *last_report = now;
    err << "dlq " << Verb(options.action) << ": scanned " << p.scanned << "/" << p.total
        << " matched " << p.matched << " done " << p.done << std::endl;
  };
}

int RunReindex(const DlqOptions& options, amqp::Session& session, std::ostream& err) {
  auto result =
      ReindexDeadLetters(session, std::chrono::seconds(30), ProgressPrinter(options, err));
  if (!result.ok()) {
    err << "syncbusctl: " << result.status().message() << std::endl;
    return 1;
  }
  err << "dlq reindex: indexed " << result->progress.done << " of the " << result->progress.total
      << " parked messages again (each moved to the back of " << amqp::kDeadQueue << ", in order)"
      << std::endl;
  if (!result->error.ok()) {
    err << "syncbusctl: stopped early: " << result->error.message() << std::endl;
    return 1;
  }
  return 0;
}

}  // namespace

int RunDlq(const DlqOptions& options, amqp::Session& session, const Clock& clock, std::istream& in,
           std::ostream& out, std::ostream& err) {
  if (options.action == DlqAction::kReindex) return RunReindex(options, session, err);
  const char* done = options.action == DlqAction::kReplay ? "replayed" : "purged";
  size_t agreed = 0;  // purge: how many the operator agreed to
  const bool listing = options.action == DlqAction::kList || options.dry_run;
  const bool ask = options.action == DlqAction::kPurge && !options.yes && !options.dry_run;
  if (listing || ask) {
    // From the index: the queue itself is not touched.
    auto listed = ListDeadLetters(session, options.filter, options.limit, clock);
    if (!listed.ok()) {
      err << "syncbusctl: " << listed.status().message() << std::endl;
      return 1;
    }
    if (std::string note = listed->Discrepancy(); !note.empty())
      err << "syncbusctl: note: " << note << std::endl;
    const size_t n = listed->matched.size();
    if (listing) {
      PrintLetters(listed->matched, options.output, clock.WallNow(), out);
      if (options.dry_run) {
        // A replay runs each cluster's request once (see ScanDeadLetters).
        size_t acted = n;
        if (options.action == DlqAction::kReplay) {
          std::set<std::string> keys;
          acted = 0;
          for (const DeadLetter& d : listed->matched) {
            if (d.ReplayKey().empty() || keys.insert(d.ReplayKey()).second) ++acted;
          }
        }
        err << "dlq " << Verb(options.action) << ": would have " << done << " " << acted << " of "
            << n << " matching (of " << listed->listed << " parked)";
        if (acted < n)
          err << " and removed " << n - acted << " older copies of the same clusters' requests";
        err << std::endl;
      }
      return 0;
    }
    if (n == 0) {
      err << "dlq purge: nothing matches" << std::endl;
      return 0;
    }
    err << "purge " << n << " dead-lettered message" << (n == 1 ? "" : "s") << "? [y/N] "
        << std::flush;
    std::string answer;
    std::getline(in, answer);
    if (answer != "y" && answer != "Y" && answer != "yes") {
      err << "dlq purge: cancelled" << std::endl;
      return 1;
    }
    agreed = n;
  }
  DlqScanOptions scan;
  scan.action = options.action;
  scan.filter = options.filter;
  scan.rate_per_second = options.rate_per_second;
  scan.limit =
      agreed == 0 ? options.limit : (options.limit == 0 ? agreed : std::min(options.limit, agreed));
  // Before the scan holds any message: a missing stream only costs a channel here.
  scan.trace_replays =
      options.action == DlqAction::kReplay && session.Inspect(amqp::kTraceQueue).ok();
  scan.record_removals = session.Inspect(amqp::kDeadIndexQueue).ok();
  if (!scan.record_removals) {
    err << "syncbusctl: note: the dead-letter index " << amqp::kDeadIndexQueue
        << " does not exist yet; what this " << Verb(options.action)
        << " removes is not recorded there" << std::endl;
  }
  scan.progress = ProgressPrinter(options, err);
  auto result = ScanDeadLetters(session, scan, clock);
  if (!result.ok()) {
    err << "syncbusctl: " << result.status().message() << std::endl;
    return 1;
  }
  const DlqProgress& p = result->progress;
  err << "dlq " << Verb(options.action) << ": " << done << " " << p.done << " of " << p.matched
      << " matching";
  if (p.coalesced > 0)
    err << " and removed " << p.coalesced << " older copies of the same clusters' requests";
  err << " (scanned " << p.scanned << " of " << p.total << ")" << std::endl;
  if (!result->error.ok()) {
    err << "syncbusctl: stopped early: " << result->error.message() << std::endl;
    return 1;
  }
  return 0;
}

int RunDlq(const DlqOptions& options) {
  auto config = LoadOptionalConfig(options.config_file);
  if (!config.ok()) {
    std::cerr << "syncbusctl: " << config.status().message() << "\n";
    return 2;
  }
  // Only problems on stderr: stdout may be JSON for a script.
  log::Init("warn", config->log.format, "syncbusctl");
  amqp::ConnectionOptions amqp_options = config->amqp;
  amqp_options.connection_name = std::string("syncbusctl dlq ") + Verb(options.action);
  amqp::RabbitmqSession session(amqp_options);
  if (Status s = session.Connect(); !s.ok()) {
    std::cerr << "syncbusctl: connecting to the broker: " << s.message() << "\n";
    return 1;
  }
  int code = RunDlq(options, session, RealClock(), std::cin, std::cout, std::cerr);
  session.Close();
  return code;
}

}  // namespace syncbus::ctl
