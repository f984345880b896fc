// Set applier: one SyncSet's (or SelectorSyncSet's) work on one target cluster with upstream
// Hive's semantics. PlanSet turns the set into ordered steps (resources, then secretMappings,
// then patches, then Sync-mode deletion of objects dropped from the set); SetRun carries the
// steps out with non-blocking requests through the RequestLimiter, one step after the other,
// stopping at the first failure (deletions all run, their failures recorded). Planning runs on
// the caller's thread (it may block on discovery); SetRun's callbacks run on the transport's
// thread. SetRun is shared-owned while requests are in flight; thread-safe.
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
#include "consumer/request_limiter.h"
#include "consumer/rest_mapper.h"

namespace syncbus::consumer {

// Checked before every write: non-OK means this process no longer owns the cluster.
// Must not block: it runs on the transport's thread.
using SyncFence = std::function<Status()>;

// What resourcesToDelete identifies an object by: group, kind, namespace, name (not version).
std::string ObjectIdentity(const hive::SyncResourceReference& ref);

struct ApplyStep {
  enum class Op { kApply, kCreateOnly, kCreateOrUpdate, kPatch, kDelete, kFail };
  Op op = Op::kApply;
  std::string what;                        // "resources[2] ConfigMap default/a" (messages)
  std::string api_version, kind, ns, name;
  std::optional<kube::Resource> resource;  // unset: map when the step runs (kind unknown so far)
  Json object;                             // kApply / kCreate*: the body
  kube::PatchType patch_type = kube::PatchType::kStrategicMerge;
  std::string patch;                       // kPatch: the body
  Status failure;                          // kFail: why the step cannot run
  bool track = false;                      // record in resourcesToDelete when done
  bool deletion = false;                   // a Sync-mode deletion: a failure does not stop the rest
};

struct SetPlan {
  std::vector<ApplyStep> steps;
  // Sync mode: objects tracked before that stay tracked whatever happens this round (the
  // previous list, kept when the set fails before replacing it).
  std::vector<hive::SyncResourceReference> previously_tracked;
  bool sync_mode = false;
};

// Source Secrets of secretMappings, read from the hub: "ns/name" -> object or error.
using SecretSources = std::map<std::string, Result<Json>>;

struct PlanInput {
  const hive::SyncSetCommonSpec* spec = nullptr;
  std::string set_namespace;                  // SyncSet: its namespace; SelectorSyncSet: empty
  const hive::Labels* cd_labels = nullptr;    // for fromCDLabel
  const SecretSources* secrets = nullptr;
  // Sync mode: what the set tracked before (its status entry) and the identities every
  // applicable set now lists (objects that moved to another set are not deleted).
  std::vector<hive::SyncResourceReference> previously_tracked;
  const std::set<std::string>* listed_elsewhere = nullptr;
};

// The objects a set lists (resources and secretMappings targets) as PlanSet would place them,
// as tracking identities. Blocking (discovery through `mapper`).
std::set<std::string> ListedObjects(const PlanInput& input, RestMapper& mapper);

// The apiVersions planning the set will map (resources, secretMappings' Secrets, patches, and
// the objects it tracked), for RestMapper::Prefetch. Templated apiVersions are left out.
std::set<std::string> ApiVersionsOf(const PlanInput& input);

// Blocking (discovery through `mapper`).
SetPlan PlanSet(const PlanInput& input, RestMapper& mapper);
// Deletion of every object a removed set tracked, except those listed elsewhere.
SetPlan PlanRemoval(const std::vector<hive::SyncResourceReference>& tracked,
                    const std::set<std::string>& listed_elsewhere, RestMapper& mapper);

// One target cluster as the runs see it.
struct TargetSession {
  std::string cluster;                  // limiter key
  std::shared_ptr<kube::ClientImpl> client;
  std::shared_ptr<RestMapper> mapper;
  RequestLimiter* limiter = nullptr;
  Clock* clock = nullptr;
  SteadyTime deadline = SteadyTime::max();
  SyncFence fence;
  std::string field_manager = "syncbus";
  // Observes each finished request: success, seconds taken.
  std::function<void(bool, double)> observe;
};

struct SetRunResult {
  bool success = true;
  bool transient = true;      // every failure may heal by itself
  std::chrono::milliseconds retry_after{0};   // the longest Retry-After the target sent (429/503)
  int applies = 0;            // successful writes (apply, create, patch)
  std::string failure;        // the first failure
  double serial_seconds = 0;  // sum of this set's request latencies (its serial latency)
  // Sync mode: what resourcesToDelete must hold now.
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
  void RunStep();
  void Send(ApplyStep& step);
  void Resolve(ApplyStep& step);
  void StepDone(const Status& status, bool wrote);
  // Stops the set before it is fully applied: tracking keeps the previous list too.
  void Stop(const Status& status);
  void Fail(const Status& status);
  void Finish();

  TargetSession session_;
  SetPlan plan_;
  Done done_;
  size_t index_ = 0;
  SteadyTime step_sent_{};    // when the current step's request left the limiter
  SetRunResult result_;
  std::vector<hive::SyncResourceReference> done_tracked_;
  std::vector<hive::SyncResourceReference> undeleted_;
};

}  // namespace syncbus::consumer
