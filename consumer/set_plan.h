// Set plan: one SyncSet's (or SelectorSyncSet's) work on one target cluster as steps, with
// upstream Hive's semantics. PlanSet decodes the whole set first (a resource that does not decode
// fails the set before anything is applied) and turns it into ordered steps: resources, then
// secretMappings, then patches; in Sync mode, then the deletion of objects dropped from the set.
// PlanRemoval deletes what a set that no longer applies tracked. FootprintOf and MustFollow say
// which sets of one cluster may run side by side. Pure functions over value types, except that
// mapping a kind may block on the cluster's discovery (RestMapper; null for a fake cluster:
// nothing is mapped). consumer/sync_plan.h plans a whole cluster with them; set_applier.h runs
// the steps.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/hive/types.h"
#include "common/json.h"
#include "common/kube/client.h"
#include "common/kube/resource.h"
#include "common/status.h"
#include "consumer/rest_mapper.h"

namespace syncbus::consumer {

// What resourcesToDelete identifies an object by: group, kind, namespace, name (not version, as
// Hive compares them). A cluster-scoped kind's namespace, whatever was written, is no part of it.
std::string ObjectIdentity(const hive::SyncResourceReference& ref, bool cluster_scoped = false);

// Go's utilerrors.NewAggregate(errs).Error(): one message as it is; several, deduplicated, as
// "[a, b]".
std::string AggregateMessage(const std::vector<std::string>& messages);

struct ApplyStep {
  enum class Op { kApply, kCreateOnly, kCreateOrUpdate, kPatch, kDelete, kFail };
  Op op = Op::kApply;
  // Hive's prefix for a failure of this step: "failed to apply resource 2: ", "failed to apply
  // secret 0: ", "failed to apply patch 1: ", or "" (deletions, whose messages are whole).
  std::string prefix;
  std::string api_version, kind, ns, name;  // ns as written in the set
  std::optional<kube::Resource> resource;   // unset: map when the step runs (kind unknown so far)
  Json object;                              // kApply / kCreate*: the body
  std::string last_applied;                 // kApply: the annotation's value (kubectl's bytes)
  kube::PatchType patch_type = kube::PatchType::kStrategicMerge;
  std::string patch;      // kPatch: the body (JSON)
  std::string failure;    // kFail: the whole failure message
  bool retryable = true;  // kFail: a retry may succeed without an edit
  Status cause;           // kFail from the cluster (discovery): its code, Retry-After
  bool soft = false;      // kFail of a patch template: noted, the set goes on
  bool track = false;     // record in resourcesToDelete when applied (Sync mode)

  hive::SyncResourceReference Ref() const;
  std::string Identity() const;  // ObjectIdentity, knowing the kind's scope once mapped
  // The body as sent: a cluster-scoped kind carries no namespace (kubectl drops it from the URL).
  void Place();
  // Maps the kind; an unknown kind is left for the run (an earlier step may install it). A patch
  // names its kind as kubectl reads a resource argument (Hive's patches go through kubectl patch):
  // any case, or the plural, singular or short name; it is known by its Kind from then on.
  Result<kube::Resource> MapKind(RestMapper& mapper);
  // kubectl's message for a kind the cluster does not serve (its resource builder's).
  std::string UnknownKindMessage() const;
  // What kubectl checks before sending anything once the kind is known: a namespaced object
  // needs a namespace (Hive's kubectl is given none to default to), and an object to read first
  // needs a name. Empty when fine.
  std::string PlacementError() const;
  // Hive's message for a deletion that failed for `why`.
  std::string DeleteMessage(const std::string& why) const;
};

struct SetPlan {
  std::vector<ApplyStep> steps;      // applies, in order; the first failure stops them
  std::vector<ApplyStep> deletions;  // Sync mode: each runs whatever happened before
  bool sync_mode = false;
  // Sync mode: the objects the set tracked before (its status entry, in order), and the
  // identities of the objects it lists now (those stay tracked, and are never deleted).
  std::vector<hive::SyncResourceReference> previously_tracked;
  std::set<std::string> listed;
};

// Source Secrets of secretMappings, read from the hub: "ns/name" -> object or error.
using SecretSources = std::map<std::string, Result<Json>>;

struct PlanInput {
  const hive::SyncSetCommonSpec* spec = nullptr;
  std::string set_namespace;                // SyncSet: its namespace; SelectorSyncSet: empty
  const hive::Labels* cd_labels = nullptr;  // for templates
  const SecretSources* secrets = nullptr;
  // Sync mode: what the set tracked before (its status entry) and the identities every
  // applicable set now lists (objects that moved to another set are not deleted).
  std::vector<hive::SyncResourceReference> previously_tracked;
  const std::set<std::string>* listed_elsewhere = nullptr;
};

// The source Secret a secretMapping may read ("ns/name"), or "" when Hive refuses the mapping
// before reading (a SelectorSyncSet's mapping without a source namespace; a SyncSet's mapping
// whose source is in another namespace).
std::string SecretSourceKey(const hive::SecretMapping& mapping, const std::string& set_namespace);

// The identities of the objects a set lists (resources and secretMappings targets), as PlanSet
// would track them. Blocking (discovery through `mapper`; null: scope unknown).
std::set<std::string> ListedObjects(const PlanInput& input, RestMapper* mapper);

// The apiVersions planning the set will map (resources, secretMappings' Secrets, patches, and
// the objects it tracked), for RestMapper::Prefetch. Templated apiVersions are left out.
std::set<std::string> ApiVersionsOf(const PlanInput& input);

// Blocking (discovery through `mapper`; null for a fake cluster: nothing is mapped).
SetPlan PlanSet(const PlanInput& input, RestMapper* mapper);
// Deletion of every object a removed set tracked, except those listed elsewhere.
SetPlan PlanRemoval(const std::vector<hive::SyncResourceReference>& tracked,
                    const std::set<std::string>& listed_elsewhere, RestMapper* mapper);

// What a plan writes, for running sets of one cluster side by side where nobody can tell: the
// objects it creates, patches or deletes, and whether it must keep its place in Hive's order
// whatever the others touch — it writes something other writes depend on (a cluster-scoped
// object: a Namespace, a CRD, a webhook; a namespaced kind admission consults: ResourceQuota,
// LimitRange, ServiceAccount; a custom resource, which may be a policy), or a kind not known yet.
struct SetFootprint {
  bool ordered = false;
  std::set<std::string> objects;  // ObjectIdentity
};
SetFootprint FootprintOf(const SetPlan& plan);
// Whether `later` (after `earlier` in Hive's order) must wait until `earlier` is done.
bool MustFollow(const SetFootprint& earlier, const SetFootprint& later);

}  // namespace syncbus::consumer
