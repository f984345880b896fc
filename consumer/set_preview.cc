#include "consumer/set_preview.h"

#include <optional>
#include <utility>

#include "consumer/client_side_apply.h"
#include "consumer/object_diff.h"

namespace syncbus::consumer {
namespace {

using Op = ApplyStep::Op;

// What the preview has found so far that the server cannot know: what earlier steps of the set
// would create (a dry run stores nothing).
struct Created {
  std::set<std::string> namespaces;
  std::set<std::pair<std::string, std::string>> kinds;  // group, kind of a created CRD

  void Note(const ApplyStep& step) {
    if (step.api_version == "v1" && step.kind == "Namespace") namespaces.insert(step.name);
    if (step.kind == "CustomResourceDefinition" &&
        step.api_version.rfind("apiextensions.k8s.io/", 0) == 0 && step.object.is_object()) {
      const Json spec = step.object.value("spec", Json::object());
      kinds.emplace(spec.value("group", ""), spec.value("names", Json::object()).value("kind", ""));
    }
  }
  bool DefinesKind(const ApplyStep& step) const {
    const size_t slash = step.api_version.find('/');
    const std::string group = slash == std::string::npos ? "" : step.api_version.substr(0, slash);
    return kinds.count({group, step.kind}) > 0;
  }
  // The namespace a dry run found missing ("namespaces \"x\" not found") that an earlier step
  // creates.
  bool CreatesMissingNamespace(const Status& failure) const {
    if (failure.code() != Code::kNotFound) return false;
    for (const std::string& ns : namespaces) {
      if (failure.message() == "namespaces \"" + ns + "\" not found") return true;
    }
    return false;
  }
};

ObjectPreview PreviewOf(const ApplyStep& step) {
  ObjectPreview out;
  out.api_version = step.api_version;
  out.kind = step.kind;
  out.ns = step.ns;
  out.name = step.name;
  return out;
}

// The outcome of a dry-run write that succeeded, against the object as it is (null: absent).
void Classify(const Json& current, const Json& answer, ObjectPreview& out) {
  if (current.is_null()) {
    out.outcome = ObjectOutcome::kCreated;
    return;
  }
  out.diff = ObjectDiff(current, answer);
  out.outcome = out.diff.empty() ? ObjectOutcome::kUnchanged : ObjectOutcome::kChanged;
}

class Previewer {
 public:
  Previewer(kube::Client& target, RestMapper& mapper, const PreviewOptions& options)
      : target_(target), mapper_(mapper), options_(options) {}

  ObjectPreview Apply(ApplyStep step);
  std::optional<ObjectPreview> Delete(ApplyStep step);
  bool stopped() const { return stopped_; }

 private:
  // The step refused with `status`, as SetRun records it (and stops the applies unless soft).
  ObjectPreview Refuse(const ApplyStep& step, ObjectPreview out, const Status& status);
  ObjectPreview Write(const ApplyStep& step, const kube::ObjectRef& ref, ObjectPreview out);

  kube::Client& target_;
  RestMapper& mapper_;
  const PreviewOptions& options_;
  Created created_;
  bool stopped_ = false;
};

ObjectPreview Previewer::Refuse(const ApplyStep& step, ObjectPreview out, const Status& status) {
  out.outcome = ObjectOutcome::kRefused;
  if (step.op == Op::kFail) {
    out.message = step.failure;
  } else if (step.op == Op::kApply && status.code() == Code::kNotFound &&
             status.message().rfind("namespaces \"", 0) == 0) {
    out.message = step.prefix + "error when creating \"object\": " + status.message();
  } else {
    out.message = step.prefix + status.message();
  }
  if (!(step.op == Op::kFail && step.soft)) stopped_ = true;
  return out;
}

ObjectPreview Previewer::Apply(ApplyStep step) {
  ObjectPreview out = PreviewOf(step);
  if (stopped_) {
    out.outcome = ObjectOutcome::kNotReached;
    return out;
  }
  if (step.op == Op::kFail) return Refuse(step, std::move(out), Status::Ok());
  if (!step.resource) {
    auto mapped = step.MapKind(mapper_);
    if (!mapped.ok() && mapped.status().code() == Code::kNotFound && created_.DefinesKind(step)) {
      out.outcome = ObjectOutcome::kCreated;
      out.message =
          "not checked by the cluster: its kind is defined by a "
          "CustomResourceDefinition this set creates earlier";
      return out;
    }
    if (!mapped.ok()) {
      Status why = mapped.status();
      if (why.code() == Code::kNotFound) {
        why = NotFound(step.op == Op::kPatch
                           ? "the server doesn't have a resource type \"" + step.kind + "\""
                           : step.UnknownKindMessage());
      }
      return Refuse(step, std::move(out), why);
    }
    step.resource = *mapped;
    step.Place();
    out.kind = step.kind;  // a patch's kind as kubectl resolved it
  }
  if (std::string placement = step.PlacementError(); !placement.empty()) {
    return Refuse(step, std::move(out), InvalidArgument(placement));
  }
  const kube::ObjectRef ref =
      kube::Object(*step.resource, step.resource->namespaced ? step.ns : "", step.name);
  out = Write(step, ref, std::move(out));
  if (out.outcome == ObjectOutcome::kCreated) created_.Note(step);
  return out;
}

ObjectPreview Previewer::Write(const ApplyStep& step, const kube::ObjectRef& ref,
                               ObjectPreview out) {
  const kube::WriteOptions dry{/*dry_run=*/true};
  // The object as it is now (null: absent). A CreateOnly object without a name (generateName)
  // is always new.
  Json current;
  if (!(step.op == Op::kCreateOnly && step.name.empty())) {
    Result<Json> got = target_.Get(ref);
    if (got.ok()) {
      current = std::move(*got);
    } else if (got.status().code() != Code::kNotFound) {
      return Refuse(step, std::move(out), got.status());
    }
  }
  Result<Json> answer = Status::Ok();
  switch (step.op) {
    case Op::kApply: {
      kube::ApplyOptions apply{options_.field_manager, /*force=*/true, /*dry_run=*/true};
      answer = target_.Apply(ref, step.object, apply);
      // The sync then hands a client-side applier's fields over and applies again, dropping
      // what the set no longer holds: that second write cannot be chained to a dry run.
      if (answer.ok() && !current.is_null() &&
          TakeOverPatch(*answer, options_.field_manager, options_.take_over_managers)) {
        out.message = kTakeOverNote;
      }
      break;
    }
    case Op::kCreateOnly:
      if (!current.is_null()) return out;  // present: left as it is (kUnchanged)
      answer = target_.Create(kube::Collection(ref.resource, ref.ns), step.object, dry);
      if (!answer.ok() && answer.status().code() == Code::kAlreadyExists) return out;
      break;
    case Op::kCreateOrUpdate: {
      if (current.is_null()) {
        answer = target_.Create(kube::Collection(ref.resource, ref.ns), step.object, dry);
        break;
      }
      std::string patch = UpdatePatch(step.object, current);
      if (patch == "{}") return out;  // unchanged
      auto type = BuiltinGroup(ref.resource.group) ? kube::PatchType::kStrategicMerge
                                                   : kube::PatchType::kMerge;
      answer = target_.Patch(ref, type, patch, dry);
      break;
    }
    case Op::kPatch: answer = target_.Patch(ref, step.patch_type, step.patch, dry); break;
    case Op::kDelete:
    case Op::kFail: break;  // not applies
  }
  if (!answer.ok()) {
    if (created_.CreatesMissingNamespace(answer.status())) {
      out.outcome = ObjectOutcome::kCreated;
      out.message = "not checked by the cluster: its namespace is one this set creates earlier";
      return out;
    }
    return Refuse(step, std::move(out), answer.status());
  }
  Classify(current, *answer, out);
  return out;
}

std::optional<ObjectPreview> Previewer::Delete(ApplyStep step) {
  ObjectPreview out = PreviewOf(step);
  auto refuse = [&](const std::string& why) {
    out.outcome = ObjectOutcome::kRefused;
    out.message = step.DeleteMessage(why);
    return out;
  };
  if (step.op == Op::kFail) return refuse(step.failure);
  if (!step.resource) {
    auto mapped = step.MapKind(mapper_);
    if (!mapped.ok() && mapped.status().code() == Code::kNotFound) return std::nullopt;  // gone
    if (!mapped.ok()) return refuse("could not delete resource: " + mapped.status().message());
    step.resource = *mapped;
  }
  const kube::ObjectRef ref =
      kube::Object(*step.resource, step.resource->namespaced ? step.ns : "", step.name);
  Result<Json> got = target_.Get(ref);
  if (!got.ok() && got.status().code() == Code::kNotFound) return std::nullopt;  // absent
  if (!got.ok()) return refuse("could not delete resource: " + got.status().message());
  kube::DeleteOptions dry;
  dry.dry_run = true;
  Status deleted = target_.Delete(ref, dry);
  if (!deleted.ok() && deleted.code() != Code::kNotFound) {
    return refuse("could not delete resource: " + deleted.message());
  }
  out.outcome = ObjectOutcome::kDeleted;
  return out;
}

}  // namespace

std::vector<ObjectPreview> PreviewSetPlan(const SetPlan& plan, kube::Client& target,
                                          RestMapper& mapper, const PreviewOptions& options) {
  Previewer previewer(target, mapper, options);
  std::vector<ObjectPreview> out;
  out.reserve(plan.steps.size() + plan.deletions.size());
  for (const ApplyStep& step : plan.steps) out.push_back(previewer.Apply(step));
  for (const ApplyStep& step : plan.deletions) {
    if (auto deleted = previewer.Delete(step)) out.push_back(std::move(*deleted));
  }
  return out;
}

}  // namespace syncbus::consumer
