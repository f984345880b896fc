// `syncbusctl rollout status|resume|abort SET`: reads the set and its clusters from the hub
// (ctl/rollout.h computes the view) and writes the rollout state annotation with a conditional
// merge patch, read again and retried when the publisher's leader wrote the set in between.
#include <iostream>

#include "common/bus/daemon.h"
#include "common/http/curl_transport.h"
#include "common/kube/client_impl.h"
#include "common/log.h"
#include "common/time_format.h"
#include "ctl/commands.h"
#include "ctl/rollout.h"

namespace syncbus::ctl {
namespace {

namespace res = kube::resources;

int RolloutFail(std::ostream& err, const Status& status, int code = 1) {
  err << "syncbusctl: " << status.message() << std::endl;
  return code;
}

kube::ObjectRef SetObject(const SetRef& ref) {
  return ref.kind == hive::SetKind::kSyncSet ? kube::Object(res::kSyncSets, ref.ns, ref.name)
                                             : kube::Object(res::kSelectorSyncSets, "", ref.name);
}

Result<Json> GetSet(kube::Client& hub, const SetRef& ref) {
  auto set = hub.Get(SetObject(ref));
  if (!set.ok() && set.status().code() == Code::kNotFound)
    return NotFound("no " + ref.Describe() + " on the hub");
  if (!set.ok()) return set.status().Annotate("reading " + ref.Describe());
  return set;
}

// The set and the state of its rollout (without its clusters), or why not.
Result<std::pair<Json, RolloutView>> ReadSet(kube::Client& hub, const SetRef& ref) {
  auto set = GetSet(hub, ref);
  if (!set.ok()) return set.status();
  auto builder = RolloutViewBuilder::Create(ref, *set);
  if (!builder.ok()) return builder.status();
  return std::pair{std::move(*set), std::move(*builder).Finish()};
}

Result<RolloutView> ReadView(kube::Client& hub, const SetRef& ref) {
  auto set = GetSet(hub, ref);
  if (!set.ok()) return set.status();
  auto builder = RolloutViewBuilder::Create(ref, *set);
  if (!builder.ok()) return builder.status();
  // A SyncSet's clusters are in its namespace; a SelectorSyncSet's anywhere.
  const std::string ns = ref.kind == hive::SetKind::kSyncSet ? ref.ns : "";
  auto list = [&](const kube::Resource& resource, void (RolloutViewBuilder::*add)(const Json&),
                  const char* what) -> Status {
    kube::ListOptions options;
    options.on_page = [&](std::vector<Json>& page) {
      for (const Json& j : page) ((*builder).*add)(j);
      page.clear();
    };
    auto listed = hub.List(kube::Collection(resource, ns), options);
    return listed.ok() ? Status::Ok() : listed.status().Annotate(what);
  };
  SYNCBUS_RETURN_IF_ERROR(
      list(res::kClusterSyncs, &RolloutViewBuilder::AddClusterSync, "listing ClusterSyncs"));
  SYNCBUS_RETURN_IF_ERROR(list(res::kClusterDeployments, &RolloutViewBuilder::AddCluster,
                               "listing ClusterDeployments"));
  return std::move(*builder).Finish();
}

int Change(const RolloutOptions& options, const SetRef& ref, kube::Client& hub, const Clock& clock,
           std::ostream& out, std::ostream& err) {
  const RolloutAction action =
      options.command == RolloutCommand::kResume ? RolloutAction::kResume : RolloutAction::kAbort;
  for (int attempt = 1;; ++attempt) {
    auto read = ReadSet(hub, ref);
    if (!read.ok()) return RolloutFail(err, read.status());
    const auto& [set, view] = *read;
    auto next = NextState(view, action, clock.WallNow());
    if (!next.ok()) return RolloutFail(err, next.status());
    const std::string rv = set["metadata"].value("resourceVersion", "");
    auto patched = hub.Patch(SetObject(ref), kube::PatchType::kMerge, StatePatch(*next, rv));
    if (patched.ok()) {
      out << "rollout of " << ref.Describe() << " "
          << (action == RolloutAction::kResume ? "resumed" : "aborted") << " at wave " << next->wave
          << " of " << next->waves << " (generation " << next->generation << ")";
      if (action == RolloutAction::kAbort) {
        out << "; the released waves keep it, the others keep what they have; to revert, edit "
               "the set back";
      }
      out << std::endl;
      return 0;
    }
    if (patched.status().code() != Code::kConflict || attempt >= options.attempts) {
      return RolloutFail(
          err, patched.status().Annotate("writing the rollout state of " + ref.Describe()));
    }
    err << "syncbusctl: " << ref.Describe()
        << " changed since it was read (the publisher writes the same annotation); reading it "
           "again"
        << std::endl;
  }
}

}  // namespace

int RunRollout(const RolloutOptions& options, kube::Client& hub, const Clock& clock,
               std::ostream& out, std::ostream& err) {
  auto ref = ParseSetRef(options.set);
  if (!ref.ok()) return RolloutFail(err, ref.status(), 2);
  if (options.command != RolloutCommand::kStatus)
    return Change(options, *ref, hub, clock, out, err);
  auto view = ReadView(hub, *ref);
  if (!view.ok()) return RolloutFail(err, view.status());
  if (IsDocument(options.output)) {
    out << FormatDocument(view->ToJson(), options.output) << std::flush;
  } else {
    out << FormatRolloutView(*view, clock.WallNow(), options.output == OutputFormat::kWide)
        << std::flush;
  }
  return 0;
}

int RunRollout(const RolloutOptions& options) {
  // A misspelt SET is a usage error before anything else is read.
  if (auto ref = ParseSetRef(options.set); !ref.ok())
    return RolloutFail(std::cerr, ref.status(), 2);
  auto config = LoadOptionalConfig(options.config_file);
  if (!config.ok()) return RolloutFail(std::cerr, config.status(), 2);
  log::Init("warn", config->log.format, "syncbusctl");
  HubConfig hub_config = config->hub;
  if (!options.kubeconfig.empty()) hub_config.kubeconfig = options.kubeconfig;
  if (!options.context.empty()) hub_config.context = options.context;
  auto cluster = CommandLineHubConfig(hub_config);
  if (!cluster.ok()) return RolloutFail(std::cerr, cluster.status(), 2);
  auto transport = http::CurlTransport::Create({});
  if (!transport.ok()) return RolloutFail(std::cerr, transport.status(), 2);
  kube::ClientImpl hub(*cluster, std::shared_ptr<http::Transport>(std::move(*transport)));
  return RunRollout(options, hub, RealClock(), std::cout, std::cerr);
}

}  // namespace syncbus::ctl
