#include "consumer/cluster_syncer.h"

#include <algorithm>
#include <future>

#include "common/base64.h"
#include "common/log.h"
#include "common/time_format.h"

namespace syncbus::consumer {
namespace {

namespace res = kube::resources;

const hive::SyncStatus* FindEntry(const hive::ClusterSyncStatus& st, SetKind kind, const std::string& name) {
  const auto& list = kind == SetKind::kSyncSet ? st.sync_sets : st.selector_sync_sets;
  for (const auto& e : list) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

bool NeedsApply(const hive::ClusterSyncStatus& st, SetKind kind, const std::string& name, int64_t gen) {
  const hive::SyncStatus* e = FindEntry(st, kind, name);
  return !e || e->observed_generation != gen || e->result != hive::SyncResult::kSuccess;
}

Json OwnerReference(const hive::ClusterDeployment& cd) {
  return Json::array({{{"apiVersion", hive::kHiveApiVersion},
                       {"kind", "ClusterDeployment"},
                       {"name", cd.meta.name},
                       {"uid", cd.meta.uid},
                       {"controller", true},
                       {"blockOwnerDeletion", true}}});
}

std::string Describe(const Json& obj) {
  std::string kind = obj.value("kind", "?");
  const Json& m = obj.contains("metadata") ? obj["metadata"] : Json::object();
  std::string ns = m.value("namespace", "");
  return kind + " " + (ns.empty() ? "" : ns + "/") + m.value("name", "?");
}

}  // namespace

ClusterSyncer::ClusterSyncer(SyncerOptions options, kube::Client& hub, TargetClients& targets,
                             Clock& clock, prometheus::Registry& registry)
    : options_(std::move(options)),
      hub_(hub),
      targets_(targets),
      clock_(clock),
      applied_(prometheus::BuildCounter()
                   .Name("syncbus_consumer_resources_applied_total")
                   .Help("Object applies to target clusters by result")
                   .Register(registry)),
      apply_seconds_(prometheus::BuildHistogram()
                         .Name("syncbus_consumer_apply_duration_seconds")
                         .Help("Duration of one object apply to a target cluster")
                         .Register(registry)
                         .Add({}, prometheus::Histogram::BucketBoundaries{0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                                          0.5, 1, 2.5, 5, 10, 30})) {}

ClusterSyncer::SetResult ClusterSyncer::ApplySet(const SetWork& set, const Target& target,
                                                 const SyncFence& fence) {
  SetResult result;
  for (size_t i = 0; i < set.spec->resources.size(); ++i) {
    if (fence) {
      if (Status owned = fence(); !owned.ok()) {
        result.success = false;
        result.failure = owned.message();
        return result;
      }
    }
    Json obj = set.spec->resources[i];
    std::string api_version = obj.value("apiVersion", "");
    std::string kind = obj.value("kind", "");
    auto fail = [&](const Status& s, bool transient) {
      result.success = false;
      result.transient = transient;
      result.failure = "resources[" + std::to_string(i) + "] " + Describe(obj) + ": " + s.message();
      applied_.Add({{"result", "failure"}}).Increment();
    };
    auto mapping = target.mapper->Map(api_version, kind);
    if (!mapping.ok()) {
      fail(mapping.status(), IsTransient(mapping.status().code()));
      return result;
    }
    Json& meta = obj["metadata"];
    if (!meta.is_object()) meta = Json::object();
    std::string ns = meta.value("namespace", "");
    if (mapping->namespaced && ns.empty()) {
      ns = "default";   // as the kubeconfig's default namespace would be for kubectl apply
      meta["namespace"] = ns;
    } else if (!mapping->namespaced) {
      ns.clear();
      meta.erase("namespace");
    }
    meta["labels"][hive::kManagedLabel] = "true";
    std::string name = meta.value("name", "");
    SteadyTime start = clock_.Now();
    auto applied = target.client->Apply(kube::Object(*mapping, ns, name), obj,
                                        {options_.field_manager, /*force=*/true});
    apply_seconds_.Observe(std::chrono::duration<double>(clock_.Now() - start).count());
    if (!applied.ok()) {
      fail(applied.status(), IsTransient(applied.status().code()));
      return result;
    }
    applied_.Add({{"result", "success"}}).Increment();
    ++result.applies;
    result.applied.push_back({api_version, kind, name, ns});
  }
  return result;
}

Result<SyncOutcome> ClusterSyncer::Sync(const SyncRequest& request, const SyncFence& fence) {
  const std::string key = request.ClusterKey();
  SyncOutcome outcome;
  auto cd_json = hub_.Get(kube::Object(res::kClusterDeployments, request.cluster_namespace, request.cluster_name));
  if (!cd_json.ok()) {
    if (cd_json.status().code() == Code::kNotFound) {
      outcome.kind = SyncOutcome::Kind::kSkipped;
      outcome.detail = "cluster-gone";
      return outcome;
    }
    return cd_json.status().Annotate("reading ClusterDeployment " + key);
  }
  auto cd = hive::ClusterDeployment::FromJson(*cd_json);
  if (!cd.ok()) return cd.status().Annotate("ClusterDeployment " + key);
  if (std::string skip = cd->SkipReason(); !skip.empty()) {
    outcome.kind = SyncOutcome::Kind::kSkipped;
    outcome.detail = skip;
    return outcome;
  }

  auto ss_list = hub_.List(kube::Collection(res::kSyncSets, cd->meta.ns), {});
  if (!ss_list.ok()) return ss_list.status().Annotate("listing SyncSets in " + cd->meta.ns);
  auto sss_list = hub_.List(kube::Collection(res::kSelectorSyncSets), {});
  if (!sss_list.ok()) return sss_list.status().Annotate("listing SelectorSyncSets");
  std::vector<hive::SyncSet> syncsets;
  std::vector<hive::SelectorSyncSet> selector_syncsets;
  for (const auto& item : ss_list->items) {
    auto ss = hive::SyncSet::FromJson(item);
    if (!ss.ok()) {
      log::Warn("ignoring invalid SyncSet", {{"cluster", key}, {"error", ss.status().message()}});
      continue;
    }
    if (!ss->meta.deleting && hive::AppliesTo(*ss, *cd)) syncsets.push_back(std::move(*ss));
  }
  for (const auto& item : sss_list->items) {
    auto sss = hive::SelectorSyncSet::FromJson(item);
    if (!sss.ok()) {
      log::Warn("ignoring invalid SelectorSyncSet", {{"cluster", key}, {"error", sss.status().message()}});
      continue;
    }
    if (!sss->meta.deleting && hive::AppliesTo(*sss, *cd)) selector_syncsets.push_back(std::move(*sss));
  }
  auto by_name = [](const auto& a, const auto& b) { return a.meta.name < b.meta.name; };
  std::sort(syncsets.begin(), syncsets.end(), by_name);
  std::sort(selector_syncsets.begin(), selector_syncsets.end(), by_name);

  hive::ClusterSyncStatus current;
  auto cs_json = hub_.Get(kube::Object(res::kClusterSyncs, cd->meta.ns, cd->meta.name));
  if (cs_json.ok()) {
    auto cs = hive::ClusterSync::FromJson(*cs_json);
    if (cs.ok()) current = std::move(cs->status);
  } else if (cs_json.status().code() != Code::kNotFound) {
    return cs_json.status().Annotate("reading ClusterSync " + key);
  }

  std::vector<SetWork> work;
  for (const auto& ss : syncsets) {
    work.push_back({SetKind::kSyncSet, ss.meta.name, ss.meta.generation, &ss.spec,
                    request.full_reapply || NeedsApply(current, SetKind::kSyncSet, ss.meta.name, ss.meta.generation)});
  }
  for (const auto& sss : selector_syncsets) {
    work.push_back({SetKind::kSelectorSyncSet, sss.meta.name, sss.meta.generation, &sss.spec,
                    request.full_reapply ||
                        NeedsApply(current, SetKind::kSelectorSyncSet, sss.meta.name, sss.meta.generation)});
  }
  bool any_apply = std::any_of(work.begin(), work.end(), [](const SetWork& w) { return w.needs_apply; });
  size_t entries = current.sync_sets.size() + current.selector_sync_sets.size();
  size_t kept = std::count_if(work.begin(), work.end(), [&](const SetWork& w) {
    return FindEntry(current, w.kind, w.name) != nullptr;
  });
  if (!any_apply && kept == entries && !request.full_reapply) {
    outcome.kind = SyncOutcome::Kind::kUpToDate;
    return outcome;
  }

  std::vector<SetOutcome> outcomes(work.size());
  for (size_t i = 0; i < work.size(); ++i) {
    outcomes[i] = {work[i].kind, work[i].name, work[i].generation, false, false, "", {}};
  }
  if (any_apply) {
    auto secret = hub_.Get(kube::Object(res::kSecrets, cd->meta.ns, cd->admin_kubeconfig_secret));
    if (!secret.ok()) return secret.status().Annotate("reading admin kubeconfig Secret of " + key);
    std::optional<std::string> kubeconfig;
    if (secret->contains("data") && (*secret)["data"].contains("kubeconfig") &&
        (*secret)["data"]["kubeconfig"].is_string()) {
      kubeconfig = DecodeBase64((*secret)["data"]["kubeconfig"].get<std::string>());
    }
    if (!kubeconfig) {
      return InvalidArgument("admin kubeconfig Secret " + cd->meta.ns + "/" + cd->admin_kubeconfig_secret +
                             " has no valid data.kubeconfig");
    }
    auto target = targets_.Get(key, *kubeconfig);
    if (!target.ok()) return target.status();

    // Sets in parallel (bounded), each set's own steps in order.
    std::vector<std::future<SetResult>> running(work.size());
    size_t next = 0, limit = static_cast<size_t>(std::max(1, options_.parallel_sync_sets));
    std::vector<size_t> order;
    for (size_t i = 0; i < work.size(); ++i) {
      if (work[i].needs_apply) order.push_back(i);
    }
    auto launch = [&](size_t idx) {
      running[idx] = std::async(std::launch::async, [this, &work, &fence, idx, t = *target] { return ApplySet(work[idx], t, fence); });
    };
    for (; next < order.size() && next < limit; ++next) launch(order[next]);
    for (size_t done = 0; done < order.size(); ++done) {
      size_t idx = order[done];
      SetResult r = running[idx].get();
      if (next < order.size()) launch(order[next++]);
      outcomes[idx].applied = true;
      outcomes[idx].success = r.success;
      outcomes[idx].failure_message = r.failure;
      if (work[idx].spec->resource_apply_mode == hive::ResourceApplyMode::kSync) {
        outcomes[idx].resources_to_delete = std::move(r.applied);
      }
      outcome.applies += r.applies;
      if (!r.success) {
        outcome.failed_sets.push_back(work[idx].name);
        outcome.transient = outcome.failed_sets.size() == 1 ? r.transient : (outcome.transient && r.transient);
      }
    }
  }
  if (fence) {
    if (Status owned = fence(); !owned.ok()) return owned;   // another consumer owns it now
  }
  Status stored = StoreStatus(*cd, outcomes);
  if (!stored.ok()) return stored;
  if (request.full_reapply && outcome.failed_sets.empty()) {
    Status renewed = RenewLease(*cd);
    if (!renewed.ok()) return renewed;
  }
  if (!outcome.failed_sets.empty()) {
    std::string names;
    for (const auto& n : outcome.failed_sets) names += (names.empty() ? "" : ", ") + n;
    outcome.detail = "failing sets: " + names;
  }
  return outcome;
}

Status ClusterSyncer::StoreStatus(const hive::ClusterDeployment& cd, const std::vector<SetOutcome>& outcomes) {
  const std::string key = cd.meta.Key();
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto current = hub_.Get(kube::Object(res::kClusterSyncs, cd.meta.ns, cd.meta.name));
    if (!current.ok() && current.status().code() == Code::kNotFound) {
      Json fresh = {{"apiVersion", hive::kHiveInternalApiVersion},
                    {"kind", "ClusterSync"},
                    {"metadata", {{"name", cd.meta.name}, {"namespace", cd.meta.ns},
                                  {"ownerReferences", OwnerReference(cd)}}},
                    {"spec", Json::object()}};
      current = hub_.Create(kube::Collection(res::kClusterSyncs, cd.meta.ns), fresh);
      if (!current.ok() && current.status().code() == Code::kAlreadyExists) continue;
    }
    if (!current.ok()) return current.status().Annotate("storing ClusterSync " + key);
    auto parsed = hive::ClusterSync::FromJson(*current);
    hive::ClusterSyncStatus previous = parsed.ok() ? parsed->status : hive::ClusterSyncStatus{};
    hive::ClusterSyncStatus next = BuildStatus(previous, outcomes, clock_.WallNow());
    Json next_json = next.ToJson();
    Json prev_json = current->contains("status") ? (*current)["status"] : Json::object();
    if (next_json == prev_json) return Status::Ok();   // nothing changed: write nothing
    Json update = {{"apiVersion", hive::kHiveInternalApiVersion},
                   {"kind", "ClusterSync"},
                   {"metadata", {{"name", cd.meta.name}, {"namespace", cd.meta.ns},
                                 {"resourceVersion", (*current)["metadata"].value("resourceVersion", "")}}},
                   {"status", next_json}};
    auto written = hub_.Update(kube::StatusOf(res::kClusterSyncs, cd.meta.ns, cd.meta.name), update);
    if (written.ok()) return Status::Ok();
    if (written.status().code() != Code::kConflict) return written.status().Annotate("storing ClusterSync " + key);
    // Someone else wrote in between: re-read and merge again.
  }
  return Status(Code::kConflict, "storing ClusterSync " + key + ": still conflicting after 5 attempts");
}

Status ClusterSyncer::RenewLease(const hive::ClusterDeployment& cd) {
  Json lease = {{"apiVersion", hive::kHiveInternalApiVersion},
                {"kind", "ClusterSyncLease"},
                {"metadata", {{"name", cd.meta.name}, {"namespace", cd.meta.ns},
                              {"ownerReferences", OwnerReference(cd)}}},
                {"spec", {{"renewTime", FormatRfc3339Millis(clock_.WallNow())}}}};
  auto applied = hub_.Apply(kube::Object(res::kClusterSyncLeases, cd.meta.ns, cd.meta.name), lease,
                            {options_.field_manager, true});
  if (!applied.ok()) return applied.status().Annotate("renewing ClusterSyncLease " + cd.meta.Key());
  return Status::Ok();
}

}  // namespace syncbus::consumer
