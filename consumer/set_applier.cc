#include "consumer/set_applier.h"

#include <algorithm>
#include <thread>

#include "common/go_json.h"
#include "common/yaml_json.h"
#include "consumer/client_side_apply.h"
#include "consumer/templates.h"

namespace syncbus::consumer {
namespace {

using Op = ApplyStep::Op;

std::string GroupOf(const std::string& api_version) {
  size_t slash = api_version.find('/');
  return slash == std::string::npos ? "" : api_version.substr(0, slash);
}

Op OpFor(hive::ApplyBehavior behavior) {
  switch (behavior) {
    case hive::ApplyBehavior::kCreateOnly: return Op::kCreateOnly;
    case hive::ApplyBehavior::kCreateOrUpdate: return Op::kCreateOrUpdate;
    case hive::ApplyBehavior::kApply: break;
  }
  return Op::kApply;
}

// Go's schema.GroupVersionResource / GroupVersionKind String(), as kubectl prints them.
std::string GvrString(const kube::Resource& r) {
  return r.group + "/" + r.version + ", Resource=" + r.resource;
}
std::string GvkString(const kube::Resource& r) {
  return r.group + "/" + r.version + ", Kind=" + r.kind;
}

hive::SyncResourceReference RefOf(const ApplyStep& step) {
  return {step.api_version, step.kind, step.name, step.ns};
}

std::string IdentityOf(const ApplyStep& step) {
  return ObjectIdentity(RefOf(step), step.resource && !step.resource->namespaced);
}

// The failure of a step that cannot run, with its whole message.
ApplyStep Failed(std::string message, bool retryable) {
  ApplyStep step;
  step.op = Op::kFail;
  step.failure = std::move(message);
  step.retryable = retryable;
  return step;
}

// kubectl's message for a kind the cluster does not serve (its resource builder's).
std::string UnknownKindMessage(const ApplyStep& step) {
  return "could not get info from passed resource: resource mapping not found for name: \"" +
         step.name + "\" namespace: \"" + step.ns + "\" from \"object\": no matches for kind \"" +
         step.kind + "\" in version \"" + step.api_version + "\"\nensure CRDs are installed first";
}

// Checks what kubectl checks before sending anything once the kind is known: a namespaced
// object needs a namespace (Hive's kubectl is given none to default to), and an object to read
// first needs a name. Empty when fine.
std::string PlacementError(const ApplyStep& step) {
  if (!step.resource || step.op == Op::kPatch || step.op == Op::kDelete) return {};
  const char* why = nullptr;
  if (step.resource->namespaced && step.ns.empty()) {
    why = "an empty namespace may not be set when a resource name is provided";
  } else if (step.name.empty() && step.op != Op::kCreateOnly) {
    why = "resource name may not be empty";
  }
  if (why == nullptr) return {};
  return "error when retrieving current configuration of:\nResource: \"" +
         GvrString(*step.resource) + "\", GroupVersionKind: \"" + GvkString(*step.resource) +
         "\"\nName: \"" + step.name + "\", Namespace: \"" + step.ns +
         "\"\nfrom server for: \"object\": " + why;
}

// The body as sent: a cluster-scoped kind carries no namespace (kubectl drops it from the URL).
void Place(ApplyStep& step) {
  if (!step.resource || step.resource->namespaced || !step.object.is_object()) return;
  step.object["metadata"].erase("namespace");
}

// Maps the step's kind; an unknown kind is left for the run (an earlier step may install it).
// A patch names its kind as kubectl reads a resource argument (Hive's patches go through kubectl
// patch): any case, or the plural, singular or short name; it is known by its Kind from then on.
Result<kube::Resource> MapKind(RestMapper& mapper, ApplyStep& step) {
  if (step.op != Op::kPatch) return mapper.Map(step.api_version, step.kind);
  auto mapped = mapper.MapLeniently(step.api_version, step.kind);
  if (mapped.ok()) step.kind = mapped->kind;
  return mapped;
}

void MapStep(ApplyStep& step, RestMapper* mapper) {
  if (mapper == nullptr) return;
  auto mapped = MapKind(*mapper, step);
  if (mapped.ok()) {
    step.resource = *mapped;
    Place(step);
  } else if (mapped.status().code() != Code::kNotFound) {
    step.op = Op::kFail;
    step.failure = step.prefix + mapped.status().message();
    step.cause = mapped.status();
  }
}

kube::PatchType KubePatchType(hive::PatchType t) {
  switch (t) {
    case hive::PatchType::kJson: return kube::PatchType::kJson;
    case hive::PatchType::kMerge: return kube::PatchType::kMerge;
    default: break;
  }
  return kube::PatchType::kStrategicMerge;
}

struct Decoded {
  std::vector<Json> objects;                      // one per resource that decoded
  std::vector<hive::SyncResourceReference> refs;  // the same, as tracked
  std::vector<std::string> errors;                // Hive's decode / parameterize messages
};

// Hive's decodeResources: every resource is decoded (and its templates expanded) before anything
// is applied; any error fails the set.
Decoded DecodeResources(const PlanInput& input) {
  const hive::SyncSetCommonSpec& spec = *input.spec;
  Decoded out;
  for (size_t i = 0; i < spec.resources.size(); ++i) {
    const std::string index = std::to_string(i);
    Json obj = spec.resources[i].Parse();
    if (!obj.is_object() || !obj.contains("kind") || !obj["kind"].is_string() ||
        obj["kind"].get_ref<const std::string&>().empty()) {
      out.errors.push_back(
          "failed to decode resource " + index +
          ": error unmarshaling JSON: while decoding JSON: Object 'Kind' is missing in '" +
          GoJsonEncode(obj) + "'");
      continue;
    }
    if (spec.enable_resource_templates && input.cd_labels != nullptr) {
      if (Status s = ExpandTemplates(obj, *input.cd_labels); !s.ok()) {
        out.errors.push_back("failed to parameterize resource " + index + ": " + s.message());
        continue;
      }
    }
    if (!obj.contains("metadata") || !obj["metadata"].is_object()) obj["metadata"] = Json::object();
    const Json& meta = obj["metadata"];
    auto text = [](const Json& o, const char* key) {
      auto it = o.find(key);
      return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    out.refs.push_back(
        {text(obj, "apiVersion"), text(obj, "kind"), text(meta, "name"), text(meta, "namespace")});
    out.objects.push_back(std::move(obj));
  }
  return out;
}

// Resources and secretMappings, in order, decoded (PlanSet) or only as identities.
struct Objects {
  std::vector<ApplyStep> steps;
  std::vector<std::string> decode_errors;
  // The identities of everything the set lists, whether its step can run or not (Hive's
  // resourcesInSyncSet: a mapping whose source is missing still holds its target).
  std::set<std::string> listed;
};

Objects PlanObjects(const PlanInput& input, RestMapper* mapper, bool with_bodies) {
  const hive::SyncSetCommonSpec& spec = *input.spec;
  const bool sync = spec.resource_apply_mode == hive::ResourceApplyMode::kSync;
  Objects out;
  Decoded decoded = DecodeResources(input);
  out.decode_errors = std::move(decoded.errors);
  for (size_t i = 0; i < decoded.objects.size(); ++i) {
    Json& obj = decoded.objects[i];
    const hive::SyncResourceReference& ref = decoded.refs[i];
    ApplyStep step;
    step.op = OpFor(spec.apply_behavior);
    step.prefix = "failed to apply resource " + std::to_string(i) + ": ";
    step.api_version = ref.api_version;
    step.kind = ref.kind;
    step.name = ref.name;
    step.ns = ref.ns;
    step.track = sync;
    if (with_bodies) {
      obj["metadata"]["labels"][hive::kManagedLabel] = "true";
      step.object = std::move(obj);
      if (step.op == Op::kApply) step.last_applied = SetLastApplied(step.object, /*typed=*/false);
    }
    MapStep(step, mapper);
    out.listed.insert(IdentityOf(step));
    out.steps.push_back(std::move(step));
  }
  for (size_t i = 0; i < spec.secret_mappings.size(); ++i) {
    const hive::SecretMapping& m = spec.secret_mappings[i];
    const std::string index = std::to_string(i);
    ApplyStep step;
    step.op = OpFor(spec.apply_behavior);
    step.prefix = "failed to apply secret " + index + ": ";
    step.api_version = "v1";
    step.kind = "Secret";
    step.name = m.target.name;
    step.ns = m.target.ns;
    step.track = sync;
    out.listed.insert(ObjectIdentity(RefOf(step)));
    if (with_bodies) {
      std::string source_key = SecretSourceKey(m, input.set_namespace);
      if (source_key.empty()) {
        bool missing = m.source.ns.empty();
        ApplyStep failed = Failed(missing ? "source namespace missing for secret " + index
                                          : "source in wrong namespace for secret " + index,
                                  /*retryable=*/false);
        failed.track = false;
        out.steps.push_back(std::move(failed));
        continue;
      }
      const Result<Json>* source = nullptr;
      if (input.secrets != nullptr) {
        auto it = input.secrets->find(source_key);
        if (it != input.secrets->end()) source = &it->second;
      }
      if (source == nullptr || !source->ok()) {
        // Hive reads through its informer cache, whose NotFound names the kind.
        std::string why = source == nullptr || source->status().code() == Code::kNotFound
                              ? "Secret \"" + m.source.name + "\" not found"
                              : source->status().message();
        out.steps.push_back(
            Failed("failed to read secret " + index + ": " + why, /*retryable=*/true));
        continue;
      }
      // Hive copies the whole Secret (type, data, immutable) under new metadata: the target's
      // name and namespace, the source's labels and annotations.
      const Json& src = **source;
      const Json& src_meta = src.contains("metadata") ? src["metadata"] : Json::object();
      Json meta = {{"name", step.name}};
      if (!step.ns.empty()) meta["namespace"] = step.ns;
      Json labels = src_meta.contains("labels") && src_meta["labels"].is_object()
                        ? src_meta["labels"]
                        : Json::object();
      labels[hive::kManagedLabel] = "true";
      meta["labels"] = std::move(labels);
      if (src_meta.contains("annotations") && src_meta["annotations"].is_object()) {
        meta["annotations"] = src_meta["annotations"];
        meta["annotations"].erase(kLastAppliedAnnotation);
      }
      step.object = {{"apiVersion", "v1"}, {"kind", "Secret"}, {"metadata", std::move(meta)}};
      for (const char* field : {"type", "data", "immutable"}) {
        if (src.contains(field) && !src[field].is_null()) step.object[field] = src[field];
      }
      if (step.op == Op::kApply) step.last_applied = SetLastApplied(step.object, /*typed=*/true);
    }
    MapStep(step, mapper);
    out.steps.push_back(std::move(step));
  }
  return out;
}

// The deletion steps of the previously tracked objects that no set lists now.
std::vector<ApplyStep> Deletions(const std::vector<hive::SyncResourceReference>& tracked,
                                 const std::set<std::string>& keep, RestMapper* mapper) {
  std::vector<ApplyStep> steps;
  for (const auto& ref : tracked) {
    ApplyStep step;
    step.op = Op::kDelete;
    step.api_version = ref.api_version;
    step.kind = ref.kind;
    step.ns = ref.ns;
    step.name = ref.name;
    if (mapper != nullptr) {
      auto mapped = mapper->Map(ref.api_version, ref.kind);
      if (mapped.ok()) {
        step.resource = *mapped;
      } else if (mapped.status().code() == Code::kNotFound) {
        continue;  // the kind is gone from the cluster, and with it the object
      } else {
        step.op = Op::kFail;
        step.failure = "could not get mapping: " + mapped.status().message();
        step.cause = mapped.status();
      }
    }
    if (keep.count(IdentityOf(step)) > 0) continue;
    if (step.resource && step.resource->namespaced && step.ns.empty())
      continue;  // nothing was made there
    steps.push_back(std::move(step));
  }
  return steps;
}

std::string DeleteMessage(const ApplyStep& step, const std::string& why) {
  return "failed to delete " + step.api_version + ", Kind=" + step.kind + " " + step.ns + "/" +
         step.name + ": " + why;
}

// A set failure that heals without an edit: a namespace or kind that an earlier set or another
// controller has not created yet (404), besides the transport's transient codes.
bool SelfHealing(const Status& status) {
  return IsTransient(status.code()) || status.code() == Code::kNotFound;
}

}  // namespace

std::string ObjectIdentity(const hive::SyncResourceReference& ref, bool cluster_scoped) {
  return GroupOf(ref.api_version) + "|" + ref.kind + "|" + (cluster_scoped ? "" : ref.ns) + "|" +
         ref.name;
}

SetFootprint FootprintOf(const SetPlan& plan) {
  static const std::set<std::string> kAdmissionInputs = {"ResourceQuota", "LimitRange",
                                                         "ServiceAccount"};
  SetFootprint footprint;
  for (const auto* steps : {&plan.steps, &plan.deletions}) {
    for (const ApplyStep& step : *steps) {
      if (step.op == Op::kFail) continue;  // the set stops there (or the deletion is not sent)
      if (!step.resource || !step.resource->namespaced || !BuiltinGroup(step.resource->group) ||
          kAdmissionInputs.count(step.resource->kind) > 0) {
        footprint.ordered = true;
      }
      footprint.objects.insert(IdentityOf(step));
    }
  }
  return footprint;
}

bool MustFollow(const SetFootprint& earlier, const SetFootprint& later) {
  if (earlier.ordered || later.ordered) return true;
  const auto& small =
      earlier.objects.size() < later.objects.size() ? earlier.objects : later.objects;
  const auto& large = &small == &earlier.objects ? later.objects : earlier.objects;
  return std::any_of(small.begin(), small.end(),
                     [&](const std::string& id) { return large.count(id) > 0; });
}

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

std::string AggregateMessage(const std::vector<std::string>& messages) {
  if (messages.size() == 1) return messages.front();
  std::vector<std::string> seen;
  for (const auto& m : messages) {
    if (std::find(seen.begin(), seen.end(), m) == seen.end()) seen.push_back(m);
  }
  std::string out;
  for (const auto& m : seen) out += (out.empty() ? "" : ", ") + m;
  return seen.size() == 1 ? out : "[" + out + "]";
}

std::string SecretSourceKey(const hive::SecretMapping& mapping, const std::string& set_namespace) {
  if (mapping.source.ns.empty()) {
    return set_namespace.empty() ? std::string() : set_namespace + "/" + mapping.source.name;
  }
  if (!set_namespace.empty() && mapping.source.ns != set_namespace) return {};
  return mapping.source.ns + "/" + mapping.source.name;
}

std::set<std::string> ListedObjects(const PlanInput& input, RestMapper* mapper) {
  return PlanObjects(input, mapper, /*with_bodies=*/false).listed;
}

std::set<std::string> ApiVersionsOf(const PlanInput& input) {
  const hive::SyncSetCommonSpec& spec = *input.spec;
  std::set<std::string> out;
  auto add = [&out](const std::string& api_version) {
    if (!api_version.empty() && api_version.find("{{") == std::string::npos)
      out.insert(api_version);
  };
  for (const hive::EmbeddedObject& r : spec.resources) add(r.api_version());
  if (!spec.secret_mappings.empty()) add("v1");
  for (const auto& p : spec.patches) add(p.api_version);
  for (const auto& ref : input.previously_tracked) add(ref.api_version);
  return out;
}

SetPlan PlanSet(const PlanInput& input, RestMapper* mapper) {
  const hive::SyncSetCommonSpec& spec = *input.spec;
  SetPlan plan;
  plan.sync_mode = spec.resource_apply_mode == hive::ResourceApplyMode::kSync;
  Objects objects = PlanObjects(input, mapper, /*with_bodies=*/true);
  if (plan.sync_mode) plan.previously_tracked = input.previously_tracked;
  if (!objects.decode_errors.empty()) {
    // Nothing is applied, and nothing deleted: the set as written cannot be read whole.
    plan.steps.push_back(Failed(AggregateMessage(objects.decode_errors), /*retryable=*/false));
    for (const auto& ref : input.previously_tracked) plan.listed.insert(ObjectIdentity(ref));
    return plan;
  }
  plan.steps = std::move(objects.steps);
  if (plan.sync_mode) plan.listed = std::move(objects.listed);
  for (size_t i = 0; i < spec.patches.size(); ++i) {
    const hive::SyncObjectPatch& p = spec.patches[i];
    const std::string index = std::to_string(i);
    ApplyStep step;
    step.op = Op::kPatch;
    step.prefix = "failed to apply patch " + index + ": ";
    step.api_version = p.api_version;
    step.kind = p.kind;
    step.name = p.name;
    step.ns = p.ns.empty() ? "default" : p.ns;  // kubectl's default context namespace
    std::string text = p.patch;
    if (spec.enable_patch_templates && input.cd_labels != nullptr) {
      auto expanded = ExpandTemplate(p.patch, *input.cd_labels);
      if (!expanded.ok()) {
        ApplyStep failed =
            Failed("failed to parameterize patch " + index + ": " + expanded.status().message(),
                   /*retryable=*/false);
        failed.soft = true;  // Hive goes on with the next patch
        plan.steps.push_back(std::move(failed));
        continue;
      }
      text = std::move(*expanded);
    }
    if (p.patch_type == hive::PatchType::kInvalid) {
      plan.steps.push_back(Failed(step.prefix + "invalid patch type: " + p.patch_type_text +
                                      ". Valid patch types are 'strategic', 'merge' or 'json'",
                                  /*retryable=*/false));
      continue;
    }
    if (text.empty()) {
      plan.steps.push_back(Failed(step.prefix + "must specify -p to patch", /*retryable=*/false));
      continue;
    }
    // kubectl patch reads the body as YAML (JSON is YAML).
    Result<Json> body = YamlToJson(text);
    if (!body.ok()) {
      plan.steps.push_back(
          Failed(step.prefix + "unable to parse \"" + text + "\": " + body.status().message(),
                 /*retryable=*/false));
      continue;
    }
    step.patch_type = KubePatchType(p.patch_type);
    step.patch = body->dump();
    MapStep(step, mapper);
    plan.steps.push_back(std::move(step));
  }
  if (plan.sync_mode) {
    std::set<std::string> keep =
        input.listed_elsewhere ? *input.listed_elsewhere : std::set<std::string>{};
    keep.insert(plan.listed.begin(), plan.listed.end());
    plan.deletions = Deletions(input.previously_tracked, keep, mapper);
  }
  return plan;
}

SetPlan PlanRemoval(const std::vector<hive::SyncResourceReference>& tracked,
                    const std::set<std::string>& listed_elsewhere, RestMapper* mapper) {
  SetPlan plan;
  plan.sync_mode = true;
  plan.previously_tracked = tracked;
  plan.deletions = Deletions(tracked, listed_elsewhere, mapper);
  return plan;
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
  if (std::string placement = PlacementError(step); !placement.empty()) {
    StepDone(InvalidArgument(placement), false);
    return;
  }
  Send(step);
}

// A kind unknown when planned: rediscover off the transport's thread, then go on.
void SetRun::Resolve(ApplyStep& step) {
  std::thread([self = shared_from_this(), &step] {
    auto mapped = MapKind(*self->session_.mapper, step);
    if (!mapped.ok()) {
      Status why = mapped.status();
      if (why.code() == Code::kNotFound && step.op != Op::kDelete) {
        // kubectl patch names the kind as its resource builder was given it.
        why = NotFound(step.op == Op::kPatch
                           ? "the server doesn't have a resource type \"" + step.kind + "\""
                           : UnknownKindMessage(step));
      }
      if (step.op == Op::kDelete && why.code() == Code::kNotFound)
        why = Status::Ok();  // kind gone: deleted
      self->StepDone(why, false);
      return;
    }
    step.resource = *mapped;
    Place(step);
    if (std::string placement = PlacementError(step); !placement.empty()) {
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
      undeleted_.insert(IdentityOf(step));
      std::string why = step.op == Op::kFail ? status.message()
                                             : "could not delete resource: " + status.message();
      delete_failures_.push_back(DeleteMessage(step, why));
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
  if (step.track) applied_.push_back(RefOf(step));
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
