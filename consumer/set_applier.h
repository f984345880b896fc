// Set applier: one SyncSet's (or SelectorSyncSet's) work on one target cluster with upstream
// Hive's semantics. PlanSet decodes the whole set first (a resource that does not decode fails
// the set before anything is applied) and turns it into ordered steps: resources, then
// secretMappings, then patches; in Sync mode, then the deletion of objects dropped from the set.
// SetRun carries the steps out with non-blocking requests through the RequestLimiter, one after
// the other: the first failing step stops the set's applies (its message is Hive's: "failed to
// apply resource 2: ..."), and the deletions all run whatever happened, as in Hive. A resource
// applied with applyBehavior Apply is applied server-side and keeps Hive's
// kubectl.kubernetes.io/last-applied-configuration annotation up to date; an object last applied
// client-side (by Hive) has that manager's fields handed to syncbus first, so a field dropped
// from the set disappears (see take_over_managers). Planning runs on the caller's thread (it may
// block on discovery); SetRun's callbacks run on the transport's thread. SetRun is shared-owned
// while requests are in flight; thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/hive/types.h"
#include "common/json.h"
#include "common/kube/client_impl.h"
#include "common/status.h"
#include "consumer/client_side_apply.h"
#include "consumer/request_limiter.h"
#include "consumer/rest_mapper.h"

namespace syncbus::consumer {

// Checked before every write: non-OK means this process no longer owns the cluster.
// Must not block: it runs on the transport's thread.
using SyncFence = std::function<Status()>;

// What resourcesToDelete identifies an object by: group, kind, namespace, name (not version, as
// Hive compares them). A cluster-scoped kind's namespace, whatever was written, is no part of it.
std::string ObjectIdentity(const hive::SyncResourceReference& ref, bool cluster_scoped = false);

// Hive's mergeResources: `a`, then those of `b` that `a` does not hold (by identity).
std::vector<hive::SyncResourceReference> MergeResources(
    std::vector<hive::SyncResourceReference> a, const std::vector<hive::SyncResourceReference>& b);

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

// One target cluster as the runs see it.
struct TargetSession {
  // Held by every run of this session and released with it: whoever starts runs can tell when
  // the last one is gone (its last reference may sit in a transport callback after it is done).
  // First, so that it is released after everything else a copy holds (the client among them).
  std::shared_ptr<void> lifetime;
  std::string cluster;  // limiter key
  std::shared_ptr<kube::ClientImpl> client;
  std::shared_ptr<RestMapper> mapper;
  RequestLimiter* limiter = nullptr;
  Clock* clock = nullptr;
  SteadyTime deadline = SteadyTime::max();
  SyncFence fence;
  std::string field_manager = "syncbus";
  // Update-operation field managers whose fields an Apply takes over (client-side apply by
  // Hive: its kubectl field managers). A manager that owns the last-applied annotation is one
  // whatever its name.
  std::set<std::string> take_over_managers;
  // hive.openshift.io/fake-cluster: nothing is sent, every step succeeds.
  bool fake = false;
  // Observes each finished object apply (resources and secretMappings): its step's op
  // (kApply, kCreateOnly or kCreateOrUpdate: the applyBehavior), success, seconds taken.
  std::function<void(ApplyStep::Op, bool, double)> observe_apply;
  // Observes each finished request: success, seconds taken.
  std::function<void(bool, double)> observe;
};

struct SetRunResult {
  bool success = true;
  bool transient = true;                     // every failure may heal by itself
  std::chrono::milliseconds retry_after{0};  // the longest Retry-After the target sent (429/503)
  int applies = 0;                           // successful writes (apply, create, patch)
  std::string failure;        // Hive's failureMessage: the apply failure, then the deletions'
  double serial_seconds = 0;  // sum of this set's request latencies (its serial latency)
  // Whether the cluster answered: a request of this run got an HTTP response (or a step
  // succeeded); every failure was a request sent that got no response (refused, timed out).
  bool answered = false;
  bool unanswered_only = true;
  // Sync mode: what resourcesToDelete must hold now, unsorted: Hive's merge of the objects
  // applied this round and those still tracked (listed by the set, or not deleted).
  std::vector<hive::SyncResourceReference> tracked;
};

class SetRun : public std::enable_shared_from_this<SetRun> {
 public:
  using Done = std::function<void(SetRunResult)>;
  static std::shared_ptr<SetRun> Create(const TargetSession& session, SetPlan plan, Done done);
  // Starts the first step; `done` runs exactly once, possibly before Start returns.
  void Start();

 private:
  SetRun(const TargetSession& session, SetPlan plan, Done done)
      : session_(session), plan_(std::move(plan)), done_(std::move(done)) {}
  ApplyStep& Current();
  void RunStep();
  void Send(ApplyStep& step);
  void Resolve(ApplyStep& step);
  void StepDone(const Status& status, bool wrote);
  void Fail(const Status& status);
  void Finish();

  TargetSession session_;
  SetPlan plan_;
  Done done_;
  size_t index_ = 0;        // into steps, then (past its end) into deletions
  bool stopped_ = false;    // an apply failed: the rest of the applies are skipped
  bool fenced_ = false;     // the fence said no: nothing more is sent
  SteadyTime step_sent_{};  // when the current step's request left the limiter
  SetRunResult result_;
  std::string apply_failure_;
  std::vector<std::string> soft_failures_;
  std::vector<std::string> delete_failures_;
  std::vector<hive::SyncResourceReference> applied_;
  std::set<std::string> undeleted_;  // identities whose deletion failed
};

}  // namespace syncbus::consumer
