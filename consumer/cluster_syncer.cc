#include "consumer/cluster_syncer.h"

#include <algorithm>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <set>

#include "common/log.h"
#include "common/time_format.h"

namespace syncbus::consumer {
namespace {

namespace res = kube::resources;

// Hive's owner references: NewControllerRef with Controller cleared (blockOwnerDeletion only).
Json OwnerReference(const char* api_version, const char* kind, const std::string& name,
                    const std::string& uid) {
  return Json::array({{{"apiVersion", api_version},
                       {"kind", kind},
                       {"name", name},
                       {"uid", uid},
                       {"blockOwnerDeletion", true}}});
}

// The ClusterSync in `object`; a status that does not parse counts as empty (the write replaces
// it). Null when even its metadata is invalid.
std::shared_ptr<const hive::ClusterSync> ParseClusterSync(const Json& object) {
  auto parsed = hive::ClusterSync::FromJson(object);
  if (parsed.ok()) return std::make_shared<const hive::ClusterSync>(std::move(*parsed));
  auto meta = hive::ObjectMeta::FromJson(object);
  if (!meta.ok()) return nullptr;
  return std::make_shared<const hive::ClusterSync>(hive::ClusterSync{std::move(*meta), {}});
}

std::string KindName(SetKind kind) {
  return kind == SetKind::kSyncSet ? "SyncSet" : "SelectorSyncSet";
}

bool AnySetFailed(const hive::ClusterSyncStatus& status) {
  auto failed = [](const hive::SyncStatus& s) { return s.result != hive::SyncResult::kSuccess; };
  return std::any_of(status.sync_sets.begin(), status.sync_sets.end(), failed) ||
         std::any_of(status.selector_sync_sets.begin(), status.selector_sync_sets.end(), failed);
}

// Adds a failed set to the outcome: the outcome is transient only if every failure is, and waits
// at least as long as any target asked.
void RecordFailedSet(SyncOutcome& outcome, const std::string& name, const SetRunResult& result) {
  outcome.failed_sets.push_back(name);
  outcome.transient =
      outcome.failed_sets.size() == 1 ? result.transient : (outcome.transient && result.transient);
  outcome.retry_after = std::max(outcome.retry_after, result.retry_after);
}

// Hive's clustersync reads the target's OpenAPI schema before anything else and writes nothing
// when that fails. A cluster whose API server answered none of this sync's requests (down,
// hibernating, unreachable) gets no status write and no lease renewal either, so Hive's other
// controllers do not see it fail: Unavailable, and the request is retried.
Status AnsweredSomething(const std::string& key, const std::vector<SetRunResult>& results) {
  const SetRunResult* unanswered = nullptr;
  bool answered = false;
  bool unanswered_only = true;
  for (const SetRunResult& r : results) {
    answered = answered || r.answered;
    if (r.success) continue;
    unanswered_only = unanswered_only && r.unanswered_only;
    if (unanswered == nullptr) unanswered = &r;
  }
  if (unanswered == nullptr || answered || !unanswered_only) return Status::Ok();
  return Unavailable(
      "cluster " + key +
      " answered no request (nothing recorded, as Hive records nothing): " + unanswered->failure);
}

// Fills in the outcome of each run (`outcome_of`: see ClusterSteps) and the sync's figures.
void RecordRuns(std::vector<SetRunResult>& results, const std::vector<size_t>& outcome_of,
                std::vector<SetOutcome>& outcomes, SyncOutcome& outcome) {
  for (size_t k = 0; k < outcome_of.size(); ++k) {
    SetOutcome& o = outcomes[outcome_of[k]];
    SetRunResult& r = results[k];
    o.applied = true;
    o.success = r.success;
    o.failure_message = r.failure;
    o.resources_to_delete = std::move(r.tracked);
    outcome.applies += r.applies;
    outcome.sets.push_back(
        {KindName(o.kind), o.name, o.removed ? 0 : o.generation, r.applies, r.success, r.failure});
    outcome.slowest_set_serial_seconds =
        std::max(outcome.slowest_set_serial_seconds, r.serial_seconds);
    if (!r.success) RecordFailedSet(outcome, o.name, r);
  }
}

}  // namespace

ClusterSyncer::ClusterSyncer(SyncerOptions options, kube::Client& hub, HubReader& reader,
                             TargetClients& targets, Clock& clock, prometheus::Registry& registry)
    : options_(std::move(options)),
      hub_(hub),
      reader_(reader),
      targets_(targets),
      inputs_(hub, targets, options_.request_timeout, options_.kubeconfig_reads),
      clock_(clock),
      limiter_({options_.max_in_flight, options_.per_cluster_in_flight, options_.per_cluster_qps},
               clock),
      hive_metrics_(registry),
      applied_(prometheus::BuildCounter()
                   .Name("syncbus_consumer_resources_applied_total")
                   .Help("Object applies to target clusters by result")
                   .Register(registry)),
      applied_success_(applied_.Add({{"result", "success"}})),
      applied_failure_(applied_.Add({{"result", "failure"}})),
      apply_seconds_(
          prometheus::BuildHistogram()
              .Name("syncbus_consumer_apply_duration_seconds")
              .Help("Duration of one object apply to a target cluster")
              .Register(registry)
              .Add({}, prometheus::Histogram::BucketBoundaries{0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                               0.5, 1, 2.5, 5, 10, 30})) {}

std::vector<SetRunResult> ClusterSyncer::RunAll(const TargetSession& session,
                                                std::vector<SetPlan> plans,
                                                std::vector<std::vector<size_t>> waits_for) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<SetRunResult> results;
    std::vector<SetPlan> plans;
    std::vector<std::vector<size_t>> waits_for;  // earlier plans each must follow
    std::vector<bool> started, finished;
    size_t running = 0, done = 0, limit = 1;
    bool runs_gone = false;  // every run's copy of the session is released
  };
  auto shared = std::make_shared<Shared>();
  const size_t total = plans.size();
  shared->results.resize(total);
  shared->started.assign(total, false);
  shared->finished.assign(total, false);
  shared->limit = static_cast<size_t>(std::max(1, options_.parallel_sync_sets));
  shared->waits_for = std::move(waits_for);
  shared->plans = std::move(plans);
  // The runs share `own`'s lifetime: when the last of them is destroyed (maybe on a transport's
  // thread, after its callback), nothing of this sync is left there, its client included.
  TargetSession own = session;
  own.lifetime = std::shared_ptr<void>(nullptr, [shared](void*) {
    {
      std::lock_guard lock(shared->mu);
      shared->runs_gone = true;
    }
    shared->cv.notify_all();
  });
  // Starts every plan whose predecessors are done, in order, while fewer than `limit` run.
  std::function<void()> launch = [shared, &own, &launch, total] {
    std::vector<size_t> starting;
    {
      std::lock_guard lock(shared->mu);
      for (size_t i = 0; i < total && shared->running < shared->limit; ++i) {
        if (shared->started[i]) continue;
        const auto& deps = shared->waits_for[i];
        if (!std::all_of(deps.begin(), deps.end(), [&](size_t j) { return shared->finished[j]; }))
          continue;
        shared->started[i] = true;
        ++shared->running;
        starting.push_back(i);
      }
    }
    for (size_t idx : starting) {
      auto run = SetRun::Create(
          own, std::move(shared->plans[idx]), [shared, idx, &launch](SetRunResult r) {
            shared->results[idx] = std::move(r);
            {
              std::lock_guard lock(shared->mu);
              shared->finished[idx] = true;
              --shared->running;
            }
            launch();  // before counting this one done: RunAll (and launch) outlive it
            {
              std::lock_guard lock(shared->mu);
              ++shared->done;
            }
            shared->cv.notify_all();
          });
      run->Start();
    }
  };
  launch();
  std::unique_lock lock(shared->mu);
  shared->cv.wait(lock, [&] { return shared->done == total; });
  lock.unlock();
  own.lifetime.reset();  // until every run is destroyed too
  lock.lock();
  shared->cv.wait(lock, [&] { return shared->runs_gone; });
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
  auto seconds_since_start = [&] {
    return std::chrono::duration<double>(clock_.Now() - sync_start).count();
  };
  SyncOutcome outcome;
  // 1. Read, 2. plan, and claim the cluster when the plan writes (at least the status). Two
  // requests of one cluster can be in flight at once (a change that overtook a queued resync, a
  // re-send, a replay): when another sync stored the cluster's status from newer state between
  // this read and the claim, read again, from the hub, and plan anew.
  Result<ClusterState> state = reader_.Read(request);
  SyncPlan plan;
  bool claimed = false;
  bool created = false;          // this sync made the ClusterSync
  std::optional<Target> target;  // the cluster's client, once the plan needs it
  while (true) {
    if (!state.ok()) return state.status();
    if (!state->cd) {
      outcome.kind = SyncOutcome::Kind::kSkipped;
      outcome.detail = "cluster-gone";
      hive_metrics_.Reconciled("no-op", seconds_since_start());
      return outcome;
    }
    if (std::string skip = state->cd->SkipReason(); !skip.empty()) {
      outcome.kind = SyncOutcome::Kind::kSkipped;
      outcome.detail = skip;
      hive_metrics_.Reconciled("no-op", seconds_since_start());
      return outcome;
    }
    plan = PlanSync(*state, request.full_reapply);
    // Hive keeps a ClusterSync for every eligible cluster, sets or none.
    if (NothingToWrite(*state, plan, request.full_reapply)) {
      outcome.kind = SyncOutcome::Kind::kUpToDate;
      return outcome;
    }
    if (!fence || claimed) break;
    // Before anything is written (the claim is the first write): the cluster must answer, as
    // Hive writes nothing for a cluster whose API server answers nothing (AnsweredSomething).
    // A client kept from a sync that succeeded has had its answer; a new one is asked (its
    // discovery, which the apply needs anyway).
    if ((plan.any_apply() || plan.any_delete()) && !state->cd->fake()) {
      if (!target) {
        auto opened = OpenTarget(request, *state->cd);
        if (!opened.ok()) return opened.status();
        target = std::move(*opened);
      }
      if (!target->kept) {
        if (Status answers = TargetAnswers(key, *target, plan, *state); !answers.ok())
          return answers;
      }
    }
    // The claim is written on the cluster's ClusterSyncLease, which its ClusterSync owns.
    if (!state->status) {
      auto made = MakeClusterSync(*state->cd, &created);
      if (!made.ok()) return made.status();
      state->status = std::move(*made);
    }
    if (Status owned = fence(); !owned.ok()) return owned;
    claimed = true;
    if (!reader_.Overtaken(*state)) break;
    log::Info("another sync stored newer state of the cluster meanwhile; reading the hub",
              {{"cluster", key}});
    state = reader_.ReadAfresh(request);
  }
  const hive::ClusterDeployment& cd = *state->cd;
  static const hive::ClusterSyncStatus kNoStatus;
  const hive::ClusterSyncStatus& current = state->status ? state->status->status : kNoStatus;

  // 3. Plan the steps, with what they need read (through the client the claim was preceded by,
  // or, without a fence, one opened now), and run them.
  SecretSources secrets;
  if (plan.any_apply() || plan.any_delete()) {
    if (!target && !cd.fake()) {
      auto opened = OpenTarget(request, cd);
      if (!opened.ok()) return opened.status();
      target = std::move(*opened);
    }
    outcome.prepare_seconds = seconds_since_start();
    SYNCBUS_RETURN_IF_ERROR(inputs_.Read(ReadsOf(*state, plan), target, secrets));
  }
  ClusterSteps steps = PlanSteps(*state, plan, secrets, target ? target->mapper.get() : nullptr);
  if (!steps.runs.empty())
    SYNCBUS_RETURN_IF_ERROR(Run({request, cd, fence}, target, steps, outcome));

  // 4. Record.
  if (fence) {
    if (Status owned = fence(); !owned.ok()) return owned;  // another consumer owns it now
  }
  const SteadyTime store_start = clock_.Now();
  if (Status stored = StoreStatus(cd, steps.outcomes, steps.metas, state->status,
                                  outcome.status_version, created);
      !stored.ok())
    return stored;
  outcome.store_seconds = std::chrono::duration<double>(clock_.Now() - store_start).count();
  outcome.recovered = outcome.failed_sets.empty() && AnySetFailed(current);
  if (!outcome.failed_sets.empty()) {
    std::string names;
    for (const auto& n : outcome.failed_sets) names += (names.empty() ? "" : ", ") + n;
    outcome.detail = "failing sets: " + names;
  }
  hive_metrics_.Reconciled(created ? "clustersync-created" : "full-sync", seconds_since_start());
  return outcome;
}

Result<Target> ClusterSyncer::OpenTarget(const SyncRequest& request,
                                         const hive::ClusterDeployment& cd) {
  // A cluster whose last sync succeeded keeps its client and is not asked for its Secret again
  // while its ClusterDeployment names the same one and the request knows of no newer version of
  // it. A full reapply that knows no version (the publisher watches no Secrets) reads it anyway,
  // so that rotated credentials are noticed within a reapply interval.
  return inputs_.OpenTarget(cd, request.kubeconfig_version,
                            request.full_reapply && request.kubeconfig_version.empty());
}

TargetSession ClusterSyncer::OpenSession(const Scene& scene, const std::optional<Target>& target) {
  TargetSession session;
  session.cluster = scene.request.ClusterKey();
  if (target) {
    session.client = target->client;
    session.mapper = target->mapper;
  }
  session.fake = scene.cd.fake();
  session.limiter = &limiter_;
  session.clock = &clock_;
  session.deadline = clock_.Now() + options_.cluster_deadline;
  session.fence = scene.fence;
  session.field_manager = options_.field_manager;
  session.take_over_managers = options_.take_over_managers;
  session.observe = [this](bool ok, double seconds) {
    (ok ? applied_success_ : applied_failure_).Increment();
    apply_seconds_.Observe(seconds);
  };
  session.observe_apply = [this](ApplyStep::Op op, bool ok, double seconds) {
    using Type = HiveMetrics::ApplyType;
    const Type type = op == ApplyStep::Op::kCreateOnly       ? Type::kCreateOnly
                      : op == ApplyStep::Op::kCreateOrUpdate ? Type::kCreateOrUpdate
                                                             : Type::kApply;
    hive_metrics_.ResourceApplied(type, ok, seconds);
  };
  return session;
}

Status ClusterSyncer::TargetAnswers(const std::string& key, const Target& target,
                                    const SyncPlan& plan, const ClusterState& state) {
  std::optional<bool> answered = target.mapper->Prefetch(ReadsOf(state, plan).api_versions);
  if (!answered) {  // discovery was cached: ask the cheapest thing there is
    auto version = target.client->GetPath("/version");
    answered = version.ok() || Answered(version.status());
  }
  if (*answered) return Status::Ok();
  return Unavailable("cluster " + key +
                     " answered no request (nothing recorded, as Hive records nothing)");
}

Status ClusterSyncer::Run(const Scene& scene, const std::optional<Target>& target,
                          ClusterSteps& steps, SyncOutcome& outcome) {
  TargetSession session = OpenSession(scene, target);
  const SteadyTime target_start = clock_.Now();
  std::vector<SetRunResult> results =
      RunAll(session, std::move(steps.runs), std::move(steps.waits_for));
  SYNCBUS_RETURN_IF_ERROR(AnsweredSomething(scene.request.ClusterKey(), results));
  RecordRuns(results, steps.outcome_of, steps.outcomes, outcome);
  outcome.target_seconds = std::chrono::duration<double>(clock_.Now() - target_start).count();
  return Status::Ok();
}

Status ClusterSyncer::StoreStatus(const hive::ClusterDeployment& cd,
                                  const std::vector<SetOutcome>& outcomes,
                                  const std::vector<const hive::ObjectMeta*>& metas,
                                  std::shared_ptr<const hive::ClusterSync> known,
                                  std::string& stored_version, bool& created) {
  const std::string key = cd.meta.Key();
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (!known) {
      auto made = MakeClusterSync(cd, &created);
      if (!made.ok()) return made.status();
      known = std::move(*made);
    }
    if (known) {
      // The status this write replaces: the one read, so nothing another writer stored is lost
      // (a 409 says there is one, and the loop merges into it).
      const WallTime now = clock_.WallNow();
      BuiltStatus next = BuildStatus(known->status, outcomes, now, cd.installed_timestamp);
      Json next_json = next.status.ToJson();
      if (next_json == known->status.ToJson()) return Status::Ok();  // nothing changed: no write
      Json update = {{"apiVersion", hive::kHiveInternalApiVersion},
                     {"kind", "ClusterSync"},
                     {"metadata",
                      {{"name", cd.meta.name},
                       {"namespace", cd.meta.ns},
                       {"resourceVersion", known->meta.resource_version}}},
                     {"status", next_json}};
      auto written =
          hub_.Update(kube::StatusOf(res::kClusterSyncs, cd.meta.ns, cd.meta.name), update);
      if (written.ok()) {
        stored_version = (*written)["metadata"].value("resourceVersion", "");
        reader_.NoteStatusWritten(*written);
        const bool succeeded_before = !known->status.first_success_time.empty();
        for (size_t i : next.first_successes) {
          if (metas[i] != nullptr)
            hive_metrics_.SetFirstSuccess(*metas[i], cd, succeeded_before, now);
        }
        if (next.cluster_first_success)
          hive_metrics_.ClusterFirstSuccess(cd, *next.cluster_first_success);
        return Status::Ok();
      }
      if (written.status().code() != Code::kConflict &&
          written.status().code() != Code::kNotFound) {
        return written.status().Annotate("storing ClusterSync " + key);
      }
    }
    // Someone else wrote (or created, or deleted) it in between: read it and merge again.
    auto current = hub_.Get(kube::Object(res::kClusterSyncs, cd.meta.ns, cd.meta.name));
    if (!current.ok() && current.status().code() != Code::kNotFound) {
      return current.status().Annotate("storing ClusterSync " + key);
    }
    known = current.ok() ? ParseClusterSync(*current) : nullptr;
    if (current.ok() && !known)
      return InvalidArgument("ClusterSync " + key + " has no valid metadata");
  }
  return Status(Code::kConflict,
                "storing ClusterSync " + key + ": still conflicting after 5 attempts");
}

Result<std::shared_ptr<const hive::ClusterSync>> ClusterSyncer::MakeClusterSync(
    const hive::ClusterDeployment& cd, bool* created) {
  const std::string key = cd.meta.Key();
  Json fresh = {{"apiVersion", hive::kHiveInternalApiVersion},
                {"kind", "ClusterSync"},
                {"metadata",
                 {{"name", cd.meta.name},
                  {"namespace", cd.meta.ns},
                  {"ownerReferences", OwnerReference(hive::kHiveApiVersion, "ClusterDeployment",
                                                     cd.meta.name, cd.meta.uid)}}},
                {"spec", Json::object()}};
  auto made = hub_.Create(kube::Collection(res::kClusterSyncs, cd.meta.ns), fresh);
  if (!made.ok() && made.status().code() == Code::kAlreadyExists)
    made = hub_.Get(kube::Object(res::kClusterSyncs, cd.meta.ns, cd.meta.name));
  else if (made.ok() && created != nullptr)
    *created = true;
  if (!made.ok()) return made.status().Annotate("making ClusterSync " + key);
  std::shared_ptr<const hive::ClusterSync> parsed = ParseClusterSync(*made);
  if (!parsed) return InvalidArgument("ClusterSync " + key + " has no valid metadata");
  reader_.NoteStatusWritten(*made);
  return parsed;
}

}  // namespace syncbus::consumer
