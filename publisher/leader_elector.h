// LeaderElector: leader election on a coordination.k8s.io/v1 Lease with client-go's rules —
// acquire when the lease is free or its holder has not renewed within leaseDuration (measured
// on this process's clock from when the record was last seen to change, so clock skew between
// replicas does not matter), renew every retryPeriod (one write from the record last written;
// a read only when that fails), and consider leadership lost as soon as no
// renewal succeeded for renewDeadline (< leaseDuration), i.e. before anyone else can acquire.
// Not thread-safe: one thread calls Tick(); is_leader() may be read from others.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

#include "common/bus/config.h"
#include "common/clock.h"
#include "common/kube/client.h"

namespace syncbus::publisher {

class LeaderElector {
 public:
  LeaderElector(kube::Client& client, LeaderElectionConfig config, std::string identity,
                Clock& clock);

  // One acquire-or-renew attempt (a leader's renewal: one API call; otherwise one or two, three
  // when a leader's renewal found the lease written by another). Returns is_leader() afterwards.
  bool Tick();
  // True while the last successful renewal is younger than renewDeadline.
  bool is_leader() const;
  // When to call Tick() next: retryPeriod, or sooner for a standby whose observed lease lapses
  // before then (a dead leader's lease is taken when it lapses, not up to retryPeriod later).
  std::chrono::milliseconds NextAttemptIn() const;
  // Gives the lease up (holder cleared) so a standby takes over at once. Only if we hold it.
  Status Release();

  const std::string& identity() const { return identity_; }
  // Why the last attempt could neither read, create nor renew the lease (for example its
  // namespace does not exist, or RBAC refuses it); empty once an attempt got an answer it could
  // act on. Thread-safe. A changed problem is logged once as a warning, not on every attempt.
  std::string problem() const;
  uint64_t transitions() const { return transitions_.load(); }

 private:
  Json LeaseFor(const Json& existing, bool take_over) const;
  // We hold the lease as `written` (what the hub answered to our write) since `now`.
  void NoteRenewed(const Json& written, SteadyTime now);
  void SetProblem(std::string problem);

  kube::Client& client_;
  LeaderElectionConfig config_;
  std::string identity_;
  Clock& clock_;

  std::string observed_record_;                // holder + renewTime last seen
  SteadyTime observed_at_{};                   // when observed_record_ last changed (our clock)
  std::chrono::seconds observed_duration_{0};  // another holder's leaseDurationSeconds; 0: none
  std::atomic<int64_t> renewed_at_ns_{-1};     // steady ns of our last successful renew; -1 none
  bool held_ = false;                          // we wrote the current record
  Json last_written_;                          // that record, as the hub answered; null: none
  std::atomic<uint64_t> transitions_{0};
  mutable std::mutex problem_mu_;
  std::string problem_;  // guarded by problem_mu_
};

}  // namespace syncbus::publisher
