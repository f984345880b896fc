// ClusterLeases: per-cluster exclusion across the consumer pool with one coordination.k8s.io/v1
// Lease per cluster on the hub (same namespace and name as the ClusterDeployment): taken with a
// resourceVersion precondition, renewed in the background while the cluster is worked on, given
// back when done, and fenced: ClusterLease::Check() fails as soon as the lease may have lapsed
// or was taken over, so a consumer that lost it stops writing. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "common/clock.h"
#include "common/json.h"
#include "common/kube/client.h"
#include "common/status.h"

namespace syncbus::consumer {

struct LeaseOptions {
  std::string identity;                                  // this consumer: "<host>-<random>"
  std::chrono::seconds duration{30};                     // leaseDurationSeconds written
  std::chrono::milliseconds renew_interval{10000};       // background renewal period
  // The holder stops writing this long before its lease could lapse for others; it also bounds
  // the wall-clock skew between consumers that the takeover rule tolerates.
  std::chrono::milliseconds safety_margin{10000};
};

class ClusterLeases;

// One held lease. Destroying it does not release it: call ClusterLeases::Release.
class ClusterLease {
 public:
  ClusterLease(std::string ns, std::string name) : ns_(std::move(ns)), name_(std::move(name)) {}
  // The fence: OK while this process certainly still holds the lease.
  Status Check(const Clock& clock) const;
  bool lost() const { return lost_.load(); }
  const std::string& ns() const { return ns_; }
  const std::string& name() const { return name_; }

 private:
  friend class ClusterLeases;
  const std::string ns_, name_;
  std::mutex write_mu_;                 // serialises renew and release writes
  Json record_;                         // last object written (guarded by write_mu_)
  bool released_ = false;               // guarded by write_mu_
  std::atomic<int64_t> valid_until_ns_{0};   // steady ns
  std::atomic<bool> lost_{false};
};

class ClusterLeases {
 public:
  ClusterLeases(LeaseOptions options, kube::Client& hub, Clock& clock, prometheus::Registry& registry);
  ~ClusterLeases();   // stops the renewal thread (held leases simply expire)

  // Takes the lease of cluster ns/name. kConflict (holder named) when another consumer holds it
  // unexpired or won a race for it; other errors are hub failures.
  Result<std::shared_ptr<ClusterLease>> Acquire(const std::string& ns, const std::string& name);
  // Gives it back (holder cleared) so the next delivery for the cluster runs at once anywhere.
  void Release(const std::shared_ptr<ClusterLease>& lease);
  // Renews every held lease once; a 409 or a lapsed lease marks it lost.
  void RenewHeld();
  // Runs RenewHeld() every renew_interval of real time on a thread of its own.
  void StartRenewing();

  const std::string& identity() const { return options_.identity; }
  size_t held() const;

 private:
  Json LeaseObject(const Json& existing, const std::string& ns, const std::string& name, bool take_over) const;
  void Renew(const std::shared_ptr<ClusterLease>& lease);
  void MarkLost(ClusterLease& lease, const std::string& why);

  LeaseOptions options_;
  kube::Client& hub_;
  Clock& clock_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<ClusterLease>> held_;   // "ns/name"
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread renewer_;
  prometheus::Family<prometheus::Counter>& events_;
  prometheus::Counter& acquired_;
  prometheus::Counter& lost_;
  prometheus::Counter& busy_;
};

}  // namespace syncbus::consumer
