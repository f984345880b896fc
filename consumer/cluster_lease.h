// ClusterLeases: per-cluster exclusion across the consumer pool on Hive's own ClusterSyncLease of
// the cluster (its namespace and name). A consumer claims it before its sync's first write by
// writing its identity and renew time into the lease's annotations (common/bus/cluster_claim.h)
// with a resourceVersion precondition, renews the claim while the sync runs, and gives it back
// when done; ClusterLease::Check() fails as soon as the claim may have lapsed or was taken over,
// so a consumer that lost it stops writing. The claim of a full reapply also sets spec.renewTime,
// Hive's record of the cluster's last full reapply, so that one write serves both; a cluster
// without a lease gets one, owned by its ClusterSync as Hive's are (the sync creates the
// ClusterSync first). With the consumer's HubMirror a claim is one write: the lease is read from
// the mirror (a stale copy costs a 409 and one GET). Giving it back is usually no write at all:
// the sync's own ClusterSync status write, the last write of a sync and the only one the holder
// makes after its claim, gives it back. A lease whose ClusterSync was written after the lease's
// last write (a higher resourceVersion: both live in the hub's one etcd) is free to take.
// Sticky mode (LeaseOptions::liveness set, with the mirror): a claim names the holder's liveness
// epoch and holds while the holder lives in it (consumer/liveness_view.h), over many syncs, with
// no renewal of its own: a held cluster's next sync writes no claim, a full reapply writes only
// spec.renewTime, and Release keeps it, unless this consumer holds more than its fair share of
// the fleet (then it gives it back, so that consumers added later get clusters). Its fence is the
// holder's liveness. Another consumer takes it over only when a fresh read of the holder's
// liveness Lease shows it dead in that epoch. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "common/bus/cluster_claim.h"
#include "common/clock.h"
#include "common/json.h"
#include "common/kube/client.h"
#include "common/status.h"
#include "consumer/hub_mirror.h"
#include "consumer/liveness_view.h"

namespace syncbus::consumer {

struct LeaseOptions {
  std::string identity;                             // this process: "<name>-<host>-<pid>"
  std::chrono::seconds duration{30};                // how long a claim holds after its last write
  std::chrono::milliseconds renew_interval{10000};  // a held lease is renewed this long after
                                                    // its last write
  // The holder stops writing this long before its lease could lapse for others; it also bounds
  // the wall-clock skew between consumers that the takeover rule tolerates.
  std::chrono::milliseconds safety_margin{10000};
  // A holder whose ClusterSync was stored after its last lease write has finished (see above).
  // Needs Leases and ClusterSyncs in one etcd; false gives every lease back with a write.
  bool release_by_status = true;
  // Sticky claims (see above): the pool's liveness; null = per-sync claims. Must outlive the
  // ClusterLeases, and needs the mirror.
  LivenessView* liveness = nullptr;
  // Sticky mode: the clusters of the fleet now (the mirror's count), of which this consumer keeps
  // at most its fair share, (fleet / live consumers) * fair_share_slack + 1. Null: no limit.
  std::function<size_t()> fleet_size;
  double fair_share_slack = 1.25;
};

class ClusterLeases;

// One held lease, of cluster ns/name. Destroying it does not release it: call
// ClusterLeases::Release.
class ClusterLease {
 public:
  ClusterLease(std::string ns, std::string name) : ns_(std::move(ns)), name_(std::move(name)) {}
  // The fence: OK while this process certainly still holds the lease (a sticky claim: while this
  // process lives in the claim's epoch).
  Status Check(const Clock& clock) const;
  bool sticky() const { return liveness_ != nullptr; }
  bool lost() const { return lost_.load(); }
  const std::string& ns() const { return ns_; }  // the cluster's
  const std::string& name() const { return name_; }

 private:
  friend class ClusterLeases;
  const std::string ns_, name_;
  std::mutex write_mu_;                     // serialises renew and release writes
  Json record_;                             // last object written (guarded by write_mu_)
  bool released_ = false;                   // guarded by write_mu_
  std::atomic<int64_t> valid_until_ns_{0};  // steady ns
  std::atomic<int64_t> written_at_ns_{0};   // steady ns of the last write that took or renewed it
  std::atomic<bool> lost_{false};
  const LivenessView* liveness_ = nullptr;  // a sticky claim's fence
  int64_t epoch_ = 0;                       // a sticky claim's epoch
};

// One sync's claim on its cluster: taken at the first Check() (the sync's first fence call,
// before its first write), afterwards whether it still holds; Finish() gives it back. What a
// DeliveryLoop's fence claims with; a test that drives a ClusterSyncer runs its syncs the same way.
// Thread-safe.
class ClusterClaim {
 public:
  ClusterClaim(ClusterLeases& leases, std::string ns, std::string name, bool full_reapply,
               const Clock& clock)
      : leases_(leases),
        ns_(std::move(ns)),
        name_(std::move(name)),
        full_reapply_(full_reapply),
        clock_(clock) {}
  Status Check();
  // Why it could not be taken (OK when it was, or never asked for).
  Status refused() const;
  // Whether it was taken and has been lost since.
  bool lost() const;
  // Gives it back (see ClusterLeases::Release); `status_version`: the ClusterSync the sync stored.
  void Finish(const std::string& status_version);

 private:
  ClusterLeases& leases_;
  const std::string ns_, name_;
  const bool full_reapply_;
  const Clock& clock_;
  mutable std::mutex mu_;
  bool tried_ = false;                   // guarded by mu_
  std::shared_ptr<ClusterLease> lease_;  // guarded by mu_
  Status refused_;                       // guarded by mu_
};

class ClusterLeases {
 public:
  // `mirror` (may be null: every Acquire reads the hub) must outlive this.
  ClusterLeases(LeaseOptions options, kube::Client& hub, Clock& clock,
                prometheus::Registry& registry, HubMirror* mirror = nullptr);
  ~ClusterLeases();  // stops the renewal thread (held leases simply expire)

  // Claims the lease of cluster ns/name; with `full_reapply`, its renewTime is now. kConflict
  // (holder named) when another consumer holds it unexpired or won a race for it;
  // kNotFound when the cluster has neither a lease nor a ClusterSync to own one; other errors
  // are hub failures.
  Result<std::shared_ptr<ClusterLease>> Acquire(const std::string& ns, const std::string& name,
                                                bool full_reapply = false);
  // The consumer holding the lease of ns/name now, live and unfinished, when that is not this one
  // (read from the mirror, or the hub without one); "" when free, ours, or unknown (read failed).
  std::string HolderElsewhere(const std::string& ns, const std::string& name);
  // Sticky mode: the other live consumer whose sticky claim holds ns/name now and that renews its
  // liveness, by the mirror and the watched liveness Leases (no request): where its requests are
  // forwarded. "" otherwise.
  std::string StickyHolderElsewhere(const std::string& ns, const std::string& name);
  // Gives it back so the next delivery for the cluster runs at once anywhere: with no write when
  // the cluster's ClusterSync was stored at `status_version` after the lease's last write,
  // otherwise by clearing the holder.
  void Release(const std::shared_ptr<ClusterLease>& lease, const std::string& status_version = "");
  // Renews every held lease whose last write is renew_interval old or older (a sync shorter than
  // that writes its lease once); a 409 or a lapsed lease marks it lost.
  void RenewHeld();
  // Runs RenewHeld() every fifth of renew_interval of real time on a thread of its own.
  void StartRenewing();

  const std::string& identity() const { return options_.identity; }
  // Leases held now: per-sync ones in a sync, and sticky ones of this epoch.
  size_t held() const;

 private:
  // `existing` (null: a new lease owned by the ClusterSync `owner_uid`) claimed by this consumer
  // now; its renewTime now too with `full_reapply`.
  // A sticky one (epoch > 0) names this consumer's liveness epoch.
  Json Claimed(const Json& existing, const std::string& ns, const std::string& name,
               bool full_reapply, const std::string& owner_uid, int64_t epoch) const;
  // A sticky claim of epoch `epoch` on ns/name, last written as `record`.
  std::shared_ptr<ClusterLease> StickyLease(const std::string& ns, const std::string& name,
                                            Json record, int64_t epoch) const;
  // Keeps a sticky claim for the cluster's next sync, or gives it back (over the fair share).
  void ReleaseSticky(const std::shared_ptr<ClusterLease>& lease);
  // The lease as the mirror has it (or the hub, without a mirror or when `from_hub`).
  Result<std::optional<Json>> ReadLease(const std::string& ns, const std::string& name,
                                        bool from_hub);
  // The uid of the cluster's ClusterSync, which owns a new lease; kNotFound when there is none.
  Result<std::string> ClusterSyncUid(const std::string& ns, const std::string& name);
  // One attempt: kConflict with `race` set when the write lost to a newer version.
  Result<std::shared_ptr<ClusterLease>> TryAcquire(const std::string& ns, const std::string& name,
                                                   bool full_reapply, bool from_hub, bool& race);
  // The holder of `spec` finished: its ClusterSync was written after the lease (see above).
  bool HolderFinished(const Json& lease, const std::string& ns, const std::string& name) const;
  // The lease's holder when another consumer holds it, live and unfinished; "" otherwise. A sticky
  // claim is judged by the watched liveness Leases.
  std::string LiveHolderElsewhere(const Json& lease, const std::string& ns,
                                  const std::string& name) const;
  // A takeover of a sticky claim that the watched copies show lapsed: OK when a fresh read of its
  // holder's liveness Lease shows it dead in the claim's epoch.
  Status ConfirmLapsed(const ClaimRecord& claim, const std::string& ns, const std::string& name);
  // Sticky mode: whether this consumer holds more than its fair share of the fleet now.
  bool OverFairShare() const;
  // Writes `lease`'s last record back with `holder` ("" gives it back) and the renew time now;
  // the caller holds lease.write_mu_.
  Result<Json> WriteClaim(const ClusterLease& lease, const std::string& holder);
  void Renew(const std::shared_ptr<ClusterLease>& lease);
  void MarkLost(ClusterLease& lease, const std::string& why);

  LeaseOptions options_;
  kube::Client& hub_;
  Clock& clock_;
  HubMirror* mirror_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<ClusterLease>> held_;  // "ns/name": per-sync claims
  std::set<std::string> sticky_held_;  // "ns/name": sticky claims of epoch sticky_epoch_
  int64_t sticky_epoch_ = 0;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread renewer_;
  prometheus::Family<prometheus::Counter>& events_;
  prometheus::Counter& acquired_;
  prometheus::Counter& lost_;
  prometheus::Counter& busy_;
  prometheus::Counter& released_by_status_;
  prometheus::Counter& kept_;
  prometheus::Counter& given_back_;
};

}  // namespace syncbus::consumer
