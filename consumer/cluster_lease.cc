#include "consumer/cluster_lease.h"

#include "common/hive/types.h"
#include "common/kube/resource_version.h"
#include "common/log.h"
#include "common/time_format.h"

namespace syncbus::consumer {
namespace {

namespace res = kube::resources;

int64_t SteadyNs(SteadyTime t) {
  return std::chrono::nanoseconds(t.time_since_epoch()).count();
}

bool LostTheRace(Code code) {
  return code == Code::kConflict || code == Code::kAlreadyExists;
}

}  // namespace

Status ClusterLease::Check(const Clock& clock) const {
  if (lost_.load()) return {Code::kConflict, "the lease of " + ns_ + "/" + name_ + " was lost"};
  if (liveness_ != nullptr) {
    const LivenessCheck own = liveness_->Own();
    if (own.alive && own.epoch == epoch_) return Status::Ok();
    return {Code::kConflict, "the sticky claim on " + ns_ + "/" + name_ +
                                 " lapsed with this consumer's liveness (epoch " +
                                 std::to_string(epoch_) + ")"};
  }
  if (SteadyNs(clock.Now()) >= valid_until_ns_.load()) {
    return {Code::kConflict, "the lease of " + ns_ + "/" + name_ + " was not renewed in time"};
  }
  return Status::Ok();
}

ClusterLeases::ClusterLeases(LeaseOptions options, kube::Client& hub, Clock& clock,
                             prometheus::Registry& registry, HubMirror* mirror)
    : options_(std::move(options)),
      hub_(hub),
      clock_(clock),
      mirror_(mirror),
      events_(
          prometheus::BuildCounter()
              .Name("syncbus_consumer_leases_total")
              .Help("Per-cluster claims (on ClusterSyncLeases): acquired, lost (taken over or not "
                    "renewed in time), busy, released-by-status (given back by the ClusterSync "
                    "write, with no lease write)")
              .Register(registry)),
      acquired_(events_.Add({{"event", "acquired"}})),
      lost_(events_.Add({{"event", "lost"}})),
      busy_(events_.Add({{"event", "busy"}})),
      released_by_status_(events_.Add({{"event", "released-by-status"}})),
      kept_(events_.Add({{"event", "kept"}})),
      given_back_(events_.Add({{"event", "given-back"}})) {}

ClusterLeases::~ClusterLeases() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
}

size_t ClusterLeases::held() const {
  std::lock_guard lock(mu_);
  return held_.size() + sticky_held_.size();
}

Json ClusterLeases::Claimed(const Json& existing, const std::string& ns, const std::string& name,
                            bool full_reapply, const std::string& owner_uid, int64_t epoch) const {
  const std::string now = FormatRfc3339Micro(clock_.WallNow());
  Json lease = existing;
  if (!lease.is_object()) {
    lease = {{"apiVersion", hive::kHiveInternalApiVersion},
             {"kind", "ClusterSyncLease"},
             {"metadata",
              {{"name", name},
               {"namespace", ns},
               {"ownerReferences", Json::array({{{"apiVersion", hive::kHiveInternalApiVersion},
                                                 {"kind", "ClusterSync"},
                                                 {"name", name},
                                                 {"uid", owner_uid},
                                                 {"blockOwnerDeletion", true}}})}}},
             {"spec", Json::object()}};
    full_reapply = true;  // renewTime is required; a cluster without a lease is fully reapplied
  }
  Json& annotations = lease["metadata"]["annotations"];
  if (!annotations.is_object()) annotations = Json::object();
  annotations[kClaimHolderAnnotation] = options_.identity;
  annotations[kClaimRenewTimeAnnotation] = now;
  annotations[kClaimDurationAnnotation] =
      std::to_string(std::max<int64_t>(1, options_.duration.count()));
  if (epoch > 0) {
    annotations[kClaimKindAnnotation] = kStickyClaim;
    annotations[kEpochAnnotation] = std::to_string(epoch);
  } else {
    annotations.erase(kClaimKindAnnotation);
    annotations.erase(kEpochAnnotation);
  }
  if (full_reapply) lease["spec"]["renewTime"] = now;
  return lease;
}

Result<std::optional<Json>> ClusterLeases::ReadLease(const std::string& ns, const std::string& name,
                                                     bool from_hub) {
  if (mirror_ != nullptr && !from_hub) return mirror_->ClusterSyncLease(ns, name);
  auto current = hub_.Get(kube::Object(res::kClusterSyncLeases, ns, name));
  if (current.ok()) return std::optional<Json>(std::move(*current));
  if (current.status().code() == Code::kNotFound) return std::optional<Json>();
  return current.status().Annotate("reading the ClusterSyncLease");
}

Result<std::string> ClusterLeases::ClusterSyncUid(const std::string& ns, const std::string& name) {
  std::string uid;
  if (mirror_ != nullptr) {
    if (auto status = mirror_->Status(ns, name)) uid = status->meta.uid;
  }
  if (uid.empty()) {
    auto current = hub_.Get(kube::Object(res::kClusterSyncs, ns, name));
    if (!current.ok() && current.status().code() != Code::kNotFound)
      return current.status().Annotate("reading the ClusterSync that owns the lease");
    if (current.ok()) uid = (*current)["metadata"].value("uid", "");
  }
  if (uid.empty()) {
    return Status(Code::kNotFound,
                  "cluster " + ns + "/" + name + " has no ClusterSync to own its ClusterSyncLease");
  }
  return uid;
}

bool ClusterLeases::HolderFinished(const Json& lease, const std::string& ns,
                                   const std::string& name) const {
  if (!options_.release_by_status || mirror_ == nullptr) return false;
  auto lease_version = kube::ParseResourceVersion(lease["metadata"].value("resourceVersion", ""));
  auto status_version = kube::ParseResourceVersion(mirror_->StatusVersion(ns, name));
  return lease_version && status_version && *status_version > *lease_version;
}

std::string ClusterLeases::LiveHolderElsewhere(const Json& lease, const std::string& ns,
                                               const std::string& name) const {
  const ClaimRecord claim = ClaimOf(lease);
  if (claim.holder.empty() || claim.holder == options_.identity) return "";
  // A sticky claim outlives its syncs' status writes: only its holder's liveness ends it.
  if (claim.sticky && options_.liveness != nullptr)
    return options_.liveness->Alive(claim.holder, claim.epoch) ? claim.holder : "";
  if (HolderFinished(lease, ns, name)) return "";
  auto renewed = ParseRfc3339(claim.renew_time);
  auto duration = std::chrono::seconds(claim.duration_seconds);
  return renewed.ok() && *renewed + duration > clock_.WallNow() ? claim.holder : "";
}

std::string ClusterLeases::HolderElsewhere(const std::string& ns, const std::string& name) {
  auto current = ReadLease(ns, name, false);
  if (!current.ok() || !*current) return "";
  return LiveHolderElsewhere(**current, ns, name);
}

std::string ClusterLeases::StickyHolderElsewhere(const std::string& ns, const std::string& name) {
  if (options_.liveness == nullptr || mirror_ == nullptr) return "";
  std::optional<Json> lease = mirror_->ClusterSyncLease(ns, name);
  if (!lease) return "";
  const ClaimRecord claim = ClaimOf(*lease);
  if (!claim.sticky) return "";
  std::string holder = LiveHolderElsewhere(*lease, ns, name);
  // A holder that stopped renewing would leave the request waiting in its queue: it waits in a
  // delay tier instead, until the holder renews again or lapses.
  return !holder.empty() && options_.liveness->Renewing(holder, claim.epoch) ? holder : "";
}

Status ClusterLeases::ConfirmLapsed(const ClaimRecord& claim, const std::string& ns,
                                    const std::string& name) {
  Result<bool> alive = options_.liveness->AliveFresh(claim.holder, claim.epoch);
  if (!alive.ok())
    return alive.status().Annotate("reading the liveness of " + claim.holder + ", which holds " +
                                   ns + "/" + name);
  if (*alive) {
    return Status(Code::kConflict, "cluster " + ns + "/" + name + " is held by " + claim.holder);
  }
  log::Info("taking over the sticky claim of a consumer that is gone",
            {{"cluster", ns + "/" + name}, {"holder", claim.holder}, {"epoch", claim.epoch}});
  return Status::Ok();
}

bool ClusterLeases::OverFairShare() const {
  if (!options_.fleet_size) return false;
  const size_t live = std::max<size_t>(1, options_.liveness->LiveCount());
  const double share = static_cast<double>(options_.fleet_size()) / static_cast<double>(live) *
                           options_.fair_share_slack +
                       1;
  std::lock_guard lock(mu_);
  return static_cast<double>(sticky_held_.size()) > share;
}

Result<std::shared_ptr<ClusterLease>> ClusterLeases::TryAcquire(const std::string& ns,
                                                                const std::string& name,
                                                                bool full_reapply, bool from_hub,
                                                                bool& race) {
  race = false;
  SteadyTime start = clock_.Now();
  int64_t epoch = 0;  // sticky mode: this consumer's liveness epoch
  if (options_.liveness != nullptr) {
    const LivenessCheck own = options_.liveness->Own();
    if (!own.alive) {
      // A conflict, like a cluster held elsewhere: the request is deferred, with no attempt.
      return Status(Code::kConflict,
                    "this consumer's liveness Lease does not hold now: it claims no cluster");
    }
    epoch = own.epoch;
  }
  auto current = ReadLease(ns, name, from_hub);
  if (!current.ok()) return current.status();
  std::string owner_uid;
  if (*current) {
    const ClaimRecord claim = ClaimOf(**current);
    if (epoch > 0 && claim.sticky && claim.holder == options_.identity && claim.epoch == epoch &&
        !full_reapply) {
      return StickyLease(ns, name, std::move(**current), epoch);  // held already: no write
    }
    if (std::string live = LiveHolderElsewhere(**current, ns, name); !live.empty()) {
      return Status(Code::kConflict, "cluster " + ns + "/" + name + " is being synced by " + live);
    }
    if (claim.sticky && !claim.holder.empty() && claim.holder != options_.identity &&
        options_.liveness != nullptr) {
      SYNCBUS_RETURN_IF_ERROR(ConfirmLapsed(claim, ns, name));
    } else if (!claim.holder.empty() && claim.holder != options_.identity &&
               !HolderFinished(**current, ns, name)) {
      log::Info("taking over an expired cluster claim",
                {{"cluster", ns + "/" + name}, {"holder", claim.holder}});
    }
  } else {
    auto uid = ClusterSyncUid(ns, name);
    if (!uid.ok()) return uid.status();
    owner_uid = *uid;
  }
  Json claimed = Claimed(*current ? **current : Json(), ns, name, full_reapply, owner_uid, epoch);
  Result<Json> written = *current
                             ? hub_.Update(kube::Object(res::kClusterSyncLeases, ns, name), claimed)
                             : hub_.Create(kube::Collection(res::kClusterSyncLeases, ns), claimed);
  if (!written.ok()) {
    if (LostTheRace(written.status().code())) {
      race = true;
      return Status(Code::kConflict, "another consumer claimed " + ns + "/" + name + " first");
    }
    return written.status().Annotate("claiming the ClusterSyncLease of " + ns + "/" + name);
  }
  if (mirror_ != nullptr) mirror_->NoteWritten(HubCollection::kClusterSyncLeases, *written);
  if (epoch > 0) return StickyLease(ns, name, std::move(*written), epoch);
  auto lease = std::make_shared<ClusterLease>(ns, name);
  lease->record_ = std::move(*written);
  lease->valid_until_ns_.store(SteadyNs(start + options_.duration - options_.safety_margin));
  lease->written_at_ns_.store(SteadyNs(start));
  return lease;
}

Result<std::shared_ptr<ClusterLease>> ClusterLeases::Acquire(const std::string& ns,
                                                             const std::string& name,
                                                             bool full_reapply) {
  bool race = false;
  auto lease = TryAcquire(ns, name, full_reapply, false, race);
  // The mirror's copy was stale (or there is no mirror and another consumer won): with a mirror,
  // read the hub once and decide again.
  if (!lease.ok() && race && mirror_ != nullptr)
    lease = TryAcquire(ns, name, full_reapply, true, race);
  if (!lease.ok()) {
    if (lease.status().code() == Code::kConflict) busy_.Increment();
    return lease.status();
  }
  {
    std::lock_guard lock(mu_);
    if ((*lease)->sticky()) {
      if ((*lease)->epoch_ != sticky_epoch_) {  // a new epoch voided the claims of the old one
        sticky_held_.clear();
        sticky_epoch_ = (*lease)->epoch_;
      }
      sticky_held_.insert(ns + "/" + name);
    } else {
      held_[ns + "/" + name] = *lease;
    }
  }
  acquired_.Increment();
  return lease;
}

void ClusterLeases::MarkLost(ClusterLease& lease, const std::string& why) {
  if (lease.lost_.exchange(true)) return;
  lost_.Increment();
  log::Warn("cluster lease lost; writes for the cluster stop",
            {{"cluster", lease.ns_ + "/" + lease.name_}, {"why", why}});
}

Result<Json> ClusterLeases::WriteClaim(const ClusterLease& lease, const std::string& holder) {
  Json object = lease.record_;
  Json& annotations = object["metadata"]["annotations"];
  annotations[kClaimHolderAnnotation] = holder;
  if (holder.empty()) {  // given back: no longer bound to a liveness
    annotations.erase(kClaimKindAnnotation);
    annotations.erase(kEpochAnnotation);
  }
  annotations[kClaimRenewTimeAnnotation] = FormatRfc3339Micro(clock_.WallNow());
  return hub_.Update(kube::Object(res::kClusterSyncLeases, lease.ns_, lease.name_), object);
}

void ClusterLeases::Renew(const std::shared_ptr<ClusterLease>& lease) {
  std::lock_guard write(lease->write_mu_);
  if (lease->released_ || lease->lost_.load()) return;
  SteadyTime start = clock_.Now();
  if (SteadyNs(start) >= lease->valid_until_ns_.load()) {
    MarkLost(*lease, "not renewed in time");
    return;
  }
  if (SteadyNs(start) - lease->written_at_ns_.load() <
      std::chrono::nanoseconds(options_.renew_interval).count()) {
    return;  // written recently enough
  }
  auto written = WriteClaim(*lease, options_.identity);
  if (written.ok()) {
    lease->record_ = std::move(*written);
    lease->valid_until_ns_.store(SteadyNs(start + options_.duration - options_.safety_margin));
    lease->written_at_ns_.store(SteadyNs(start));
    return;
  }
  Code code = written.status().code();
  if (code == Code::kConflict || code == Code::kNotFound) {
    MarkLost(*lease, written.status().message());
  } else {
    log::Debug(
        "cluster lease renewal failed; retrying",
        {{"cluster", lease->ns_ + "/" + lease->name_}, {"error", written.status().message()}});
  }
}

void ClusterLeases::RenewHeld() {
  std::vector<std::shared_ptr<ClusterLease>> held;
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, lease] : held_) held.push_back(lease);
  }
  for (const auto& lease : held) Renew(lease);
}

void ClusterLeases::Release(const std::shared_ptr<ClusterLease>& lease,
                            const std::string& status_version) {
  if (lease->sticky()) {
    ReleaseSticky(lease);
    return;
  }
  {
    std::lock_guard lock(mu_);
    auto it = held_.find(lease->ns_ + "/" + lease->name_);
    if (it != held_.end() && it->second == lease) held_.erase(it);
  }
  std::lock_guard write(lease->write_mu_);
  if (lease->released_) return;
  lease->released_ = true;
  if (lease->lost_.load()) return;
  auto held_version =
      kube::ParseResourceVersion(lease->record_["metadata"].value("resourceVersion", ""));
  auto stored_version = kube::ParseResourceVersion(status_version);
  if (options_.release_by_status && mirror_ != nullptr && held_version && stored_version &&
      *stored_version > *held_version) {
    released_by_status_.Increment();  // the ClusterSync write gave it back (see the header)
    return;
  }
  auto written = WriteClaim(*lease, "");
  if (written.ok() && mirror_ != nullptr)
    mirror_->NoteWritten(HubCollection::kClusterSyncLeases, *written);
  // A failed release only delays the next sync of this cluster until the lease expires.
  if (!written.ok()) {
    log::Debug("cluster lease release failed", {{"cluster", lease->ns_ + "/" + lease->name_},
                                                {"error", written.status().message()}});
  }
}

void ClusterLeases::ReleaseSticky(const std::shared_ptr<ClusterLease>& lease) {
  const std::string key = lease->ns_ + "/" + lease->name_;
  std::lock_guard write(lease->write_mu_);
  if (lease->released_) return;
  lease->released_ = true;
  const bool valid = lease->Check(clock_).ok();
  if (valid && !OverFairShare()) {
    kept_.Increment();  // the next sync of the cluster, here, writes no claim
    return;
  }
  {
    std::lock_guard lock(mu_);
    sticky_held_.erase(key);
  }
  if (!valid) return;  // lapsed: void already
  // More than a fair share: give it back, so that the next request for it goes to whichever
  // consumer the queue hands it to (a consumer added by a scale-out, most often).
  auto written = WriteClaim(*lease, "");
  if (written.ok()) {
    given_back_.Increment();
    if (mirror_ != nullptr) mirror_->NoteWritten(HubCollection::kClusterSyncLeases, *written);
  } else {
    log::Debug("giving a sticky claim back failed",
               {{"cluster", key}, {"error", written.status().message()}});
  }
}

std::shared_ptr<ClusterLease> ClusterLeases::StickyLease(const std::string& ns,
                                                         const std::string& name, Json record,
                                                         int64_t epoch) const {
  auto lease = std::make_shared<ClusterLease>(ns, name);
  lease->record_ = std::move(record);
  lease->liveness_ = options_.liveness;
  lease->epoch_ = epoch;
  return lease;
}

void ClusterLeases::StartRenewing() {
  renewer_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      stop_cv_.wait_for(lock, std::max(options_.renew_interval / 5, std::chrono::milliseconds(100)),
                        [&] { return stopping_; });
      if (stopping_) break;
      lock.unlock();
      RenewHeld();
      lock.lock();
    }
  });
}

Status ClusterClaim::Check() {
  std::lock_guard lock(mu_);
  if (!tried_) {
    tried_ = true;
    auto acquired = leases_.Acquire(ns_, name_, full_reapply_);
    if (acquired.ok())
      lease_ = std::move(*acquired);
    else
      refused_ = acquired.status();
  }
  return lease_ ? lease_->Check(clock_) : refused_;
}

Status ClusterClaim::refused() const {
  std::lock_guard lock(mu_);
  return refused_;
}

bool ClusterClaim::lost() const {
  std::lock_guard lock(mu_);
  return lease_ && !lease_->Check(clock_).ok();
}

void ClusterClaim::Finish(const std::string& status_version) {
  std::shared_ptr<ClusterLease> lease;
  {
    std::lock_guard lock(mu_);
    lease = std::move(lease_);
  }
  if (lease) leases_.Release(lease, status_version);
}

}  // namespace syncbus::consumer
