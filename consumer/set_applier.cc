#include "consumer/set_applier.h"

#include <algorithm>
#include <thread>

#include "consumer/client_side_apply.h"

namespace syncbus::consumer {
namespace {

using Op = ApplyStep::Op;

// A set failure that heals without an edit: a namespace or kind that an earlier set or another
// controller has not created yet (404), besides the transport's transient codes.
bool SelfHealing(const Status& status) {
  return IsTransient(status.code()) || status.code() == Code::kNotFound;
}

}  // namespace

std::vector<hive::SyncResourceReference> MergeResources(
    std::vector<hive::SyncResourceReference> a, const std::vector<hive::SyncResourceReference>& b) {
  if (a.empty()) return b;
  std::set<std::string> have;
  for (const auto& r : a) have.insert(ObjectIdentity(r));
  for (const auto& r : b) {
    if (have.insert(ObjectIdentity(r)).second) a.push_back(r);
  }
  return a;
}

std::shared_ptr<SetRun> SetRun::Create(const TargetSession& session, SetPlan plan, Done done) {
  return std::shared_ptr<SetRun>(new SetRun(session, std::move(plan), std::move(done)));
}

void SetRun::Start() {
  RunStep();
}

ApplyStep& SetRun::Current() {
  return index_ < plan_.steps.size() ? plan_.steps[index_]
                                     : plan_.deletions[index_ - plan_.steps.size()];
}

void SetRun::RunStep() {
  if (index_ < plan_.steps.size() && stopped_) index_ = plan_.steps.size();  // on to the deletions
  if (fenced_ || index_ >= plan_.steps.size() + plan_.deletions.size()) {
    Finish();
    return;
  }
  ApplyStep& step = Current();
  if (step.op == Op::kFail) {
    if (!step.cause.ok()) {
      StepDone(Status(step.cause.code(), step.failure)
                   .WithRetryAfter(step.cause.retry_after())
                   .WithHttpStatus(step.cause.http_status()),
               false);
    } else {
      StepDone(Status(step.retryable ? Code::kNotFound : Code::kInvalidArgument, step.failure),
               false);
    }
    return;
  }
  if (session_.clock->Now() >= session_.deadline) {
    result_.unanswered_only = false;  // syncbus's own limit: not a cluster that did not answer
    StepDone(Status(Code::kTimeout, "the cluster's sync deadline passed"), false);
    return;
  }
  if (session_.fence) {
    if (Status owned = session_.fence(); !owned.ok()) {
      fenced_ = true;
      Fail(owned);
      Finish();
      return;
    }
  }
  if (session_.fake) {  // a fake cluster: everything succeeds, nothing is sent
    StepDone(Status::Ok(), step.op != Op::kDelete);
    return;
  }
  if (!step.resource) {
    Resolve(step);
    return;
  }
  if (std::string placement = step.PlacementError(); !placement.empty()) {
    StepDone(InvalidArgument(placement), false);
    return;
  }
  Send(step);
}

// A kind unknown when planned: rediscover off the transport's thread, then go on.
void SetRun::Resolve(ApplyStep& step) {
  std::thread([self = shared_from_this(), &step] {
    auto mapped = step.MapKind(*self->session_.mapper);
    if (!mapped.ok()) {
      Status why = mapped.status();
      if (why.code() == Code::kNotFound && step.op != Op::kDelete) {
        // kubectl patch names the kind as its resource builder was given it.
        why = NotFound(step.op == Op::kPatch
                           ? "the server doesn't have a resource type \"" + step.kind + "\""
                           : step.UnknownKindMessage());
      }
      if (step.op == Op::kDelete && why.code() == Code::kNotFound)
        why = Status::Ok();  // kind gone: deleted
      self->StepDone(why, false);
      return;
    }
    step.resource = *mapped;
    step.Place();
    if (std::string placement = step.PlacementError(); !placement.empty()) {
      self->StepDone(InvalidArgument(placement), false);
      return;
    }
    self->Send(step);
  }).detach();
}

void SetRun::Send(ApplyStep& step) {
  auto self = shared_from_this();
  // Every request holds a limiter slot from start to completion (follow-up requests of one step
  // reuse it).
  auto finish = [self, &step](const Status& status, bool wrote) {
    self->session_.limiter->Release(self->session_.cluster);
    double seconds =
        std::chrono::duration<double>(self->session_.clock->Now() - self->step_sent_).count();
    self->result_.serial_seconds += seconds;
    if (self->session_.observe) self->session_.observe(status.ok(), seconds);
    if (self->session_.observe_apply && step.op != Op::kPatch && step.op != Op::kDelete) {
      self->session_.observe_apply(step.op, status.ok(), seconds);
    }
    self->StepDone(status, wrote);
  };
  const kube::ObjectRef ref =
      kube::Object(*step.resource, step.resource->namespaced ? step.ns : "", step.name);
  kube::ClientImpl& client = *session_.client;
  // Every write asks the fence again at the moment it goes out (http::SendGuard).
  const http::SendGuard guard = session_.fence;
  std::function<void()> start;
  switch (step.op) {
    case Op::kApply:
      start = [self, &client, ref, &step, finish, guard] {
        const kube::ApplyOptions options{self->session_.field_manager, /*force=*/true};
        client.ApplyAsync(
            ref, step.object, options,
            [self, &client, ref, &step, finish, options, guard](Result<Json> r) {
              if (!r.ok()) {
                finish(r.status(), true);
                return;
              }
              // Fields a client-side applier (Hive) set are handed to us, then the object applied
              // again: what the set no longer holds goes, as it would have under Hive.
              auto patch = TakeOverPatch(*r, self->session_.field_manager,
                                         self->session_.take_over_managers);
              if (!patch) {
                finish(Status::Ok(), true);
                return;
              }
              client.PatchAsync(
                  ref, kube::PatchType::kJson, std::move(*patch),
                  [&client, ref, &step, finish, options, guard](const Result<Json>& p) {
                    if (!p.ok()) {
                      finish(p.status().Annotate("taking over the fields of the client-side apply"),
                             true);
                      return;
                    }
                    client.ApplyAsync(
                        ref, step.object, options,
                        [finish](const Result<Json>& again) { finish(again.status(), true); },
                        guard);
                  },
                  guard);
            },
            guard);
      };
      break;
    case Op::kCreateOnly:
      start = [&client, ref, &step, finish, guard] {
        client.CreateAsync(
            kube::Collection(ref.resource, ref.ns), step.object,
            [finish](const Result<Json>& r) {
              if (!r.ok() && r.status().code() == Code::kAlreadyExists) {
                finish(Status::Ok(), false);  // present already: left as it is
              } else {
                finish(r.status(), true);
              }
            },
            guard);
      };
      break;
    case Op::kCreateOrUpdate:
      start = [&client, ref, &step, finish, guard] {
        client.GetAsync(ref, [&client, ref, &step, finish, guard](const Result<Json>& current) {
          if (!current.ok() && current.status().code() == Code::kNotFound) {
            client.CreateAsync(
                kube::Collection(ref.resource, ref.ns), step.object,
                [finish](const Result<Json>& r) { finish(r.status(), true); }, guard);
            return;
          }
          if (!current.ok()) {
            finish(current.status(), false);
            return;
          }
          std::string patch = UpdatePatch(step.object, *current);
          if (patch == "{}") {
            finish(Status::Ok(), false);  // unchanged
            return;
          }
          auto type = BuiltinGroup(ref.resource.group) ? kube::PatchType::kStrategicMerge
                                                       : kube::PatchType::kMerge;
          client.PatchAsync(
              ref, type, std::move(patch),
              [finish](const Result<Json>& p) { finish(p.status(), true); }, guard);
        });
      };
      break;
    case Op::kPatch:
      start = [&client, ref, &step, finish, guard] {
        client.PatchAsync(
            ref, step.patch_type, step.patch,
            [finish](const Result<Json>& r) { finish(r.status(), true); }, guard);
      };
      break;
    case Op::kDelete:
      start = [&client, ref, finish, guard] {
        client.DeleteAsync(
            ref, {},
            [finish](const Status& s) {
              finish(s.code() == Code::kNotFound ? Status::Ok() : s, false);  // NotFound: deleted
            },
            guard);
      };
      break;
    case Op::kFail: break;
  }
  session_.limiter->Submit(session_.cluster, [self, start = std::move(start), finish] {
    self->step_sent_ = self->session_.clock->Now();
    if (self->session_.clock->Now() >= self->session_.deadline) {
      self->result_.unanswered_only = false;  // as in RunStep
      finish(Status(Code::kTimeout, "the cluster's sync deadline passed"), false);
      return;
    }
    start();
  });
}

void SetRun::StepDone(const Status& status, bool wrote) {
  ApplyStep& step = Current();
  ++index_;
  if (!status.ok() && session_.fence) {
    // The transport keeps a write off the wire once the fence says no (the lease may have lapsed
    // while the request waited or the process stood still): the cluster is given up, as in
    // RunStep.
    if (Status owned = session_.fence(); !owned.ok()) {
      fenced_ = true;
      Fail(owned);
      Finish();
      return;
    }
  }
  if (status.ok() || status.http_status() > 0) result_.answered = true;
  if (step.op == Op::kDelete || (step.op == Op::kFail && index_ > plan_.steps.size())) {
    if (!status.ok()) {
      undeleted_.insert(step.Identity());
      std::string why = step.op == Op::kFail ? status.message()
                                             : "could not delete resource: " + status.message();
      delete_failures_.push_back(step.DeleteMessage(why));
      Fail(status);
    }
    RunStep();  // every deletion runs
    return;
  }
  if (!status.ok()) {
    if (step.op == Op::kFail && step.soft) {
      soft_failures_.push_back(step.failure);
      Fail(status);
    } else {
      apply_failure_ = step.op == Op::kFail ? step.failure : step.prefix + status.message();
      if (step.op == Op::kApply && status.code() == Code::kNotFound &&
          status.message().rfind("namespaces \"", 0) == 0) {
        // kubectl apply found no object, created it, and the namespace was missing.
        apply_failure_ = step.prefix + "error when creating \"object\": " + status.message();
      }
      stopped_ = true;
      Fail(status);
    }
    RunStep();
    return;
  }
  if (wrote) ++result_.applies;
  if (step.track) applied_.push_back(step.Ref());
  RunStep();
}

void SetRun::Fail(const Status& status) {
  const bool unanswered = status.http_status() == 0 &&
                          (status.code() == Code::kUnavailable || status.code() == Code::kTimeout);
  result_.unanswered_only = result_.unanswered_only && unanswered;
  if (result_.success) {
    result_.success = false;
    result_.transient = SelfHealing(status);
  } else {
    result_.transient = result_.transient && SelfHealing(status);
  }
  result_.retry_after = std::max(result_.retry_after, status.retry_after());
}

void SetRun::Finish() {
  if (!done_) return;
  if (fenced_) {
    // Nothing more may be written: report what happened so far; the caller gives the cluster up.
    result_.failure =
        apply_failure_.empty() ? "the cluster is owned by another consumer now" : apply_failure_;
  } else {
    std::string failure = apply_failure_;
    if (failure.empty() && !soft_failures_.empty()) failure = AggregateMessage(soft_failures_);
    if (!delete_failures_.empty()) {
      failure += (failure.empty() ? "" : "\n") + AggregateMessage(delete_failures_);
    }
    result_.failure = std::move(failure);
  }
  if (plan_.sync_mode) {
    // Hive's remaining resources: what the set still lists, and what could not be deleted, in
    // the order they were tracked.
    std::vector<hive::SyncResourceReference> remaining;
    for (const auto& ref : plan_.previously_tracked) {
      std::string id = ObjectIdentity(ref);
      bool listed = plan_.listed.count(id) > 0 || plan_.listed.count(ObjectIdentity(ref, true)) > 0;
      bool undeleted = undeleted_.count(id) > 0 || undeleted_.count(ObjectIdentity(ref, true)) > 0;
      if (listed || undeleted) remaining.push_back(ref);
    }
    result_.tracked = MergeResources(std::move(applied_), remaining);
  }
  Done done = std::move(done_);
  done_ = nullptr;
  done(std::move(result_));
}

}  // namespace syncbus::consumer
