// syncbusctl's commands as functions (main.cpp only parses flags). Each returns the process exit
// code: 0 success, 1 the operation did not succeed (e.g. timeout), 2 bad input.
#pragma once

#include <atomic>
#include <chrono>
#include <iosfwd>
#include <string>
#include <vector>

#include "common/amqp/session.h"
#include "common/bus/config.h"
#include "common/clock.h"
#include "common/http/transport.h"
#include "common/kube/client.h"
#include "ctl/dead_letters.h"
#include "ctl/output.h"

namespace syncbus::ctl {

// The config file of -c or $SYNCBUS_CONFIG (cli.cc picks; all defaults when `path` is empty),
// read as the daemons read it; the keys it ignored are printed on stderr as warnings.
Result<Config> LoadOptionalConfig(const std::string& path);

struct WaitOptions {
  std::string kubeconfig;  // empty: the config file's hub section / kubectl's lookup
  std::string context;
  std::string config_file;  // optional syncbus.yaml for hub settings
  std::string ns;
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  std::chrono::milliseconds interval{std::chrono::seconds(1)};
  std::vector<std::string> metrics_urls;  // consumers' /metrics, for applies and rate
  double start_time = 0;                  // unix seconds the run started (elapsed, rate); 0 = now
  OutputFormat output =
      OutputFormat::kTable;  // table: the summary line; wide: also the clusters not there
  bool quiet = false;
};

// The barrier: waits until every eligible cluster reports every applicable set at its current
// generation with Success. A cluster that a set's rollout in waves holds back counts as pending,
// so it waits for the last wave. Progress on stderr; the summary (line, JSON or YAML) on stdout.
// Exit codes: 0 reached; 1 not reached before the timeout (or interrupted); 2 bad input;
// kWaitRolloutStopped at once when the rollout of a set that applies to the fleet waited for is
// halted or aborted (or its annotation is unreadable), with the set, its wave, the message and
// the failing clusters on stderr.
inline constexpr int kWaitRolloutStopped = 3;
int RunWait(const WaitOptions& options);
// The same against `hub`; `metrics` (may be null) scrapes options.metrics_urls; `stop` ends the
// wait early (as a timeout).
int RunWait(const WaitOptions& options, kube::Client& hub, http::Transport* metrics,
            const std::atomic<bool>& stop, std::ostream& out, std::ostream& err);

struct DlqOptions {
  std::string config_file;  // syncbus.yaml: the amqp section (same as the daemons)
  DlqAction action = DlqAction::kList;
  DeadLetterFilter filter;
  OutputFormat output = OutputFormat::kTable;  // of the listing (list, --dry-run)
  bool dry_run = false;
  bool yes = false;  // purge without asking
  double rate_per_second = 0;
  size_t limit = 0;
  bool quiet = false;  // no progress lines
};

// `syncbusctl dlq list|replay|purge` over `session` (connected): the listing or the matches
// (dry run) on `out` in options.output, progress and the summary on `err`; purge asks on `in`
// unless options.yes.
int RunDlq(const DlqOptions& options, amqp::Session& session, const Clock& clock, std::istream& in,
           std::ostream& out, std::ostream& err);
// The same with a broker connection made from the config file.
int RunDlq(const DlqOptions& options);

struct StatusOptions {
  std::string kubeconfig, context,
      config_file;  // hub as for wait; the config's amqp section for the broker
  std::string ns;
  std::string cluster;  // "ns/name" (or a name with -n): one cluster's report
  std::chrono::milliseconds since{std::chrono::hours(1)};  // trace window
  // wide: every cluster's state too (json and yaml always carry them)
  OutputFormat output = OutputFormat::kTable;
};

// `syncbusctl status [CLUSTER]`: the fleet's states (synced, pending, in flight, retrying,
// parked, failed, skipped) with the oldest of each, or one cluster's request, lease and sets.
int RunStatus(const StatusOptions& options);

struct TraceOptions {
  std::string config_file;
  std::string cluster;  // "ns/name" or a bare name
  std::chrono::milliseconds since{std::chrono::hours(1)};
  OutputFormat output = OutputFormat::kTable;  // --all: json lines, yaml documents or a table
  bool follow = false;                         // keep printing new steps until interrupted
  bool all = false;                            // every cluster's events (cluster empty), JSON lines
};

// `syncbusctl trace CLUSTER`: the cluster's recent timeline from the trace stream and where its
// newest request is now. `syncbusctl trace --all`: every event of the window, one JSON object
// per line (for audits and tools).
int RunTrace(const TraceOptions& options);

struct PreviewOptions {
  std::string file;  // -f: the SyncSet or SelectorSyncSet YAML ("-" = stdin)
  std::string kubeconfig, context, config_file;  // hub as for status; the broker from the config
  std::vector<std::string> clusters;             // --clusters: "ns/name" or a name; empty = all
  std::string selector;                          // --selector: "k=v,k2=v2"
  OutputFormat output = OutputFormat::kTable;    // wide: one row per cluster
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  size_t batch = 100;  // clusters per request
  bool quiet = false;  // no progress lines
};

// The set of `file` ("-" = stdin) as ReadPreviewSet (ctl/preview.h) checks it; kInvalidArgument
// or kNotFound (unreadable) name the file.
Result<Json> ReadPreviewFile(const std::string& file);

// `syncbusctl preview -f SET`: asks the consumers, over the preview queue, what `set` (as
// ReadPreviewFile returns it) would do on each of its clusters (a server-side dry run there) and
// prints the answers grouped by outcome on `out`, progress and warnings on `err`. Exit codes: 0
// every cluster answered and none refuses; 1 some refuse or could not be previewed, a --clusters
// name is not on the hub, or the broker failed; 2 bad input; 3 none refuses but some did not answer
// before the timeout.
int RunPreview(const PreviewOptions& options, const Json& set, amqp::Session& session,
               kube::Client& hub, const std::atomic<bool>& stop, std::ostream& out,
               std::ostream& err);
// The same with the hub and the broker of the config file and flags.
int RunPreview(const PreviewOptions& options);

enum class RolloutCommand { kStatus, kResume, kAbort };

struct RolloutOptions {
  RolloutCommand command = RolloutCommand::kStatus;
  std::string set;  // syncset/NAMESPACE/NAME, selectorsyncset/NAME (ss/, sss/)
  std::string kubeconfig, context, config_file;  // the hub as for wait
  OutputFormat output = OutputFormat::kTable;    // status: wide lists every failing cluster
  int attempts = 5;  // resume, abort: writes tried when the set keeps changing under them
};

// `syncbusctl rollout status|resume|abort SET` against `hub` (ctl/rollout.h): status prints the
// rollout wave by wave on `out`; resume and abort write the set's syncbus.io/rollout-state with a
// merge patch conditional on the resourceVersion read, reading again on 409 Conflict. Exit codes:
// 0 done; 1 no such set, no rollout annotation, no state, a phase that does not allow it, or the
// hub failed; 2 bad input (SET not written as above, a bad config).
int RunRollout(const RolloutOptions& options, kube::Client& hub, const Clock& clock,
               std::ostream& out, std::ostream& err);
// The same with the hub of the config file and flags.
int RunRollout(const RolloutOptions& options);

// Prints the topology as `rabbitmqctl import_definitions` definitions for `vhost` (json, yaml),
// or as a table of its exchanges, queues and bindings (wide: with their arguments).
int RunTopology(const std::string& config_file, const std::string& vhost, OutputFormat output);

}  // namespace syncbus::ctl
