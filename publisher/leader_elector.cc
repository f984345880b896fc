#include "publisher/leader_elector.h"

#include <algorithm>

#include "common/log.h"
#include "common/time_format.h"

namespace syncbus::publisher {

LeaderElector::LeaderElector(kube::Client& client, LeaderElectionConfig config,
                             std::string identity, Clock& clock)
    : client_(client), config_(std::move(config)), identity_(std::move(identity)), clock_(clock) {}

bool LeaderElector::is_leader() const {
  int64_t renewed = renewed_at_ns_.load();
  if (renewed < 0) return false;
  auto since = clock_.Now().time_since_epoch() - std::chrono::nanoseconds(renewed);
  return since < config_.renew_deadline;
}

std::chrono::milliseconds LeaderElector::NextAttemptIn() const {
  const auto retry = std::chrono::duration_cast<std::chrono::milliseconds>(config_.retry_period);
  if (observed_duration_.count() == 0) return retry;
  auto lapses_in = std::chrono::duration_cast<std::chrono::milliseconds>(
      observed_at_ + observed_duration_ - clock_.Now());
  // Just past the lapse, so that the attempt finds it lapsed.
  return std::clamp(lapses_in + std::chrono::milliseconds(1), std::chrono::milliseconds(1), retry);
}

Json LeaderElector::LeaseFor(const Json& existing, bool take_over) const {
  std::string now = FormatRfc3339Micro(clock_.WallNow());
  Json lease = existing.is_object() ? existing : Json::object();
  lease["apiVersion"] = "coordination.k8s.io/v1";
  lease["kind"] = "Lease";
  lease["metadata"]["name"] = config_.name;
  lease["metadata"]["namespace"] = config_.ns;
  Json& spec = lease["spec"];
  if (!spec.is_object()) spec = Json::object();
  int64_t transitions = spec.value("leaseTransitions", 0);
  if (take_over) {
    spec["acquireTime"] = now;
    if (spec.value("holderIdentity", "") != identity_ && existing.is_object()) ++transitions;
  }
  spec["holderIdentity"] = identity_;
  spec["leaseDurationSeconds"] = std::max<int64_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(config_.lease_duration).count());
  spec["renewTime"] = now;
  spec["leaseTransitions"] = transitions;
  return lease;
}

bool LeaderElector::Tick() {
  const kube::Resource& leases = kube::resources::kLeases;
  // A leader renews from the record it last wrote, without reading it first: the
  // resourceVersion precondition fails (409) if anyone wrote it since, and then it reads.
  if (held_ && is_leader() && last_written_.is_object()) {
    SteadyTime now = clock_.Now();
    auto renewed = client_.Update(kube::Object(leases, config_.ns, config_.name),
                                  LeaseFor(last_written_, false));
    if (renewed.ok()) {
      NoteRenewed(*renewed, now);
      return true;
    }
    log::Debug("leader election: renew failed", {{"error", renewed.status().message()}});
    const Code code = renewed.status().code();
    // Unreachable or failing hub: leadership lapses by itself once renewDeadline passes.
    if (code != Code::kConflict && code != Code::kNotFound) return is_leader();
    last_written_ = nullptr;  // written by someone else, or deleted: read what is there
  }
  auto current = client_.Get(kube::Object(leases, config_.ns, config_.name));
  SteadyTime now = clock_.Now();
  if (!current.ok()) {
    if (current.status().code() != Code::kNotFound) {
      SetProblem("cannot read the lease " + config_.ns + "/" + config_.name + ": " +
                 current.status().message());
      return is_leader();
    }
    auto created = client_.Create(kube::Collection(leases, config_.ns), LeaseFor(nullptr, true));
    if (!created.ok() && created.status().code() != Code::kAlreadyExists) {
      SetProblem("cannot create the lease " + config_.ns + "/" + config_.name + ": " +
                 created.status().message());
    } else {
      SetProblem("");
    }
    if (created.ok()) {
      NoteRenewed(*created, now);
      ++transitions_;
      log::Info("leader election: acquired a new lease", {{"identity", identity_}});
    }
    return is_leader();
  }
  SetProblem("");
  const Json& spec = (*current).contains("spec") ? (*current)["spec"] : Json::object();
  std::string holder = spec.value("holderIdentity", "");
  std::string record = holder + "|" + spec.value("renewTime", "");
  if (record != observed_record_) {
    observed_record_ = record;
    observed_at_ = now;
  }
  bool mine = holder == identity_;
  observed_duration_ = std::chrono::seconds(0);
  if (!mine && !holder.empty()) {
    auto duration = std::chrono::seconds(spec.value("leaseDurationSeconds", 15));
    observed_duration_ = duration;
    if (now - observed_at_ < duration) {
      if (held_) log::Warn("leader election: lost the lease", {{"holder", holder}});
      held_ = false;
      last_written_ = nullptr;
      renewed_at_ns_.store(-1);
      return false;
    }
  }
  auto written =
      client_.Update(kube::Object(leases, config_.ns, config_.name), LeaseFor(*current, !mine));
  if (!written.ok()) {
    // Someone else renewed or took it in between (409), or the hub is unreachable: leadership
    // lapses by itself once renewDeadline passes without a renewal.
    log::Debug("leader election: renew failed", {{"error", written.status().message()}});
    return is_leader();
  }
  if (!mine) {
    ++transitions_;
    log::Info("leader election: became leader", {{"identity", identity_}, {"previous", holder}});
  }
  NoteRenewed(*written, now);
  return true;
}

void LeaderElector::NoteRenewed(const Json& written, SteadyTime now) {
  held_ = true;
  last_written_ = written;
  observed_duration_ = std::chrono::seconds(0);
  observed_record_ = identity_ + "|" + written["spec"].value("renewTime", "");
  observed_at_ = now;
  renewed_at_ns_.store(std::chrono::nanoseconds(now.time_since_epoch()).count());
}

std::string LeaderElector::problem() const {
  std::lock_guard<std::mutex> lock(problem_mu_);
  return problem_;
}

void LeaderElector::SetProblem(std::string problem) {
  std::lock_guard<std::mutex> lock(problem_mu_);
  if (problem == problem_) return;
  if (!problem.empty()) log::Warn("leader election: " + problem);
  problem_ = std::move(problem);
}

Status LeaderElector::Release() {
  if (!held_) return Status::Ok();
  const kube::Resource& leases = kube::resources::kLeases;
  auto current = client_.Get(kube::Object(leases, config_.ns, config_.name));
  if (!current.ok()) return current.status();
  if ((*current)["spec"].value("holderIdentity", "") != identity_) return Status::Ok();
  Json lease = *current;
  lease["spec"]["holderIdentity"] = "";
  lease["spec"]["leaseDurationSeconds"] = 1;
  lease["spec"]["renewTime"] = FormatRfc3339Micro(clock_.WallNow());
  auto written = client_.Update(kube::Object(leases, config_.ns, config_.name), lease);
  renewed_at_ns_.store(-1);
  held_ = false;
  last_written_ = nullptr;
  if (!written.ok()) return written.status().Annotate("releasing the lease");
  log::Info("leader election: released the lease", {{"identity", identity_}});
  return Status::Ok();
}

}  // namespace syncbus::publisher
