// ConsumerLiveness: this consumer process's own liveness Lease (coordination.k8s.io/v1, in a
// namespace of the consumers' own), created at start, renewed with a resourceVersion precondition
// and deleted at exit. Its fence (Check) holds while the last successful renewal is younger than
// duration - safety_margin; its epoch moves when a renewal comes after the fence ended or finds
// the Lease gone or written by someone else (liveness_view.h says what an epoch voids).
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "common/bus/cluster_claim.h"
#include "common/clock.h"
#include "common/json.h"
#include "common/kube/client.h"
#include "common/status.h"
#include "consumer/liveness_view.h"

namespace syncbus::consumer {

struct LivenessOptions {
  std::string identity;  // this process: "<name>-<host>-<pid>"
  std::string ns;        // the namespace of the liveness Leases
  std::chrono::seconds duration{15};
  std::chrono::milliseconds renew_interval{5000};
  // The fence ends this long before the Lease expires for others; it also bounds the wall-clock
  // skew between consumers that their views tolerate.
  std::chrono::milliseconds safety_margin{5000};
};

// The name of `identity`'s liveness Lease: a DNS-1123 label (lower case, [a-z0-9-], at most 63
// characters), the identity itself when it is one, otherwise what is left of it plus a short
// digest of it (so two identities never share a name). Pure.
std::string LivenessLeaseName(const std::string& identity);

// What a liveness Lease says; epoch 0 and no renew time where it is malformed.
struct LivenessRecord {
  std::string identity;  // spec.holderIdentity
  int64_t epoch = 0;
  WallTime renew_time{};  // spec.renewTime, the holder's wall clock
  std::chrono::seconds duration{0};
  bool valid = false;  // renew time, duration and epoch all present
  // When it expires for others: renew_time + duration + `skew` (in the holder's favour).
  WallTime ExpiresAt(std::chrono::milliseconds skew = std::chrono::milliseconds(0)) const;
  // Valid and not expired at `now`.
  bool LiveAt(WallTime now) const { return valid && now < ExpiresAt(); }
};
LivenessRecord LivenessOf(const Json& lease);

// Deletes the liveness Leases of `ns` expired (renewTime + duration) for longer than `grace` at
// `now`, each with its resourceVersion as precondition (one renewed meanwhile stays). Returns how
// many it deleted.
Result<size_t> SweepExpiredLiveness(kube::Client& hub, const std::string& ns, WallTime now,
                                    std::chrono::seconds grace);

class ConsumerLiveness {
 public:
  ConsumerLiveness(LivenessOptions options, kube::Client& hub, Clock& clock,
                   prometheus::Registry& registry);
  ~ConsumerLiveness();  // stops renewing (the Lease stays: Stop() deletes it)
  ConsumerLiveness(const ConsumerLiveness&) = delete;
  ConsumerLiveness& operator=(const ConsumerLiveness&) = delete;

  // Creates the Lease in epoch 1, or takes over one left by an earlier process with the same
  // identity (a write from what it read, in the next epoch).
  Status Start();
  // One renewal (PUT with the resourceVersion last written). After a lapse, or when the Lease
  // is gone or was written by someone else, it is written again in the next epoch. Before a
  // successful Start() it starts; after Stop(), kCancelled.
  Status Renew();
  // The fence and the epoch (no request).
  LivenessCheck Check() const;
  // Renews on a thread of its own: checks every fifth of renew_interval (real time) and renews
  // once renew_interval has passed since the last successful renewal began.
  void StartRenewing();
  // Stops renewing and deletes the Lease (preconditions: its uid and resourceVersion); the fence
  // ends. A Lease already gone is no error.
  Status Stop();

  const std::string& identity() const { return options_.identity; }
  const std::string& lease_name() const { return name_; }

 private:
  // The Lease as this process writes it, from `base` (null: a new one) in `epoch`.
  Json LeaseFor(const Json& base, int64_t epoch) const;
  // Writes the Lease afresh in the next epoch, from what the hub has (create when it has none).
  // The caller holds write_mu_.
  Status Rewrite(SteadyTime start);
  // The hub accepted `written` from a write that began at `start`. The caller holds write_mu_.
  void NoteWritten(Json written, int64_t epoch, SteadyTime start);
  // Whether a renewal in `epoch` that has just come back did so after the fence had ended.
  bool LandedLate(int64_t epoch) const;
  void EndFence();
  void StopRenewing();

  const LivenessOptions options_;
  const std::string name_;
  kube::Client& hub_;
  Clock& clock_;

  std::mutex write_mu_;   // serialises Start, Renew and Stop
  Json record_;           // the Lease as last written; guarded by write_mu_
  bool stopped_ = false;  // Stop() gave it up; guarded by write_mu_

  mutable std::mutex state_mu_;
  int64_t epoch_ = 0;      // guarded by state_mu_
  bool renewed_ = false;   // a renewal holds the fence; guarded by state_mu_
  SteadyTime renewed_at_;  // when that renewal began; guarded by state_mu_

  std::mutex thread_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by thread_mu_
  std::thread renewer_;

  prometheus::Family<prometheus::Counter>& events_;
  prometheus::Counter& renewed_ok_;
  prometheus::Counter& renew_failed_;
  prometheus::Counter& epoch_moved_;
};

}  // namespace syncbus::consumer
