#include "consumer/cluster_syncer.h"

#include <algorithm>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>

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

std::string KindName(SetKind kind) { return kind == SetKind::kSyncSet ? "SyncSet" : "SelectorSyncSet"; }

// Adds a failed set to the outcome: the outcome is transient only if every failure is, and waits
// at least as long as any target asked.
void RecordFailedSet(SyncOutcome& outcome, const std::string& name, const SetRunResult& result) {
  outcome.failed_sets.push_back(name);
  outcome.transient = outcome.failed_sets.size() == 1 ? result.transient : (outcome.transient && result.transient);
  outcome.retry_after = std::max(outcome.retry_after, result.retry_after);
}

}  // namespace

ClusterSyncer::ClusterSyncer(SyncerOptions options, kube::Client& hub, TargetClients& targets,
                             Clock& clock, prometheus::Registry& registry)
    : options_(std::move(options)),
      hub_(hub),
      targets_(targets),
      clock_(clock),
      limiter_({options_.max_in_flight, options_.per_cluster_in_flight, options_.per_cluster_qps}, clock),
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

std::vector<SetRunResult> ClusterSyncer::RunAll(const TargetSession& session, std::vector<SetPlan> plans) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<SetRunResult> results;
    std::vector<SetPlan> plans;
    size_t next = 0, done = 0;
  };
  auto shared = std::make_shared<Shared>();
  shared->results.resize(plans.size());
  shared->plans = std::move(plans);
  const size_t total = shared->plans.size();
  // Starts the next plan; each finished run starts another, so at most `limit` are active.
  std::function<void()> launch_next = [shared, &session, &launch_next, total] {
    size_t idx;
    {
      std::lock_guard lock(shared->mu);
      if (shared->next >= total) return;
      idx = shared->next++;
    }
    auto run = SetRun::Create(session, std::move(shared->plans[idx]), [shared, idx, &launch_next](SetRunResult r) {
      shared->results[idx] = std::move(r);
      launch_next();   // before counting this one done: RunAll (and launch_next) outlive it
      {
        std::lock_guard lock(shared->mu);
        ++shared->done;
      }
      shared->cv.notify_all();
    });
    run->Start();
  };
  size_t limit = static_cast<size_t>(std::max(1, options_.parallel_sync_sets));
  for (size_t i = 0; i < std::min(limit, total); ++i) launch_next();
  std::unique_lock lock(shared->mu);
  shared->cv.wait(lock, [&] { return shared->done == total; });
  return std::move(shared->results);
}

Result<SyncOutcome> ClusterSyncer::Sync(const SyncRequest& request, const SyncFence& fence) {
  Result<SyncOutcome> outcome = SyncOnce(request, fence);
  // Whatever failed, the next attempt reads the kubeconfig Secret again: the failure may be its
  // credentials.
  if (!outcome.ok() || !outcome->failed_sets.empty()) targets_.Distrust(request.ClusterKey());
  return outcome;
}

Result<SyncOutcome> ClusterSyncer::SyncOnce(const SyncRequest& request, const SyncFence& fence) {
  const std::string key = request.ClusterKey();
  const SteadyTime sync_start = clock_.Now();
  SyncOutcome outcome;
  // The four hub reads go out at once (each is one round trip to the hub).
  const std::string& ns = request.cluster_namespace;
  auto ss_future = std::async(std::launch::async, [&] { return hub_.List(kube::Collection(res::kSyncSets, ns), {}); });
  auto sss_future = std::async(std::launch::async, [&] { return hub_.List(kube::Collection(res::kSelectorSyncSets), {}); });
  auto cs_future = std::async(std::launch::async, [&] {
    return hub_.Get(kube::Object(res::kClusterSyncs, ns, request.cluster_name));
  });
  auto read_secret = [this, &ns](const std::string& name) {
    return std::async(std::launch::async,
                      [this, &ns, name] { return hub_.Get(kube::Object(res::kSecrets, ns, name)); });
  };
  // A cluster whose last sync succeeded keeps its client and is not asked for its Secret again
  // while its ClusterDeployment names the same one. A full reapply reads it anyway, which bounds
  // how long rotated credentials that still work go unnoticed.
  const std::string remembered_secret = targets_.KubeconfigSecret(key);
  std::optional<Target> kept;
  if (!request.full_reapply) kept = targets_.Trusted(key, remembered_secret);
  std::future<Result<Json>> secret_future;
  if (!remembered_secret.empty() && !kept) secret_future = read_secret(remembered_secret);
  auto cd_json = hub_.Get(kube::Object(res::kClusterDeployments, ns, request.cluster_name));
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

  // The admin kubeconfig Secret is read while the set lists are still on their way (already
  // since the start when the ClusterDeployment still names the one it named last time).
  if (cd->admin_kubeconfig_secret != remembered_secret) {
    kept.reset();
    secret_future = {};
    if (!cd->admin_kubeconfig_secret.empty()) secret_future = read_secret(cd->admin_kubeconfig_secret);
  }

  auto ss_list = ss_future.get();
  if (!ss_list.ok()) return ss_list.status().Annotate("listing SyncSets in " + cd->meta.ns);
  auto sss_list = sss_future.get();
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
  // The typed sets hold what is needed; the parsed lists (every SelectorSyncSet of the fleet)
  // would otherwise stay in memory for the whole sync.
  ss_list->items = {};
  sss_list->items = {};
  auto by_name = [](const auto& a, const auto& b) { return a.meta.name < b.meta.name; };
  std::sort(syncsets.begin(), syncsets.end(), by_name);
  std::sort(selector_syncsets.begin(), selector_syncsets.end(), by_name);

  hive::ClusterSyncStatus current;
  auto cs_json = cs_future.get();
  if (cs_json.ok()) {
    auto cs = hive::ClusterSync::FromJson(*cs_json);
    if (cs.ok()) current = std::move(cs->status);
  } else if (cs_json.status().code() != Code::kNotFound) {
    return cs_json.status().Annotate("reading ClusterSync " + key);
  }

  std::vector<SetWork> work;
  for (const auto& ss : syncsets) {
    work.push_back({SetKind::kSyncSet, ss.meta.name, ss.meta.ns, ss.meta.generation, &ss.spec,
                    request.full_reapply || NeedsApply(current, SetKind::kSyncSet, ss.meta.name, ss.meta.generation)});
  }
  for (const auto& sss : selector_syncsets) {
    work.push_back({SetKind::kSelectorSyncSet, sss.meta.name, "", sss.meta.generation, &sss.spec,
                    request.full_reapply ||
                        NeedsApply(current, SetKind::kSelectorSyncSet, sss.meta.name, sss.meta.generation)});
  }
  // Entries of sets no longer applicable; those tracking Sync-mode objects must delete them.
  std::vector<const hive::SyncStatus*> removed;
  for (SetKind kind : {SetKind::kSyncSet, SetKind::kSelectorSyncSet}) {
    for (const auto& e : kind == SetKind::kSyncSet ? current.sync_sets : current.selector_sync_sets) {
      bool applicable = std::any_of(work.begin(), work.end(), [&](const SetWork& w) {
        return w.kind == kind && w.name == e.name;
      });
      if (!applicable) removed.push_back(&e);
    }
  }
  auto removed_kind = [&](const hive::SyncStatus* e) {
    return e >= current.sync_sets.data() && e < current.sync_sets.data() + current.sync_sets.size()
               ? SetKind::kSyncSet
               : SetKind::kSelectorSyncSet;
  };
  bool any_apply = std::any_of(work.begin(), work.end(), [](const SetWork& w) { return w.needs_apply; });
  bool any_delete = std::any_of(removed.begin(), removed.end(),
                                [](const hive::SyncStatus* e) { return !e->resources_to_delete.empty(); });
  if (!any_apply && removed.empty() && !request.full_reapply) {
    outcome.kind = SyncOutcome::Kind::kUpToDate;
    return outcome;
  }

  std::vector<SetOutcome> outcomes(work.size());
  for (size_t i = 0; i < work.size(); ++i) {
    outcomes[i] = {work[i].kind, work[i].name, work[i].generation, false, false, "", {}};
  }
  for (const hive::SyncStatus* e : removed) {
    SetOutcome gone{removed_kind(e), e->name, e->observed_generation, false, true, "", {}};
    gone.removed = true;
    outcomes.push_back(std::move(gone));
  }
  if (any_apply || any_delete) {
    Result<Target> target = kept ? Result<Target>(*kept) : ReadTarget(key, *cd, secret_future);
    if (!target.ok()) return target.status();

    TargetSession session;
    session.cluster = key;
    session.client = target->client;
    session.mapper = target->mapper;
    session.limiter = &limiter_;
    session.clock = &clock_;
    session.deadline = clock_.Now() + options_.cluster_deadline;
    session.fence = fence;
    session.field_manager = options_.field_manager;
    session.observe = [this](bool ok, double seconds) {
      applied_.Add({{"result", ok ? "success" : "failure"}}).Increment();
      apply_seconds_.Observe(seconds);
    };

    SecretSources secrets;
    // Objects every applicable set lists now: they are never deleted (moved between sets).
    auto plan_input = [&](const SetWork& w) {
      PlanInput in;
      in.spec = w.spec;
      in.set_namespace = w.ns;
      in.cd_labels = &cd->meta.labels;
      in.secrets = &secrets;
      if (const hive::SyncStatus* e = FindEntry(current, w.kind, w.name)) in.previously_tracked = e->resources_to_delete;
      return in;
    };
    // Discovery of every group-version the plans need runs while the source Secrets of the
    // secretMappings are read fresh from the hub, all at once.
    std::set<std::string> api_versions;
    for (const SetWork& w : work) {
      if (w.needs_apply) api_versions.merge(ApiVersionsOf(plan_input(w)));
    }
    for (const hive::SyncStatus* e : removed) {
      for (const auto& ref : e->resources_to_delete) api_versions.insert(ref.api_version);
    }
    auto discovered = std::async(std::launch::async, [&] { target->mapper->Prefetch(api_versions); });
    Status source_error = ReadSourceSecrets(work, secrets);
    discovered.get();
    if (!source_error.ok()) return source_error;

    bool need_listing = any_delete || std::any_of(work.begin(), work.end(), [&](const SetWork& w) {
      const hive::SyncStatus* e = FindEntry(current, w.kind, w.name);
      return w.needs_apply && e != nullptr && !e->resources_to_delete.empty();
    });
    std::set<std::string> listed;
    if (need_listing) {
      for (const SetWork& w : work) listed.merge(ListedObjects(plan_input(w), *target->mapper));
    }

    const SteadyTime target_start = clock_.Now();
    outcome.prepare_seconds = std::chrono::duration<double>(target_start - sync_start).count();
    // Deletions first: the objects of sets no longer applicable.
    if (any_delete) {
      std::vector<SetPlan> plans;
      std::vector<size_t> which;
      for (size_t i = work.size(); i < outcomes.size(); ++i) {
        const hive::SyncStatus* e = removed[i - work.size()];
        if (e->resources_to_delete.empty()) continue;
        plans.push_back(PlanRemoval(e->resources_to_delete, listed, *target->mapper));
        which.push_back(i);
      }
      std::vector<SetRunResult> results = RunAll(session, std::move(plans));
      for (size_t k = 0; k < which.size(); ++k) {
        SetOutcome& o = outcomes[which[k]];
        o.applied = true;
        o.success = results[k].success;
        o.failure_message = results[k].failure;
        o.resources_to_delete = std::move(results[k].tracked);
        outcome.sets.push_back({KindName(o.kind), o.name, 0, 0, o.success, o.failure_message});
        if (!o.success) RecordFailedSet(outcome, o.name, results[k]);
      }
    }

    std::vector<SetPlan> plans;
    std::vector<size_t> which;
    for (size_t i = 0; i < work.size(); ++i) {
      if (!work[i].needs_apply) continue;
      PlanInput in = plan_input(work[i]);
      in.listed_elsewhere = &listed;
      plans.push_back(PlanSet(in, *target->mapper));
      which.push_back(i);
    }
    std::vector<SetRunResult> results = RunAll(session, std::move(plans));
    for (size_t k = 0; k < which.size(); ++k) {
      size_t idx = which[k];
      SetRunResult& r = results[k];
      outcomes[idx].applied = true;
      outcomes[idx].success = r.success;
      outcomes[idx].failure_message = r.failure;
      outcomes[idx].resources_to_delete = std::move(r.tracked);
      outcome.applies += r.applies;
      outcome.sets.push_back({KindName(work[idx].kind), work[idx].name, work[idx].generation, r.applies, r.success,
                              r.failure});
      outcome.slowest_set_serial_seconds = std::max(outcome.slowest_set_serial_seconds, r.serial_seconds);
      if (!r.success) RecordFailedSet(outcome, work[idx].name, r);
    }
    outcome.target_seconds = std::chrono::duration<double>(clock_.Now() - target_start).count();
  }
  if (fence) {
    if (Status owned = fence(); !owned.ok()) return owned;   // another consumer owns it now
  }
  const SteadyTime store_start = clock_.Now();
  Status stored = StoreStatus(*cd, outcomes, std::move(cs_json));
  if (!stored.ok()) return stored;
  if (request.full_reapply && outcome.failed_sets.empty()) {
    Status renewed = RenewLease(*cd);
    if (!renewed.ok()) return renewed;
  }
  outcome.store_seconds = std::chrono::duration<double>(clock_.Now() - store_start).count();
  if (!outcome.failed_sets.empty()) {
    std::string names;
    for (const auto& n : outcome.failed_sets) names += (names.empty() ? "" : ", ") + n;
    outcome.detail = "failing sets: " + names;
  }
  return outcome;
}

Result<Target> ClusterSyncer::ReadTarget(const std::string& key, const hive::ClusterDeployment& cd,
                                         std::future<Result<Json>>& secret_future) {
  if (!secret_future.valid()) {
    return InvalidArgument("ClusterDeployment " + key + " names no spec.clusterMetadata.adminKubeconfigSecretRef");
  }
  auto secret = secret_future.get();
  if (!secret.ok()) return secret.status().Annotate("reading admin kubeconfig Secret of " + key);
  std::optional<std::string> kubeconfig;
  if (secret->contains("data") && (*secret)["data"].contains("kubeconfig") &&
      (*secret)["data"]["kubeconfig"].is_string()) {
    kubeconfig = DecodeBase64((*secret)["data"]["kubeconfig"].get<std::string>());
  }
  if (!kubeconfig) {
    return InvalidArgument("admin kubeconfig Secret " + cd.meta.ns + "/" + cd.admin_kubeconfig_secret +
                           " has no valid data.kubeconfig");
  }
  return targets_.Get(key, cd.admin_kubeconfig_secret, *kubeconfig, options_.request_timeout);
}

Status ClusterSyncer::ReadSourceSecrets(const std::vector<SetWork>& work, SecretSources& secrets) {
  std::vector<std::pair<std::string, std::string>> sources;   // namespace, name
  for (const SetWork& w : work) {
    if (!w.needs_apply) continue;
    for (const auto& m : w.spec->secret_mappings) {
      std::string ns = m.source.ns.empty() ? w.ns : m.source.ns;
      if (secrets.try_emplace(ns + "/" + m.source.name, NotFound("not read")).second) {
        sources.emplace_back(ns, m.source.name);
      }
    }
  }
  constexpr size_t kReadsAtOnce = 16;
  for (size_t first = 0; first < sources.size(); first += kReadsAtOnce) {
    std::vector<std::future<Result<Json>>> reads;
    for (size_t i = first; i < std::min(sources.size(), first + kReadsAtOnce); ++i) {
      reads.push_back(std::async(std::launch::async, [this, &source = sources[i]] {
        return hub_.Get(kube::Object(res::kSecrets, source.first, source.second));
      }));
    }
    Status error;
    for (size_t i = first; i < first + reads.size(); ++i) {
      auto read = reads[i - first].get();
      std::string source_key = sources[i].first + "/" + sources[i].second;
      if (!read.ok() && read.status().code() != Code::kNotFound && error.ok()) {
        error = read.status().Annotate("reading source Secret " + source_key);
      }
      secrets.insert_or_assign(source_key, std::move(read));
    }
    if (!error.ok()) return error;
  }
  return Status::Ok();
}

Status ClusterSyncer::StoreStatus(const hive::ClusterDeployment& cd, const std::vector<SetOutcome>& outcomes,
                                  Result<Json> first_read) {
  const std::string key = cd.meta.Key();
  for (int attempt = 0; attempt < 5; ++attempt) {
    // The first attempt merges into what Sync read (a conflict means someone wrote since).
    auto current = attempt == 0 ? std::move(first_read)
                                : hub_.Get(kube::Object(res::kClusterSyncs, cd.meta.ns, cd.meta.name));
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
