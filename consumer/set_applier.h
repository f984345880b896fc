// Set applier: runs one set's plan (set_plan.h) on one target cluster with upstream Hive's
// semantics. SetRun carries the steps out with non-blocking requests through the RequestLimiter,
// one after the other: the first failing step stops the set's applies (its message is Hive's:
// "failed to apply resource 2: ..."), and the deletions all run whatever happened, as in Hive. A
// resource applied with applyBehavior Apply is applied server-side and keeps Hive's
// kubectl.kubernetes.io/last-applied-configuration annotation up to date; an object last applied
// client-side (by Hive) has that manager's fields handed to syncbus first, so a field dropped
// from the set disappears (see take_over_managers). A kind unknown when planned is mapped off the
// transport's thread. SetRun's callbacks run on the transport's thread; it is shared-owned while
// requests are in flight; thread-safe.
#pragma once

#include <functional>
#include <memory>
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
#include "consumer/set_plan.h"

namespace syncbus::consumer {

// Checked before every write: non-OK means this process no longer owns the cluster.
// Must not block: it runs on the transport's thread.
using SyncFence = std::function<Status()>;

// Hive's mergeResources: `a`, then those of `b` that `a` does not hold (by identity).
std::vector<hive::SyncResourceReference> MergeResources(
    std::vector<hive::SyncResourceReference> a, const std::vector<hive::SyncResourceReference>& b);

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
