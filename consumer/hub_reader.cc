#include "consumer/hub_reader.h"

#include <algorithm>
#include <future>

#include "common/log.h"

namespace syncbus::consumer {
namespace {

namespace res = kube::resources;

// Parses `list` into T objects, skipping (and logging) invalid ones.
template <typename T>
std::vector<std::shared_ptr<const T>> ParseAll(const kube::ObjectList& list,
                                               const std::string& cluster) {
  std::vector<std::shared_ptr<const T>> parsed;
  for (const auto& item : list.items) {
    auto object = T::FromJson(item);
    if (!object.ok()) {
      log::Warn("ignoring an invalid set",
                {{"cluster", cluster}, {"error", object.status().message()}});
      continue;
    }
    parsed.push_back(std::make_shared<const T>(std::move(*object)));
  }
  return parsed;
}

}  // namespace

Result<ClusterState> DirectHubReader::Read(const SyncRequest& request) {
  const std::string key = request.ClusterKey();
  const std::string& ns = request.cluster_namespace;
  auto ss_future = std::async(std::launch::async,
                              [&] { return hub_.List(kube::Collection(res::kSyncSets, ns), {}); });
  auto sss_future = std::async(
      std::launch::async, [&] { return hub_.List(kube::Collection(res::kSelectorSyncSets), {}); });
  auto cs_future = std::async(std::launch::async, [&] {
    return hub_.Get(kube::Object(res::kClusterSyncs, ns, request.cluster_name));
  });
  auto cd_json = hub_.Get(kube::Object(res::kClusterDeployments, ns, request.cluster_name));
  auto ss_list = ss_future.get();
  auto sss_list = sss_future.get();
  auto cs_json = cs_future.get();
  ClusterState state;
  if (!cd_json.ok()) {
    if (cd_json.status().code() == Code::kNotFound) return state;
    return cd_json.status().Annotate("reading ClusterDeployment " + key);
  }
  auto cd = hive::ClusterDeployment::FromJson(*cd_json);
  if (!cd.ok()) return cd.status().Annotate("ClusterDeployment " + key);
  state.cd = std::make_shared<const hive::ClusterDeployment>(std::move(*cd));
  if (!ss_list.ok()) return ss_list.status().Annotate("listing SyncSets in " + ns);
  if (!sss_list.ok()) return sss_list.status().Annotate("listing SelectorSyncSets");
  if (cs_json.ok()) {
    auto cs = hive::ClusterSync::FromJson(*cs_json);
    if (cs.ok()) state.status = std::make_shared<const hive::ClusterSync>(std::move(*cs));
  } else if (cs_json.status().code() != Code::kNotFound) {
    return cs_json.status().Annotate("reading ClusterSync " + key);
  }
  ChooseSets(state, ParseAll<hive::SyncSet>(*ss_list, key),
             ParseAll<hive::SelectorSyncSet>(*sss_list, key));
  return state;
}

MirrorHubReader::MirrorHubReader(HubMirror& mirror, HubReader& direct,
                                 std::chrono::milliseconds max_wait, prometheus::Registry& registry)
    : mirror_(mirror),
      direct_(direct),
      max_wait_(max_wait),
      reads_(
          prometheus::BuildCounter()
              .Name("syncbus_consumer_hub_state_reads_total")
              .Help(
                  "How syncs read their cluster's state: from the mirror at once (fresh), after "
                  "waiting for it to catch up (waited), or from the hub because it did not in time "
                  "(behind) or the request did not say what the publisher saw (unknown)")
              .Register(registry)),
      fresh_(reads_.Add({{"source", "mirror"}, {"result", "fresh"}})),
      waited_(reads_.Add({{"source", "mirror"}, {"result", "waited"}})),
      behind_(reads_.Add({{"source", "hub"}, {"result", "behind"}})),
      unknown_(reads_.Add({{"source", "hub"}, {"result", "unknown"}})),
      overtaken_(reads_.Add({{"source", "hub"}, {"result", "overtaken"}})) {}

Result<ClusterState> MirrorHubReader::Read(const SyncRequest& request) {
  if (request.seen.empty()) {
    unknown_.Increment();
    return direct_.Read(request);
  }
  if (mirror_.FreshAt(request.seen)) {
    fresh_.Increment();
    return mirror_.Read(request.cluster_namespace, request.cluster_name);
  }
  if (mirror_.WaitFresh(request.seen, max_wait_)) {
    waited_.Increment();
    return mirror_.Read(request.cluster_namespace, request.cluster_name);
  }
  behind_.Increment();
  log::Debug("hub mirror behind the publisher; reading the hub",
             {{"cluster", request.ClusterKey()},
              {"want_syncsets", request.seen.sync_sets},
              {"have_syncsets", mirror_.version(HubCollection::kSyncSets)}});
  return direct_.Read(request);
}

std::optional<ClusterState> MirrorHubReader::ReadIfFresh(const SyncRequest& request) {
  if (request.seen.empty() || !mirror_.FreshAt(request.seen)) return std::nullopt;
  return mirror_.Read(request.cluster_namespace, request.cluster_name);
}

bool MirrorHubReader::Overtaken(const ClusterState& state) const {
  if (!state.cd) return false;
  std::shared_ptr<const hive::ClusterSync> now =
      mirror_.Status(state.cd->meta.ns, state.cd->meta.name);
  if (!now || now == state.status) return false;
  if (state.status && now->meta.resource_version == state.status->meta.resource_version)
    return false;
  auto newer = [](const std::vector<hive::SyncStatus>& entries, const auto& sets) {
    for (const hive::SyncStatus& entry : entries) {
      auto set = std::find_if(sets.begin(), sets.end(),
                              [&](const auto& s) { return s->meta.name == entry.name; });
      if (set == sets.end() || (*set)->meta.generation < entry.observed_generation) return true;
    }
    return false;
  };
  return newer(now->status.sync_sets, state.sync_sets) ||
         newer(now->status.selector_sync_sets, state.selector_sync_sets);
}

Result<ClusterState> MirrorHubReader::ReadCurrent(const std::string& ns, const std::string& name) {
  if (mirror_.synced()) return mirror_.Read(ns, name);
  return direct_.ReadCurrent(ns, name);
}

Result<ClusterState> MirrorHubReader::ReadAfresh(const SyncRequest& request) {
  overtaken_.Increment();
  return direct_.Read(request);
}

}  // namespace syncbus::consumer
