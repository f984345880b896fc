// TargetClients: one Kubernetes client (and REST mapper) per target cluster, built from the
// cluster's admin kubeconfig (read from the hub) and rebuilt when that kubeconfig (or the request
// timeout) changes. It remembers which Secret the kubeconfig came from: while the cluster's syncs
// succeed, a sync whose ClusterDeployment still names that Secret uses the kept client without
// reading the Secret again (Trusted), unless the sync request says the Secret has a newer
// resourceVersion than the one the client was built from (the publisher watches Secrets'
// metadata): a changed kubeconfig is read at the next sync, as Hive reads it from its cache on
// every reconcile. A failed sync withdraws that trust (Distrust), so the next one reads the
// Secret afresh. At most `capacity` clusters are kept; beyond it the least recently used is
// dropped (its next sync builds a new client and rediscovers), but a trusted kubeconfig is kept
// on its own, for up to 10 x `capacity` clusters, so that the rebuild needs no Secret read: a
// consumer of a fleet larger than `capacity` would otherwise read the hub for every sync.
// Connections are pooled by the shared transport. Thread-safe.
#pragma once

#include <algorithm>
#include <chrono>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/http/transport.h"
#include "common/kube/client_impl.h"
#include "consumer/rest_mapper.h"

namespace syncbus::consumer {

struct Target {
  std::shared_ptr<kube::ClientImpl> client;
  std::shared_ptr<RestMapper> mapper;
  bool kept = false;  // kept from a sync that succeeded (Trusted), not built just now
};

// Where the ClusterDeployment says to reach the cluster instead of its kubeconfig's server
// (Hive's spec.controlPlaneConfig): empty fields change nothing.
struct Endpoint {
  std::string server;           // apiURLOverride, while the ActiveAPIURLOverride condition is True
  std::string connect_address;  // apiServerIPOverride: connect to this IP, the URL's port kept
  bool operator==(const Endpoint&) const = default;
};

class TargetClients {
 public:
  // `client_qps` paces each client on its own (0 = none); the ClusterSyncer's RequestLimiter
  // already limits each cluster's rate, so the consumer passes 0.
  // `user_agent` names this consumer process to every target ("syncbus-consumer/<identity>").
  TargetClients(std::shared_ptr<http::Transport> transport, double client_qps,
                size_t capacity = 2000, std::string user_agent = "syncbus-consumer")
      : transport_(std::move(transport)),
        qps_(client_qps),
        capacity_(std::max<size_t>(1, capacity)),
        user_agent_(std::move(user_agent)) {}

  // `kubeconfig_yaml` was read from the Secret named `kubeconfig_secret`, at resourceVersion
  // `secret_version` ("" = unknown). kInvalidArgument (permanent until someone fixes the Secret)
  // for a bad kubeconfig. `endpoint` overrides where the client connects (a change rebuilds the
  // client).
  Result<Target> Get(const std::string& cluster_key, const std::string& kubeconfig_secret,
                     const std::string& kubeconfig_yaml,
                     std::chrono::milliseconds request_timeout = std::chrono::seconds(30),
                     const Endpoint& endpoint = {}, const std::string& secret_version = "");
  // The Secret of the cluster's last Get; empty when it has none kept.
  std::string KubeconfigSecret(const std::string& cluster_key) const;
  // The kept client of a cluster whose kubeconfig came from `kubeconfig_secret` and has not been
  // distrusted since; nullopt otherwise (read the Secret and Get).
  // A dropped cluster's kept kubeconfig is built into a new client (`request_timeout` as for Get).
  // A changed `endpoint` rebuilds the client from the trusted kubeconfig. `secret_version`: the
  // Secret's resourceVersion as the request says it is now ("" = unknown); when the kubeconfig
  // was read at an older (or unknown) version, nullopt.
  std::optional<Target> Trusted(
      const std::string& cluster_key, const std::string& kubeconfig_secret,
      std::chrono::milliseconds request_timeout = std::chrono::seconds(30),
      const Endpoint& endpoint = {}, const std::string& secret_version = "");
  // The cluster's next sync must read its kubeconfig Secret again (its last sync failed).
  void Distrust(const std::string& cluster_key);

  size_t size() const;
  size_t kept_kubeconfigs() const;

 private:
  struct Kept {  // a dropped cluster's trusted kubeconfig
    std::string kubeconfig_secret;
    std::string kubeconfig_yaml;
    std::string secret_version;
    std::list<std::string>::iterator recency;  // in kept_recency_
  };
  void KeepLocked(const std::string& cluster_key, std::string secret, std::string yaml,
                  std::string version);
  void ForgetKeptLocked(const std::string& cluster_key);

  struct Entry {
    std::string kubeconfig_secret;
    std::string kubeconfig_yaml;  // the client is rebuilt when it or the timeout changes
    std::string secret_version;   // the Secret's resourceVersion when read ("" = unknown)
    std::chrono::milliseconds request_timeout{0};
    Endpoint endpoint;
    bool trusted = false;  // set by Get, cleared by Distrust
    Target target;
    std::list<std::string>::iterator recency;  // in recency_
  };
  std::shared_ptr<http::Transport> transport_;
  double qps_;
  size_t capacity_;
  std::string user_agent_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> recency_;  // cluster keys, most recently used first
  std::unordered_map<std::string, Kept> kept_;
  std::list<std::string> kept_recency_;  // most recently kept first
};

}  // namespace syncbus::consumer
