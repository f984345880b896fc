#include "publisher/cluster_decision.h"

#include "common/time_format.h"

namespace syncbus::publisher {

namespace {

ClusterState StateOf(NeedKind need, const std::string& skip_reason) {
  switch (need) {
    case NeedKind::kNone:
      if (skip_reason.empty()) return ClusterState::kInSync;
      return skip_reason == "paused" ? ClusterState::kPaused : ClusterState::kSkipped;
    case NeedKind::kFailed: return ClusterState::kFailing;
    case NeedKind::kChange:
    case NeedKind::kReapply: return ClusterState::kPending;
  }
  return ClusterState::kPending;
}

}  // namespace

ClusterDecision DecideCluster(const std::string& key, const ClusterView& view,
                              const ClusterFacts& cluster, const RoundFacts& round,
                              const DecisionPolicy& policy) {
  ClusterDecision d;
  SyncNeed need =
      DecideSync(view.desired, view.status, view.lease_renewal, round.now_wall, policy.reapply);
  // A changed source Secret is invisible to generations: the consumer re-reads it only on a full
  // reapply, which goes on the change lane like any other edit.
  const bool secrets_changed =
      cluster.applied_secrets != nullptr && *cluster.applied_secrets != view.secrets;
  if (secrets_changed && (need.kind == NeedKind::kNone || need.kind == NeedKind::kFailed)) {
    need = {NeedKind::kChange, SyncReason::kSecretChanged};
  }
  d.state = StateOf(need.kind, view.desired.skip_reason);
  if (need.kind == NeedKind::kNone) return d;  // kNone

  d.bulk_change = round.bulk && need.kind == NeedKind::kChange;
  const OutstandingRequest* out = cluster.outstanding;
  const bool timed_out =
      out != nullptr && round.now - out->published_at >= policy.outstanding_timeout;
  // A change must not wait behind the resync lane: while this cluster's request sits there, the
  // change goes out on the change lane (once per change: a later one waits for it). A bulk change
  // waits: it is resync work itself.
  d.promote = out != nullptr && !timed_out && out->resync_queued &&
              need.kind == NeedKind::kChange && !d.bulk_change &&
              (out->snapshot.revision != view.desired.revision || secrets_changed) &&
              (!out->promoted || SnapshotProcessed(out->snapshot, view.status));
  if (out != nullptr && !timed_out && !d.promote) {
    d.action = ClusterAction::kCoalesce;
    return d;
  }
  // The consumer's retry chain owns failures; re-send only when it has had its full chance.
  if (need.kind == NeedKind::kFailed && cluster.last_published &&
      round.now - *cluster.last_published < policy.outstanding_timeout) {
    d.action = ClusterAction::kLeaveToRetries;
    return d;
  }
  // The cap bounds the resync backlog (start-up, periodic reapplies, bulk edits); a single
  // edit's change, at most one outstanding per cluster, is never held back by it.
  const bool resync_work = round.startup || need.kind == NeedKind::kReapply || d.bulk_change;
  if (resync_work && round.cap_reached && !timed_out) {
    d.action = ClusterAction::kDefer;
    return d;
  }
  d.action = ClusterAction::kSend;
  if (d.promote) {
    // The queued resync still does the full reapply; the change applies what changed.
    d.full_reapply = secrets_changed;
    d.lane = amqp::Lane::kChange;
    d.reason = *need.reason;
    return d;
  }
  // A change for a cluster whose reapply is due anyway (or that never had one: no lease) is a
  // full reapply, so the consumer renews the lease in the same pass instead of a second one.
  d.full_reapply = need.kind == NeedKind::kReapply || secrets_changed ||
                   FullReapplyDue(key, view.lease_renewal, round.now_wall, policy.reapply);
  d.lane = resync_work ? amqp::Lane::kResync : amqp::Lane::kChange;
  d.reason =
      round.startup ? SyncReason::kStartup : (timed_out ? SyncReason::kResend : *need.reason);
  return d;
}

bool RequestProcessed(const OutstandingRequest& request, const ClusterView& view) {
  if (!SnapshotProcessed(request.snapshot, view.status)) return false;
  if (!request.full_reapply) return true;
  // renewTime has one-second precision: compare against the publish second.
  return view.lease_renewal &&
         *view.lease_renewal >= std::chrono::floor<std::chrono::seconds>(request.published_wall);
}

std::optional<WallTime> NextReapply(const std::string& key, const ClusterView& view,
                                    const ReapplyPolicy& policy) {
  if (!view.cd || !view.desired.skip_reason.empty()) return std::nullopt;
  return ReapplyDueAt(key, view.lease_renewal, policy);
}

hive::SecretVersions AssumedAppliedSecrets(const ClusterView& view) {
  // Written after the last full reapply (while no publisher watched): not applied yet.
  if (view.lease_renewal && view.secrets_written_at &&
      *view.secrets_written_at > *view.lease_renewal) {
    return {};
  }
  return view.secrets;
}

SyncRequest RequestFor(const std::string& key, const std::string& revision, const HubVersions& seen,
                       const std::string& kubeconfig_version, const ClusterDecision& decision,
                       WallTime now) {
  SyncRequest r;
  auto slash = key.find('/');
  r.cluster_namespace = key.substr(0, slash);
  r.cluster_name = key.substr(slash + 1);
  r.revision = revision;
  r.seen = seen;
  r.kubeconfig_version = kubeconfig_version;
  r.full_reapply = decision.full_reapply;
  r.lane = decision.lane;
  r.reason = std::string(SyncReasonName(decision.reason));
  r.enqueued_at = FormatRfc3339Millis(now);
  return r;
}

}  // namespace syncbus::publisher
