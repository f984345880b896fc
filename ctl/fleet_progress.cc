#include "ctl/fleet_progress.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "common/bus/rollout_release.h"
#include "common/hive/desired_state.h"
#include "common/hive/types.h"
#include "common/kube/resource.h"

namespace syncbus::ctl {

std::string RolloutSummary::Describe() const {
  return kind + " " + (ns.empty() ? name : ns + "/" + name);
}

std::string RolloutSummary::Ref() const {
  return kind == "SyncSet" ? "syncset/" + ns + "/" + name : "selectorsyncset/" + name;
}

std::string RolloutSummary::StopReport() const {
  std::string out = "rollout of " + Describe() + " is " + phase;
  if (waves > 0) out += " at wave " + std::to_string(wave) + " of " + std::to_string(waves);
  out += (message.empty() ? "" : ": " + message) + "\n";
  for (const auto& f : failing) out += "  failing " + f.cluster + ": " + f.message + "\n";
  return out;
}

Json RolloutSummary::ToJson() const {
  Json failing_json = Json::array();
  for (const auto& f : failing)
    failing_json.push_back({{"cluster", f.cluster}, {"message", f.message}});
  Json j = {{"kind", kind},   {"name", name},
            {"set", Ref()},   {"generation", generation},
            {"phase", phase}, {"wave", wave},
            {"waves", waves}, {"clusters", clusters},
            {"held", held},   {"failing", std::move(failing_json)}};
  if (!ns.empty()) j["namespace"] = ns;
  if (!message.empty()) j["message"] = message;
  return j;
}

std::vector<const RolloutSummary*> FleetProgress::Stopped() const {
  std::vector<const RolloutSummary*> out;
  for (const auto& r : rollouts) {
    if (r.Stopped() && r.clusters > 0) out.push_back(&r);
  }
  return out;
}

Json FleetProgress::ToJson() const {
  Json rollouts_json = Json::array();
  for (const auto& r : rollouts) rollouts_json.push_back(r.ToJson());
  return {{"clusters", clusters},
          {"synced", synced},
          {"failing", failing},
          {"pending", pending},
          {"held", held},
          {"skipped", skipped},
          {"failingClusters", failing_clusters},
          {"pendingClusters", pending_clusters},
          {"rollouts", std::move(rollouts_json)}};
}

namespace {

// Objects per list page. A read of a 100,000-cluster fleet took 33 s in pages of 500 and 11 s in
// pages of 5,000 (syncbus-kubesim, real-cluster latency): the round trips, not the objects, made
// most of it. A page is folded into the builder as it arrives; 5,000 raised the peak RSS from
// 149 to 210 MiB.
constexpr int kProgressPageSize = 5000;

// A rolled-out set's annotations, read once per set, and what the view reports of it.
struct GatedSet {
  rollout::SetRollout rollout;
  RolloutSummary summary;
};

GatedSet GatedSetOf(const std::string& kind, const hive::ObjectMeta& meta) {
  GatedSet g;
  g.rollout = rollout::RolloutOf(meta);
  RolloutSummary& s = g.summary;
  s.kind = kind;
  s.ns = meta.ns;
  s.name = meta.name;
  s.generation = meta.generation;
  const auto& state = g.rollout.state;
  if (state && state->generation == meta.generation) {
    s.phase = rollout::PhaseName(state->phase);
    s.wave = state->wave;
    s.waves = state->waves;
    s.message = state->message;
    s.failing = state->failing;
  } else {
    s.phase = "Starting";
    s.message = "the publisher starts generation " + std::to_string(meta.generation) + " at wave 1";
  }
  // Whatever the state says, an unreadable annotation holds the set back from every cluster.
  if (!g.rollout.spec) {
    s.phase = "Halted";
    s.message = g.rollout.spec_error;
  }
  return g;
}

// "held by rollout of SelectorSyncSet fleet-cm, wave 3 (2 of 3 released)", or "" when the
// rollout releases the set's generation to `cd`.
std::string HeldBy(const GatedSet& g, const hive::ClusterDeployment& cd) {
  if (rollout::ReleaseOf(g.rollout, g.summary.generation, cd) != rollout::Release::kHeld) return "";
  const std::string by = "held by rollout of " + g.summary.Describe();
  if (!g.rollout.spec)
    return by + ": its " + rollout::kSpecAnnotation + " annotation is unreadable";
  const auto& state = g.rollout.state;
  if (!state || state->generation != g.summary.generation) {
    return by + ", generation " + std::to_string(g.summary.generation) + " not started yet";
  }
  std::string out = by + ", wave " + std::to_string(rollout::WaveOf(*g.rollout.spec, *state, cd)) +
                    " (" + std::to_string(state->wave) + " of " + std::to_string(state->waves) +
                    " released";
  if (state->phase != rollout::Phase::kProgressing)
    out += ", " + std::string(rollout::PhaseName(state->phase));
  return out + ")";
}

ClusterHubState Classify(const std::string& key, const std::string& skip_reason,
                         const std::vector<SetState>& sets) {
  ClusterHubState c;
  c.key = key;
  if (!skip_reason.empty()) {
    c.kind = ClusterHubState::Kind::kSkipped;
    c.skip_reason = skip_reason;
    return c;
  }
  bool all_current = true, any_failed = false;
  for (const auto& s : sets) {
    if (!s.observed || *s.observed != s.generation) {
      if (all_current || (!c.held && !s.held.empty())) {
        c.detail = !s.held.empty() ? s.held
                                   : s.kind + " " + s.name + " not yet at generation " +
                                         std::to_string(s.generation);
        c.held = !s.held.empty();
      }
      all_current = false;
    } else if (s.result != "Success") {
      if (!any_failed || (!s.last_transition.empty() && s.last_transition < c.since)) {
        c.since = s.last_transition;
        c.detail = s.kind + " " + s.name + ": " + s.failure;
      }
      any_failed = true;
    }
  }
  if (any_failed) {
    c.kind = ClusterHubState::Kind::kFailing;
    c.held = false;
  } else if (!all_current) {
    c.kind = ClusterHubState::Kind::kPending;
  } else {
    c.kind = ClusterHubState::Kind::kSynced;
    for (const auto& s : sets) c.since = std::max(c.since, s.last_transition);
  }
  return c;
}

// What progress reads of each collection: the sets without their resources and patches, each
// ClusterSync's entries without their resourcesToDelete. A fleet's collections are read page by
// page into these (ReadProgress), never held as JSON all at once.
class ProgressBuilder {
 public:
  void AddSyncSet(const Json& j) {
    if (auto ss = hive::SyncSet::FromJson(j); ss.ok()) {
      Trim(ss->spec);
      AddGated("SyncSet", ss->meta);
      ss_by_ns_[ss->meta.ns].push_back(std::move(*ss));
    }
  }
  void AddSelectorSyncSet(const Json& j) {
    if (auto s = hive::SelectorSyncSet::FromJson(j); s.ok()) {
      Trim(s->spec);
      AddGated("SelectorSyncSet", s->meta);
      sss_.push_back(std::move(*s));
    }
  }
  void AddClusterSync(const Json& j) {
    auto cs = hive::ClusterSync::FromJson(j);
    if (!cs.ok()) return;
    hive::ClusterSyncStatus& status = statuses_[cs->meta.Key()];
    status.sync_sets = std::move(cs->status.sync_sets);
    status.selector_sync_sets = std::move(cs->status.selector_sync_sets);
    for (auto* list : {&status.sync_sets, &status.selector_sync_sets}) {
      for (auto& e : *list) e.resources_to_delete = {};
    }
  }
  // Classifies the cluster against the sets and statuses added so far.
  void AddCluster(const Json& j) {
    auto cd = hive::ClusterDeployment::FromJson(j);
    if (!cd.ok()) return;
    auto st = statuses_.find(cd->meta.Key());
    std::string skip;
    std::vector<SetState> sets = Sets(*cd, st == statuses_.end() ? nullptr : &st->second, &skip);
    ClusterHubState c = Classify(cd->meta.Key(), skip, sets);
    if (skip.empty()) {
      for (const SetState& set : sets) {
        auto g = gated_.find(GatedKey(set.kind, cd->meta.ns, set.name));
        if (g == gated_.end()) continue;
        ++g->second.summary.clusters;
        if (!set.held.empty() && set.observed != set.generation) ++g->second.summary.held;
      }
    }
    if (c.held) ++p_.held;
    switch (c.kind) {
      case ClusterHubState::Kind::kSkipped: ++p_.skipped; break;
      case ClusterHubState::Kind::kFailing:
        ++p_.clusters;
        ++p_.failing;
        p_.failing_clusters.push_back(c.key);
        break;
      case ClusterHubState::Kind::kPending:
        ++p_.clusters;
        ++p_.pending;
        p_.pending_clusters.push_back(c.key);
        break;
      case ClusterHubState::Kind::kSynced:
        ++p_.clusters;
        ++p_.synced;
        break;
    }
    p_.states.push_back(std::move(c));
  }
  FleetProgress Finish() && {
    std::sort(p_.failing_clusters.begin(), p_.failing_clusters.end());
    std::sort(p_.pending_clusters.begin(), p_.pending_clusters.end());
    std::sort(p_.states.begin(), p_.states.end(),
              [](const auto& a, const auto& b) { return a.key < b.key; });
    for (auto& [key, g] : gated_) {
      if (g.summary.clusters > 0) p_.rollouts.push_back(std::move(g.summary));
    }
    return std::move(p_);
  }

  // The cluster's applicable sets against its status entries (nullptr: no ClusterSync yet).
  std::vector<SetState> Sets(const hive::ClusterDeployment& cd, const hive::ClusterSyncStatus* st,
                             std::string* skip_reason) const {
    std::vector<const hive::SyncSet*> ns_sets;
    if (auto in_ns = ss_by_ns_.find(cd.meta.ns); in_ns != ss_by_ns_.end()) {
      for (const auto& s : in_ns->second) ns_sets.push_back(&s);
    }
    std::vector<const hive::SelectorSyncSet*> all_sss;
    for (const auto& s : sss_) all_sss.push_back(&s);
    hive::DesiredState desired = hive::ComputeDesired(cd, ns_sets, all_sss);
    if (skip_reason != nullptr) *skip_reason = desired.skip_reason;
    std::vector<SetState> out;
    for (const auto& set : desired.sets) {
      SetState row;
      row.kind = set.kind == hive::SetKind::kSyncSet ? "SyncSet" : "SelectorSyncSet";
      row.name = set.name;
      row.generation = set.generation;
      if (st != nullptr) {
        const auto& list =
            set.kind == hive::SetKind::kSyncSet ? st->sync_sets : st->selector_sync_sets;
        for (const auto& e : list) {
          if (e.name != set.name) continue;
          row.observed = e.observed_generation;
          row.result = e.result == hive::SyncResult::kSuccess ? "Success" : "Failure";
          row.last_transition = e.last_transition_time;
          row.first_success = e.first_success_time;
          row.failure = e.failure_message;
        }
      }
      auto g = gated_.find(GatedKey(row.kind, cd.meta.ns, set.name));
      if (g != gated_.end()) row.held = HeldBy(g->second, cd);
      out.push_back(std::move(row));
    }
    return out;
  }

 private:
  static void Trim(hive::SyncSetCommonSpec& spec) {
    spec.resources = {};
    spec.patches = {};
  }
  // Sorted by kind, namespace and name (a SelectorSyncSet has none).
  static std::string GatedKey(const std::string& kind, const std::string& cluster_ns,
                              const std::string& name) {
    return kind + "|" + (kind == "SyncSet" ? cluster_ns : "") + "|" + name;
  }
  void AddGated(const std::string& kind, const hive::ObjectMeta& meta) {
    if (!meta.annotations.contains(rollout::kSpecAnnotation)) return;
    gated_.insert_or_assign(GatedKey(kind, meta.ns, meta.name), GatedSetOf(kind, meta));
  }

  std::map<std::string, std::vector<hive::SyncSet>> ss_by_ns_;
  std::vector<hive::SelectorSyncSet> sss_;
  std::map<std::string, hive::ClusterSyncStatus> statuses_;  // "ns/name"
  std::map<std::string, GatedSet> gated_;                    // GatedKey
  FleetProgress p_;
};

}  // namespace

std::vector<SetState> DescribeSets(const Json& cluster_deployment,
                                   const std::vector<Json>& syncsets,
                                   const std::vector<Json>& selector_syncsets,
                                   const Json* cluster_sync, std::string* skip_reason) {
  auto cd = hive::ClusterDeployment::FromJson(cluster_deployment);
  if (!cd.ok()) return {};
  ProgressBuilder in;
  for (const auto& j : syncsets) in.AddSyncSet(j);
  for (const auto& j : selector_syncsets) in.AddSelectorSyncSet(j);
  std::optional<hive::ClusterSync> cs;
  if (cluster_sync != nullptr) {
    if (auto parsed = hive::ClusterSync::FromJson(*cluster_sync); parsed.ok())
      cs = std::move(*parsed);
  }
  return in.Sets(*cd, cs ? &cs->status : nullptr, skip_reason);
}

FleetProgress ComputeProgress(const std::vector<Json>& cluster_deployments,
                              const std::vector<Json>& syncsets,
                              const std::vector<Json>& selector_syncsets,
                              const std::vector<Json>& cluster_syncs) {
  ProgressBuilder b;
  for (const auto& j : syncsets) b.AddSyncSet(j);
  for (const auto& j : selector_syncsets) b.AddSelectorSyncSet(j);
  for (const auto& j : cluster_syncs) b.AddClusterSync(j);
  for (const auto& j : cluster_deployments) b.AddCluster(j);
  return std::move(b).Finish();
}

Result<FleetProgress> ReadProgress(kube::Client& hub, const std::string& ns) {
  namespace res = kube::resources;
  ProgressBuilder b;
  // Each collection page by page: the sets and statuses first, then the clusters, each
  // classified as its page arrives.
  auto list = [&](const kube::Resource& resource, const std::string& in_ns,
                  void (ProgressBuilder::*add)(const Json&), const char* what) -> Status {
    kube::ListOptions options;
    options.limit = kProgressPageSize;
    options.on_page = [&](std::vector<Json>& page) {
      for (const Json& j : page) (b.*add)(j);
      page.clear();
    };
    auto listed = hub.List(kube::Collection(resource, in_ns), options);
    return listed.ok() ? Status::Ok() : listed.status().Annotate(what);
  };
  SYNCBUS_RETURN_IF_ERROR(
      list(res::kSyncSets, ns, &ProgressBuilder::AddSyncSet, "listing SyncSets"));
  SYNCBUS_RETURN_IF_ERROR(list(res::kSelectorSyncSets, "", &ProgressBuilder::AddSelectorSyncSet,
                               "listing SelectorSyncSets"));
  SYNCBUS_RETURN_IF_ERROR(
      list(res::kClusterSyncs, ns, &ProgressBuilder::AddClusterSync, "listing ClusterSyncs"));
  SYNCBUS_RETURN_IF_ERROR(list(res::kClusterDeployments, ns, &ProgressBuilder::AddCluster,
                               "listing ClusterDeployments"));
  return std::move(b).Finish();
}

}  // namespace syncbus::ctl
