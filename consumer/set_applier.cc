#include "consumer/set_applier.h"

#include <algorithm>
#include <thread>

#include "common/base64.h"
#include "consumer/templates.h"

namespace syncbus::consumer {
namespace {

using Op = ApplyStep::Op;

std::string GroupOf(const std::string& api_version) {
  size_t slash = api_version.find('/');
  return slash == std::string::npos ? "" : api_version.substr(0, slash);
}

std::string Describe(const std::string& kind, const std::string& ns, const std::string& name) {
  return kind + " " + (ns.empty() ? "" : ns + "/") + name;
}

Op OpFor(hive::ApplyBehavior behavior) {
  switch (behavior) {
    case hive::ApplyBehavior::kCreateOnly:
      return Op::kCreateOnly;
    case hive::ApplyBehavior::kCreateOrUpdate:
      return Op::kCreateOrUpdate;
    case hive::ApplyBehavior::kApply:
      break;
  }
  return Op::kApply;
}

kube::PatchType KubePatchType(hive::PatchType t) {
  switch (t) {
    case hive::PatchType::kJson:
      return kube::PatchType::kJson;
    case hive::PatchType::kMerge:
      return kube::PatchType::kMerge;
    case hive::PatchType::kStrategic:
      break;
  }
  return kube::PatchType::kStrategicMerge;
}

// Namespaced kinds without a namespace land in "default" (as kubectl's default context would
// put them); cluster-scoped kinds never carry one.
void Place(ApplyStep& step) {
  if (!step.resource) return;
  if (step.resource->namespaced) {
    if (step.ns.empty()) step.ns = "default";
  } else {
    step.ns.clear();
  }
  if (step.object.is_object()) {
    Json& meta = step.object["metadata"];
    if (step.ns.empty()) {
      meta.erase("namespace");
    } else {
      meta["namespace"] = step.ns;
    }
  }
}

// Maps the step's kind; an unknown kind is left for the run (an earlier step may install it).
void MapStep(ApplyStep& step, RestMapper& mapper) {
  auto mapped = mapper.Map(step.api_version, step.kind);
  if (mapped.ok()) {
    step.resource = *mapped;
    Place(step);
  } else if (mapped.status().code() != Code::kNotFound) {
    step.op = Op::kFail;
    step.failure = mapped.status();
  }
}

ApplyStep Failed(std::string what, Status why) {
  ApplyStep step;
  step.op = Op::kFail;
  step.what = std::move(what);
  step.failure = std::move(why);
  return step;
}

hive::SyncResourceReference RefOf(const ApplyStep& step) {
  return {step.api_version, step.kind, step.name, step.ns};
}

// Resources and secretMappings, in order; `with_bodies` false only places them (identities).
std::vector<ApplyStep> PlanObjects(const PlanInput& input, RestMapper& mapper, bool with_bodies) {
  const hive::SyncSetCommonSpec& spec = *input.spec;
  const bool sync = spec.resource_apply_mode == hive::ResourceApplyMode::kSync;
  std::vector<ApplyStep> steps;
  for (size_t i = 0; i < spec.resources.size(); ++i) {
    std::string what = "resources[" + std::to_string(i) + "]";
    Json obj = spec.resources[i].Parse();
    if (spec.enable_resource_templates && input.cd_labels != nullptr) {
      if (Status s = ExpandTemplates(obj, *input.cd_labels); !s.ok()) {
        steps.push_back(Failed(what, s));
        continue;
      }
    }
    if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object()) {
      steps.push_back(Failed(what, InvalidArgument("not an object with metadata")));
      continue;
    }
    ApplyStep step;
    step.op = OpFor(spec.apply_behavior);
    step.api_version = obj.value("apiVersion", "");
    step.kind = obj.value("kind", "");
    step.name = obj["metadata"].value("name", "");
    step.ns = obj["metadata"].value("namespace", "");
    step.what = what + " " + Describe(step.kind, step.ns, step.name);
    if (step.api_version.empty() || step.kind.empty() || step.name.empty()) {
      steps.push_back(Failed(step.what, InvalidArgument("apiVersion, kind and metadata.name are required")));
      continue;
    }
    obj["metadata"]["labels"][hive::kManagedLabel] = "true";
    if (with_bodies) step.object = std::move(obj);
    step.track = sync;
    MapStep(step, mapper);
    steps.push_back(std::move(step));
  }
  for (size_t i = 0; i < spec.secret_mappings.size(); ++i) {
    const hive::SecretMapping& m = spec.secret_mappings[i];
    std::string source_ns = m.source.ns.empty() ? input.set_namespace : m.source.ns;
    std::string source_key = source_ns + "/" + m.source.name;
    ApplyStep step;
    step.op = OpFor(spec.apply_behavior);
    step.api_version = "v1";
    step.kind = "Secret";
    step.name = m.target.name;
    step.ns = m.target.ns;
    step.what = "secretMappings[" + std::to_string(i) + "] " + Describe("Secret", step.ns, step.name);
    step.track = sync;
    if (with_bodies) {
      const Result<Json>* source = nullptr;
      if (input.secrets != nullptr) {
        auto it = input.secrets->find(source_key);
        if (it != input.secrets->end()) source = &it->second;
      }
      if (source == nullptr || !source->ok()) {
        Status why = source == nullptr ? NotFound("source Secret " + source_key + " was not read")
                                       : source->status();
        steps.push_back(Failed(step.what, why.Annotate("reading source Secret " + source_key)));
        continue;
      }
      const Json& src = **source;
      Json meta = {{"name", step.name}};
      const Json& src_meta = src.contains("metadata") ? src["metadata"] : Json::object();
      Json labels = src_meta.contains("labels") && src_meta["labels"].is_object() ? src_meta["labels"] : Json::object();
      labels[hive::kManagedLabel] = "true";
      meta["labels"] = std::move(labels);
      if (src_meta.contains("annotations") && src_meta["annotations"].is_object()) {
        meta["annotations"] = src_meta["annotations"];
      }
      step.object = {{"apiVersion", "v1"}, {"kind", "Secret"}, {"metadata", std::move(meta)}};
      if (src.contains("type")) step.object["type"] = src["type"];
      if (src.contains("data")) step.object["data"] = src["data"];
    }
    MapStep(step, mapper);
    steps.push_back(std::move(step));
  }
  return steps;
}

void AddDeletions(const std::vector<hive::SyncResourceReference>& tracked, const std::set<std::string>& keep,
                  RestMapper& mapper, std::vector<ApplyStep>& steps) {
  for (const auto& ref : tracked) {
    if (keep.count(ObjectIdentity(ref)) > 0) continue;
    ApplyStep step;
    step.op = Op::kDelete;
    step.deletion = true;
    step.api_version = ref.api_version;
    step.kind = ref.kind;
    step.ns = ref.ns;
    step.name = ref.name;
    step.what = "deleting " + Describe(ref.kind, ref.ns, ref.name);
    auto mapped = mapper.Map(ref.api_version, ref.kind);
    if (mapped.ok()) {
      step.resource = *mapped;   // namespace stays as tracked
    } else if (mapped.status().code() == Code::kNotFound) {
      continue;   // the kind is gone from the cluster, and with it the object
    } else {
      step.op = Op::kFail;
      step.failure = mapped.status();
    }
    steps.push_back(std::move(step));
  }
}

}  // namespace

std::string ObjectIdentity(const hive::SyncResourceReference& ref) {
  return GroupOf(ref.api_version) + "|" + ref.kind + "|" + ref.ns + "|" + ref.name;
}

std::set<std::string> ListedObjects(const PlanInput& input, RestMapper& mapper) {
  std::set<std::string> out;
  for (const ApplyStep& step : PlanObjects(input, mapper, /*with_bodies=*/false)) {
    if (step.op != Op::kFail) out.insert(ObjectIdentity(RefOf(step)));
  }
  return out;
}

std::set<std::string> ApiVersionsOf(const PlanInput& input) {
  const hive::SyncSetCommonSpec& spec = *input.spec;
  std::set<std::string> out;
  auto add = [&out](const std::string& api_version) {
    if (!api_version.empty() && api_version.find("{{") == std::string::npos) out.insert(api_version);
  };
  for (const hive::EmbeddedObject& r : spec.resources) add(r.api_version());
  if (!spec.secret_mappings.empty()) add("v1");
  for (const auto& p : spec.patches) add(p.api_version);
  for (const auto& ref : input.previously_tracked) add(ref.api_version);
  return out;
}

SetPlan PlanSet(const PlanInput& input, RestMapper& mapper) {
  const hive::SyncSetCommonSpec& spec = *input.spec;
  SetPlan plan;
  plan.sync_mode = spec.resource_apply_mode == hive::ResourceApplyMode::kSync;
  plan.steps = PlanObjects(input, mapper, /*with_bodies=*/true);
  for (size_t i = 0; i < spec.patches.size(); ++i) {
    const hive::SyncObjectPatch& p = spec.patches[i];
    ApplyStep step;
    step.op = Op::kPatch;
    step.api_version = p.api_version;
    step.kind = p.kind;
    step.name = p.name;
    step.ns = p.ns.empty() ? input.set_namespace : p.ns;
    step.what = "patches[" + std::to_string(i) + "] " + Describe(p.kind, step.ns, p.name);
    step.patch_type = KubePatchType(p.patch_type);
    step.patch = p.patch;
    if (spec.enable_patch_templates && input.cd_labels != nullptr) {
      auto expanded = ExpandTemplate(p.patch, *input.cd_labels);
      if (!expanded.ok()) {
        plan.steps.push_back(Failed(step.what, expanded.status()));
        continue;
      }
      step.patch = std::move(*expanded);
    }
    MapStep(step, mapper);
    plan.steps.push_back(std::move(step));
  }
  if (plan.sync_mode) {
    plan.previously_tracked = input.previously_tracked;
    std::set<std::string> keep = input.listed_elsewhere ? *input.listed_elsewhere : std::set<std::string>{};
    for (const ApplyStep& step : plan.steps) {
      if (step.track) keep.insert(ObjectIdentity(RefOf(step)));
    }
    AddDeletions(input.previously_tracked, keep, mapper, plan.steps);
  }
  return plan;
}

SetPlan PlanRemoval(const std::vector<hive::SyncResourceReference>& tracked,
                    const std::set<std::string>& listed_elsewhere, RestMapper& mapper) {
  SetPlan plan;
  plan.sync_mode = true;
  plan.previously_tracked = tracked;
  AddDeletions(tracked, listed_elsewhere, mapper, plan.steps);
  return plan;
}

std::shared_ptr<SetRun> SetRun::Create(const TargetSession& session, SetPlan plan, Done done) {
  return std::shared_ptr<SetRun>(new SetRun(session, std::move(plan), std::move(done)));
}

void SetRun::Start() { RunStep(); }

void SetRun::RunStep() {
  if (index_ >= plan_.steps.size()) {
    Finish();
    return;
  }
  ApplyStep& step = plan_.steps[index_];
  if (step.op == Op::kFail) {
    StepDone(step.failure, false);
    return;
  }
  if (session_.clock->Now() >= session_.deadline) {
    StepDone(Status(Code::kTimeout, "the cluster's sync deadline passed"), false);
    return;
  }
  if (session_.fence) {
    if (Status owned = session_.fence(); !owned.ok()) {
      Stop(owned);
      return;
    }
  }
  if (!step.resource) {
    Resolve(step);
    return;
  }
  Send(step);
}

// A kind unknown when planned: rediscover off the transport's thread, then go on.
void SetRun::Resolve(ApplyStep& step) {
  std::thread([self = shared_from_this(), &step] {
    auto mapped = self->session_.mapper->Map(step.api_version, step.kind);
    if (!mapped.ok()) {
      self->StepDone(mapped.status(), false);
      return;
    }
    step.resource = *mapped;
    Place(step);
    self->Send(step);
  }).detach();
}

void SetRun::Send(ApplyStep& step) {
  auto self = shared_from_this();
  // Every request holds a limiter slot from start to completion.
  auto finish = [self](const Status& status, bool wrote) {
    self->session_.limiter->Release(self->session_.cluster);
    double seconds = std::chrono::duration<double>(self->session_.clock->Now() - self->step_sent_).count();
    self->result_.serial_seconds += seconds;
    if (self->session_.observe) self->session_.observe(status.ok(), seconds);
    self->StepDone(status, wrote);
  };
  const kube::ObjectRef ref = kube::Object(*step.resource, step.ns, step.name);
  kube::ClientImpl& client = *session_.client;
  std::function<void()> start;
  switch (step.op) {
    case Op::kApply:
      start = [&client, ref, &step, finish, fm = session_.field_manager] {
        client.ApplyAsync(ref, step.object, {fm, /*force=*/true},
                          [finish](Result<Json> r) { finish(r.status(), true); });
      };
      break;
    case Op::kCreateOnly:
      start = [&client, ref, &step, finish] {
        client.CreateAsync(kube::Collection(ref.resource, ref.ns), step.object, [finish](Result<Json> r) {
          if (!r.ok() && r.status().code() == Code::kAlreadyExists) {
            finish(Status::Ok(), false);   // present already: left as it is
          } else {
            finish(r.status(), true);
          }
        });
      };
      break;
    case Op::kCreateOrUpdate:
      start = [self, &client, ref, &step, finish] {
        client.CreateAsync(kube::Collection(ref.resource, ref.ns), step.object,
                           [self, &client, ref, &step, finish](Result<Json> r) {
          if (r.ok() || r.status().code() != Code::kAlreadyExists) {
            finish(r.status(), true);
            return;
          }
          // Present: update exactly the fields we set (a merge patch leaves the rest alone).
          // The second request reuses the slot the create held.
          client.PatchAsync(ref, kube::PatchType::kMerge, step.object.dump(),
                            [finish](Result<Json> p) { finish(p.status(), true); });
        });
      };
      break;
    case Op::kPatch:
      start = [&client, ref, &step, finish] {
        client.PatchAsync(ref, step.patch_type, step.patch,
                          [finish](Result<Json> r) { finish(r.status(), true); });
      };
      break;
    case Op::kDelete:
      start = [&client, ref, finish] {
        client.DeleteAsync(ref, {}, [finish](Status s) {
          finish(s.code() == Code::kNotFound ? Status::Ok() : s, false);   // NotFound: deleted
        });
      };
      break;
    case Op::kFail:
      break;
  }
  session_.limiter->Submit(session_.cluster, [self, start = std::move(start), finish] {
    self->step_sent_ = self->session_.clock->Now();
    if (self->session_.clock->Now() >= self->session_.deadline) {
      finish(Status(Code::kTimeout, "the cluster's sync deadline passed"), false);
      return;
    }
    start();
  });
}

void SetRun::StepDone(const Status& status, bool wrote) {
  ApplyStep& step = plan_.steps[index_];
  ++index_;
  if (step.deletion) {
    if (!status.ok()) {
      undeleted_.push_back(RefOf(step));
      Fail(status.Annotate(step.what));
    }
    RunStep();   // every deletion runs
    return;
  }
  if (!status.ok()) {
    Stop(status.Annotate(step.what));
    return;
  }
  if (wrote) ++result_.applies;
  if (step.track) done_tracked_.push_back(RefOf(step));
  RunStep();
}

void SetRun::Stop(const Status& status) {
  Fail(status);
  result_.tracked = plan_.previously_tracked;
  for (auto& ref : done_tracked_) result_.tracked.push_back(std::move(ref));
  done_tracked_.clear();
  undeleted_.clear();   // still in the previous list
  index_ = plan_.steps.size();
  Finish();
}

void SetRun::Fail(const Status& status) {
  if (result_.success) {
    result_.success = false;
    result_.transient = IsTransient(status.code());
    result_.failure = status.message();
  } else {
    result_.transient = result_.transient && IsTransient(status.code());
  }
  result_.retry_after = std::max(result_.retry_after, status.retry_after());
}

void SetRun::Finish() {
  if (!done_) return;
  if (plan_.sync_mode) {
    if (result_.tracked.empty()) result_.tracked = std::move(done_tracked_);
    for (auto& ref : undeleted_) result_.tracked.push_back(std::move(ref));
    // One entry per object identity.
    std::set<std::string> seen;
    std::vector<hive::SyncResourceReference> unique;
    for (auto& ref : result_.tracked) {
      if (seen.insert(ObjectIdentity(ref)).second) unique.push_back(std::move(ref));
    }
    result_.tracked = std::move(unique);
  }
  Done done = std::move(done_);
  done_ = nullptr;
  done(std::move(result_));
}

}  // namespace syncbus::consumer
