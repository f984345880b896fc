#include "ctl/cli.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>

#include "common/build_info.h"
#include "common/bus/preview_message.h"
#include "common/time_format.h"
#include "ctl/commands.h"
#include "ctl/output.h"

namespace syncbus::ctl {
namespace {

constexpr char kKubeconfigHelp[] =
    "hub kubeconfig (default: the config file's hub.kubeconfig, else $KUBECONFIG, ~/.kube/config, "
    "in-cluster)";
// Options whose value is a file name: completion leaves those to the shell.
const std::vector<std::string> kFileOptions = {"-c", "--config", "--kubeconfig", "-f"};
const std::vector<std::string> kShells = {"bash", "zsh"};
// The config file of the commands that talk to the broker when -c is not given (the Deployments
// set it in the daemons' pods, where the file is mounted).
constexpr char kConfigEnv[] = "SYNCBUS_CONFIG";
constexpr char kConfigHelp[] = "syncbus YAML config (default: $SYNCBUS_CONFIG)";

// -c, else $SYNCBUS_CONFIG, else "".
std::string ConfigFile(const std::string& flag) {
  if (!flag.empty()) return flag;
  const char* env = std::getenv(kConfigEnv);
  return env != nullptr ? env : "";
}

// -o/--output and the deprecated --json of one read command.
struct OutputFlag {
  std::string text;
  bool json = false;

  void AddTo(CLI::App* cmd, const std::string& default_format, const std::string& what) {
    text = default_format;
    cmd->add_option("-o,--output", text, "output format: table, wide, json or yaml (" + what + ")")
        ->check(CLI::IsMember(OutputFormatNames()));
    cmd->add_flag("--json", json, "deprecated: same as -o json");
  }
  OutputFormat Get() const { return json ? OutputFormat::kJson : *ParseOutputFormat(text); }
};

// The command tree and what its flags fill in.
struct CommandLine {
  CLI::App app{
      "syncbusctl: operate syncbus (fleet status and traces, barrier, previews, rollouts, "
      "dead-letter queue, topology)"};

  WaitOptions wait;
  std::string wait_timeout = "10m", wait_interval = "1s";
  OutputFlag wait_output;
  CLI::App* wait_cmd = nullptr;

  StatusOptions status;
  std::string status_since = "1h";
  OutputFlag status_output;
  CLI::App* status_cmd = nullptr;

  TraceOptions trace;
  std::string trace_since = "1h";
  OutputFlag trace_output;
  CLI::App* trace_cmd = nullptr;

  std::string topology_config, vhost = "/";
  OutputFlag topology_output;
  CLI::App* topology_cmd = nullptr;

  DlqOptions dlq;
  std::string older_than, newer_than;
  OutputFlag dlq_output;
  CLI::App* dlq_cmd = nullptr;
  CLI::App* dlq_replay = nullptr;
  CLI::App* dlq_purge = nullptr;
  CLI::App* dlq_reindex = nullptr;

  PreviewOptions preview;
  std::string preview_timeout = "10m", preview_clusters;
  OutputFlag preview_output;
  CLI::App* preview_cmd = nullptr;

  RolloutOptions rollout;
  OutputFlag rollout_output;
  CLI::App* rollout_cmd = nullptr;
  CLI::App* rollout_resume = nullptr;
  CLI::App* rollout_abort = nullptr;

  std::string shell;
  CLI::App* completion_cmd = nullptr;
  std::vector<std::string> complete_words;
  CLI::App* complete_cmd = nullptr;

  explicit CommandLine(const std::string& name) {
    app.name(name);
    app.require_subcommand(1);
    app.set_version_flag("--version", VersionText("syncbusctl"));

    wait_cmd = app.add_subcommand(
        "wait",
        "wait until every cluster has its current SyncSets applied (a barrier; through every wave "
        "of a rollout); exit 0: reached; 1: not before --timeout; 2: bad input; 3: a rollout of "
        "a set of these clusters is halted or aborted");
    wait_cmd->add_option("--kubeconfig", wait.kubeconfig, kKubeconfigHelp);
    wait_cmd->add_option("--context", wait.context, "kubeconfig context");
    wait_cmd->add_option("-c,--config", wait.config_file,
                         std::string(kConfigHelp) + "; only its hub section is read");
    wait_cmd->add_option("-n,--namespace", wait.ns, "only clusters in this namespace");
    wait_cmd->add_option("--timeout", wait_timeout, "give up after this long (e.g. 90s, 10m)");
    wait_cmd->add_option("--interval", wait_interval, "poll interval");
    wait_cmd->add_option("--metrics-url", wait.metrics_urls,
                         "consumer /metrics URL to count applies (repeatable)");
    wait_cmd->add_option("--start-time", wait.start_time,
                         "unix time the run started (elapsed and rate)");
    wait_cmd->add_flag("-q,--quiet", wait.quiet, "no progress lines");
    wait_output.AddTo(wait_cmd, "table", "wide also lists the clusters not there yet");

    status_cmd = app.add_subcommand(
        "status", "the fleet at a glance, or one cluster: its request, lease and sets");
    status_cmd->add_option("cluster", status.cluster,
                           "one cluster: NAMESPACE/NAME, or NAME with -n");
    status_cmd->add_option("--kubeconfig", status.kubeconfig, kKubeconfigHelp);
    status_cmd->add_option("--context", status.context, "kubeconfig context");
    status_cmd->add_option("-c,--config", status.config_file,
                           std::string(kConfigHelp) + "; its hub and amqp sections");
    status_cmd->add_option("-n,--namespace", status.ns, "only clusters in this namespace");
    status_cmd->add_option("--since", status_since,
                           "trace window to locate requests in (e.g. 30m, 6h)");
    status_output.AddTo(status_cmd, "table",
                        "wide lists every cluster; json and yaml include them");

    trace_cmd = app.add_subcommand(
        "trace",
        "a cluster's recent timeline: decided, published, delivered, attempts, applied, acked");
    trace_cmd->add_option("cluster", trace.cluster, "NAMESPACE/NAME, or a name in any namespace");
    trace_cmd->add_flag(
        "--all", trace.all,
        "every cluster's events instead (default output: one JSON object per line)");
    trace_cmd->add_option("-c,--config", trace.config_file,
                          std::string(kConfigHelp) + "; its amqp section");
    trace_cmd->add_option("--since", trace_since,
                          "how far back to read the trace stream (e.g. 30m, 6h)");
    trace_cmd->add_flag("-f,--follow", trace.follow, "keep printing new steps until interrupted");
    trace_output.AddTo(trace_cmd, "table", "wide adds the cluster and the full request id");

    topology_cmd =
        app.add_subcommand("topology", "print the broker topology as importable definitions");
    topology_cmd->add_option("-c,--config", topology_config,
                             std::string(kConfigHelp) + "; its retry tiers and limits");
    topology_cmd->add_option("--vhost", vhost, "vhost to put in the definitions");
    topology_output.AddTo(topology_cmd, "json", "default json, for rabbitmqctl import_definitions");

    dlq_cmd =
        app.add_subcommand("dlq", "inspect, replay or purge the dead-letter queue (syncbus.dead)");
    dlq_cmd->require_subcommand(1);
    auto* dlq_list = dlq_cmd->add_subcommand(
        "list",
        "show parked messages, one row per cluster and reason with its copies counted (-o wide: "
        "every copy), from the dead-letter index, without touching the queue");
    dlq_replay = dlq_cmd->add_subcommand(
        "replay",
        "republish matching messages to the work exchange with attempts reset, each cluster's "
        "newest copy once (the older copies are removed)");
    dlq_purge =
        dlq_cmd->add_subcommand("purge", "delete matching messages (asks first unless --yes)");
    for (auto* sub : {dlq_list, dlq_replay, dlq_purge}) {
      sub->add_option("-c,--config", dlq.config_file,
                      std::string(kConfigHelp) + "; its amqp section");
      sub->add_option("--cluster", dlq.filter.cluster,
                      "only this cluster: ns/name, or a name in any namespace");
      sub->add_option("--reason", dlq.filter.reason,
                      "only this reason: max-attempts, undecodable, delivery_limit");
      sub->add_option("--older-than", older_than,
                      "only messages parked at least this long ago (e.g. 10m)");
      sub->add_option("--newer-than", newer_than, "only messages parked less than this long ago");
      sub->add_option("--limit", dlq.limit, "act on at most this many matches");
      sub->add_flag("-q,--quiet", dlq.quiet, "no progress lines");
      dlq_output.AddTo(sub, "table",
                       sub == dlq_list ? "wide adds lane, message id and parking time"
                                       : "of the matches --dry-run lists");
    }
    for (auto* sub : {dlq_replay, dlq_purge})
      sub->add_flag("--dry-run", dlq.dry_run, "show what would be done");
    dlq_replay->add_option("--rate", dlq.rate_per_second,
                           "at most this many replays per second (0 = no limit)");
    dlq_purge->add_flag("-y,--yes", dlq.yes, "do not ask for confirmation");
    dlq_reindex = dlq_cmd->add_subcommand(
        "reindex",
        "rebuild the dead-letter index from the queue (messages parked before it existed; run it "
        "while no replay or purge runs)");
    dlq_reindex->add_option("-c,--config", dlq.config_file,
                            std::string(kConfigHelp) + "; its amqp section");
    dlq_reindex->add_flag("-q,--quiet", dlq.quiet, "no progress lines");

    preview_cmd = app.add_subcommand(
        "preview",
        "ask the consumers what a changed SyncSet or SelectorSyncSet would do on each of its "
        "clusters (a server-side dry run there), grouped by outcome; exit 0: all answered, none "
        "refuses; 1: some refuse or fail; 2: bad input; 3: some did not answer in time");
    preview_cmd->add_option("-f,--filename", preview.file, "the set's YAML (- reads stdin)")
        ->required();
    preview_cmd->add_option("--clusters", preview_clusters,
                            "only these clusters: ns/name or name, comma-separated");
    preview_cmd->add_option("--selector", preview.selector,
                            "only clusters with these labels: k=v,k2=v2");
    preview_cmd->add_option("--kubeconfig", preview.kubeconfig, kKubeconfigHelp);
    preview_cmd->add_option("--context", preview.context, "kubeconfig context");
    preview_cmd->add_option("-c,--config", preview.config_file,
                            std::string(kConfigHelp) + "; its hub and amqp sections");
    preview_cmd->add_option("--timeout", preview_timeout,
                            "stop waiting for answers after this long (e.g. 90s, 10m)");
    preview_cmd->add_option("--batch", preview.batch, "clusters per request")
        ->check(CLI::Range(size_t{1}, kMaxPreviewClusters));
    preview_cmd->add_flag("-q,--quiet", preview.quiet, "no progress lines");
    preview_output.AddTo(preview_cmd, "table",
                         "wide: one row per cluster; json and yaml: every cluster's answer");

    rollout_cmd = app.add_subcommand(
        "rollout",
        "a set's rollout in waves (annotation syncbus.io/rollout): show it, resume it after a "
        "halt, or abort it; exit 0: done; 1: no such set, no rollout, a phase that does not allow "
        "it, or the hub failed; 2: bad input");
    rollout_cmd->require_subcommand(1);
    auto* rollout_status = rollout_cmd->add_subcommand(
        "status", "the rollout wave by wave: released or not, synced, failing, pending, skipped");
    rollout_resume = rollout_cmd->add_subcommand(
        "resume",
        "release the rollout again after a halt (or an abort): phase Progressing, the wave's "
        "deadline starts again");
    rollout_abort = rollout_cmd->add_subcommand(
        "abort",
        "stop the rollout where it is: released waves keep the set, the others keep what they "
        "have; revert by editing the set");
    for (auto* sub : {rollout_status, rollout_resume, rollout_abort}) {
      sub->add_option("set", rollout.set,
                      "syncset/NAMESPACE/NAME or selectorsyncset/NAME (also ss/..., sss/...)")
          ->required();
      sub->add_option("--kubeconfig", rollout.kubeconfig, kKubeconfigHelp);
      sub->add_option("--context", rollout.context, "kubeconfig context");
      sub->add_option("-c,--config", rollout.config_file,
                      std::string(kConfigHelp) + "; only its hub section is read");
    }
    rollout_output.AddTo(rollout_status, "table", "wide lists every failing cluster");

    completion_cmd = app.add_subcommand(
        "completion", "print a shell completion script: source <(syncbusctl completion bash)");
    completion_cmd->add_option("shell", shell, "bash or zsh")
        ->required()
        ->check(CLI::IsMember(kShells));

    // Cobra's completion protocol (what the scripts and kubectl's plugin completion call).
    complete_cmd = app.add_subcommand("__complete", "");
    complete_cmd->group("");
    complete_cmd->prefix_command();
  }

  int Run() {
    if (complete_cmd->parsed()) {
      std::cout << CompletionCandidates(complete_cmd->remaining());
      return 0;
    }
    if (completion_cmd->parsed()) {
      std::cout << CompletionScript(
          shell, app.get_name() == "kubectl syncbus" ? "kubectl-syncbus" : "syncbusctl");
      return 0;
    }
    // -c, else $SYNCBUS_CONFIG: optional where only the hub is read or the defaults do.
    wait.config_file = ConfigFile(wait.config_file);
    rollout.config_file = ConfigFile(rollout.config_file);
    topology_config = ConfigFile(topology_config);
    for (std::string* file :
         {&status.config_file, &trace.config_file, &dlq.config_file, &preview.config_file}) {
      *file = ConfigFile(*file);
    }
    if ((status_cmd->parsed() && status.config_file.empty()) ||
        (trace_cmd->parsed() && trace.config_file.empty()) ||
        (dlq_cmd->parsed() && dlq.config_file.empty()) ||
        (preview_cmd->parsed() && preview.config_file.empty())) {
      return Usage(std::string("no broker address: pass -c CONFIG or set ") + kConfigEnv +
                   " (the file's amqp section says where the broker is and how to log in)");
    }
    if (status_cmd->parsed() || trace_cmd->parsed()) {
      auto since = ParseDuration(status_cmd->parsed() ? status_since : trace_since);
      if (!since.ok()) return Usage("--since: " + since.status().message());
      if (status_cmd->parsed()) {
        status.since = *since;
        status.output = status_output.Get();
        return RunStatus(status);
      }
      if (trace.all == !trace.cluster.empty()) return Usage("trace: give a cluster or --all");
      trace.since = *since;
      trace.output = trace_output.Get();
      // --all prints JSON lines unless -o asks for something else.
      if (trace.all && trace_cmd->get_option("--output")->count() == 0)
        trace.output = OutputFormat::kJson;
      return RunTrace(trace);
    }
    if (dlq_cmd->parsed()) {
      for (auto [text, field] : {std::pair{&older_than, &dlq.filter.older_than},
                                 std::pair{&newer_than, &dlq.filter.newer_than}}) {
        if (text->empty()) continue;
        auto parsed = ParseDuration(*text);
        if (!parsed.ok()) return Usage(parsed.status().message());
        *field = *parsed;
      }
      dlq.output = dlq_output.Get();
      dlq.action = dlq_replay->parsed()    ? DlqAction::kReplay
                   : dlq_purge->parsed()   ? DlqAction::kPurge
                   : dlq_reindex->parsed() ? DlqAction::kReindex
                                           : DlqAction::kList;
      return RunDlq(dlq);
    }
    if (preview_cmd->parsed()) {
      auto timeout = ParseDuration(preview_timeout);
      if (!timeout.ok()) return Usage("--timeout: " + timeout.status().message());
      preview.timeout = *timeout;
      for (size_t start = 0; start < preview_clusters.size();) {
        size_t comma = std::min(preview_clusters.find(',', start), preview_clusters.size());
        if (comma > start)
          preview.clusters.push_back(preview_clusters.substr(start, comma - start));
        start = comma + 1;
      }
      preview.output = preview_output.Get();
      return RunPreview(preview);
    }
    if (rollout_cmd->parsed()) {
      rollout.command = rollout_resume->parsed()  ? RolloutCommand::kResume
                        : rollout_abort->parsed() ? RolloutCommand::kAbort
                                                  : RolloutCommand::kStatus;
      rollout.output = rollout_output.Get();
      return RunRollout(rollout);
    }
    if (wait_cmd->parsed()) {
      auto timeout = ParseDuration(wait_timeout), interval = ParseDuration(wait_interval);
      if (!timeout.ok()) return Usage("--timeout: " + timeout.status().message());
      if (!interval.ok()) return Usage("--interval: " + interval.status().message());
      wait.timeout = *timeout;
      wait.interval = *interval;
      wait.output = wait_output.Get();
      return RunWait(wait);
    }
    return RunTopology(topology_config, vhost, topology_output.Get());
  }

  int Usage(const std::string& message) const {
    std::fprintf(stderr, "%s: %s\n", app.get_name().c_str(), message.c_str());
    return 2;
  }
};

std::string BaseName(const char* argv0) {
  std::string base = argv0 == nullptr ? "" : argv0;
  if (auto slash = base.rfind('/'); slash != std::string::npos) base = base.substr(slash + 1);
  return base;
}

std::string FirstLine(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

}  // namespace

int RunCommandLine(int argc, char** argv) {
  const std::string base = BaseName(argc > 0 ? argv[0] : nullptr);
  // kubectl's plugin completion runs kubectl_complete-syncbus with the words after `syncbus`.
  if (base == "kubectl_complete-syncbus") {
    std::cout << CompletionCandidates(std::vector<std::string>(argv + 1, argv + argc));
    return 0;
  }
  // As a kubectl plugin (kubectl-syncbus on $PATH) it is `kubectl syncbus`.
  CommandLine cli(base == "kubectl-syncbus" ? "kubectl syncbus" : "syncbusctl");
  try {
    cli.app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.app.exit(e) == 0 ? 0 : 2;
  }
  return cli.Run();
}

std::string CompletionCandidates(const std::vector<std::string>& words) {
  CommandLine cli("syncbusctl");
  const CLI::App* cmd = &cli.app;
  const std::string current = words.empty() ? "" : words.back();
  const CLI::Option* wants_value = nullptr;
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    const std::string& word = words[i];
    if (wants_value != nullptr) {
      wants_value = nullptr;
      continue;
    }
    if (word.starts_with('-')) {
      if (word.find('=') != std::string::npos) continue;
      for (const CLI::Option* opt : cmd->get_options()) {
        if (opt->check_name(word) && opt->get_expected_min() > 0) wants_value = opt;
      }
      continue;
    }
    for (const CLI::App* sub : cmd->get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->get_name() == word && !sub->get_group().empty()) cmd = sub;
    }
  }
  std::string out;
  auto add = [&](const std::string& candidate, const std::string& description) {
    if (candidate.rfind(current, 0) != 0) return;
    out += candidate;
    if (!description.empty()) out += "\t" + FirstLine(description);
    out += "\n";
  };
  if (wants_value != nullptr) {
    bool files = false;
    for (const auto& name : kFileOptions) files = files || wants_value->check_name(name);
    if (wants_value->check_name("--output")) {
      for (const auto& name : OutputFormatNames()) add(name, "");
    }
    return out + (files ? ":0\n" : ":4\n");
  }
  if (current.starts_with('-')) {
    for (const CLI::Option* opt : cmd->get_options()) {
      for (const auto& name : opt->get_lnames()) add("--" + name, opt->get_description());
      for (const auto& name : opt->get_snames()) add("-" + name, opt->get_description());
    }
    return out + ":4\n";
  }
  for (const CLI::App* sub : cmd->get_subcommands([](const CLI::App*) { return true; })) {
    if (!sub->get_group().empty()) add(sub->get_name(), sub->get_description());
  }
  if (cmd == cli.completion_cmd) {
    for (const auto& shell : kShells) add(shell, "");
  }
  return out + ":4\n";
}

std::string CompletionScript(const std::string& shell, const std::string& program) {
  const std::string fn =
      "_" + std::string(program == "kubectl-syncbus" ? "kubectl_syncbus" : "syncbusctl");
  if (shell == "bash") {
    return "# bash completion for " + program + ": source <(" + program + " completion bash)\n" +
           fn +
           "() {\n"
           "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" out directive\n"
           "  out=\"$(\"${COMP_WORDS[0]}\" __complete \"${COMP_WORDS[@]:1:COMP_CWORD}\" "
           "2>/dev/null)\" || return\n"
           "  directive=\"${out##*:}\"\n"
           "  out=\"${out%:*}\"\n"
           "  local IFS=$'\\n' line\n"
           "  COMPREPLY=()\n"
           "  for line in $out; do COMPREPLY+=(\"${line%%$'\\t'*}\"); done\n"
           "  if [[ ${#COMPREPLY[@]} -eq 0 && $((directive & 4)) -eq 0 ]]; then\n"
           "    COMPREPLY=($(compgen -f -- \"$cur\"))\n"
           "  fi\n"
           "}\n"
           "complete -o filenames -F " +
           fn + " " + program + "\n";
  }
  if (shell == "zsh") {
    return "#compdef " + program + "\n# zsh completion for " + program + ": source <(" + program +
           " completion zsh)\n" + fn +
           "() {\n"
           "  local -a lines candidates\n"
           "  local directive line\n"
           "  lines=(\"${(@f)$(${words[1]} __complete \"${(@)words[2,CURRENT]}\" 2>/dev/null)}\")\n"
           "  directive=\"${lines[-1]#:}\"\n"
           "  for line in \"${(@)lines[1,-2]}\"; do candidates+=(\"${line//:/\\\\:}\"); done\n"
           "  candidates=(\"${(@)candidates//$'\\t'/:}\")\n"
           "  if (( ${#candidates} )); then\n"
           "    _describe '" +
           program +
           "' candidates\n"
           "  elif (( ! (directive & 4) )); then\n"
           "    _files\n"
           "  fi\n"
           "}\n"
           "if [[ \"$funcstack[1]\" == \"" +
           fn +
           "\" ]]; then\n"
           "  " +
           fn +
           " \"$@\"\n"
           "else\n"
           "  compdef " +
           fn + " " + program +
           "\n"
           "fi\n";
  }
  return "";
}

}  // namespace syncbus::ctl
