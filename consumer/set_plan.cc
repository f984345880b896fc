#include "consumer/set_plan.h"

#include <algorithm>

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

// The failure of a step that cannot run, with its whole message.
ApplyStep Failed(std::string message, bool retryable) {
  ApplyStep step;
  step.op = Op::kFail;
  step.failure = std::move(message);
  step.retryable = retryable;
  return step;
}

void MapStep(ApplyStep& step, RestMapper* mapper) {
  if (mapper == nullptr) return;
  auto mapped = step.MapKind(*mapper);
  if (mapped.ok()) {
    step.resource = *mapped;
    step.Place();
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
    out.listed.insert(step.Identity());
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
    out.listed.insert(ObjectIdentity(step.Ref()));
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
    if (keep.count(step.Identity()) > 0) continue;
    if (step.resource && step.resource->namespaced && step.ns.empty())
      continue;  // nothing was made there
    steps.push_back(std::move(step));
  }
  return steps;
}

// Go's schema.GroupVersionResource / GroupVersionKind String(), as kubectl prints them.
std::string GvrString(const kube::Resource& r) {
  return r.group + "/" + r.version + ", Resource=" + r.resource;
}
std::string GvkString(const kube::Resource& r) {
  return r.group + "/" + r.version + ", Kind=" + r.kind;
}

}  // namespace

hive::SyncResourceReference ApplyStep::Ref() const {
  return {api_version, kind, name, ns};
}

std::string ApplyStep::Identity() const {
  return ObjectIdentity(Ref(), resource && !resource->namespaced);
}

void ApplyStep::Place() {
  if (!resource || resource->namespaced || !object.is_object()) return;
  object["metadata"].erase("namespace");
}

Result<kube::Resource> ApplyStep::MapKind(RestMapper& mapper) {
  if (op != Op::kPatch) return mapper.Map(api_version, kind);
  auto mapped = mapper.MapLeniently(api_version, kind);
  if (mapped.ok()) kind = mapped->kind;
  return mapped;
}

std::string ApplyStep::UnknownKindMessage() const {
  return "could not get info from passed resource: resource mapping not found for name: \"" + name +
         "\" namespace: \"" + ns + "\" from \"object\": no matches for kind \"" + kind +
         "\" in version \"" + api_version + "\"\nensure CRDs are installed first";
}

std::string ApplyStep::DeleteMessage(const std::string& why) const {
  return "failed to delete " + api_version + ", Kind=" + kind + " " + ns + "/" + name + ": " + why;
}

std::string ApplyStep::PlacementError() const {
  if (!resource || op == Op::kPatch || op == Op::kDelete) return {};
  const char* why = nullptr;
  if (resource->namespaced && ns.empty()) {
    why = "an empty namespace may not be set when a resource name is provided";
  } else if (name.empty() && op != Op::kCreateOnly) {
    why = "resource name may not be empty";
  }
  if (why == nullptr) return {};
  return "error when retrieving current configuration of:\nResource: \"" + GvrString(*resource) +
         "\", GroupVersionKind: \"" + GvkString(*resource) + "\"\nName: \"" + name +
         "\", Namespace: \"" + ns + "\"\nfrom server for: \"object\": " + why;
}

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
      footprint.objects.insert(step.Identity());
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

}  // namespace syncbus::consumer
