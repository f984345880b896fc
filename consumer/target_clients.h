// TargetClients: one Kubernetes client (and REST mapper) per target cluster, built from the
// cluster's admin kubeconfig (read from the hub at processing time) and rebuilt when that
// kubeconfig (or the request timeout) changes. Connections are pooled by the shared transport.
// Thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/http/transport.h"
#include "common/kube/client_impl.h"
#include "consumer/rest_mapper.h"

namespace syncbus::consumer {

struct Target {
  std::shared_ptr<kube::ClientImpl> client;
  std::shared_ptr<RestMapper> mapper;
};

class TargetClients {
 public:
  // `client_qps` paces each client on its own (0 = none); the ClusterSyncer's RequestLimiter
  // already limits each cluster's rate, so the consumer passes 0.
  TargetClients(std::shared_ptr<http::Transport> transport, double client_qps)
      : transport_(std::move(transport)), qps_(client_qps) {}

  // kInvalidArgument (permanent until someone fixes the Secret) for a bad kubeconfig.
  Result<Target> Get(const std::string& cluster_key, const std::string& kubeconfig_yaml,
                     std::chrono::milliseconds request_timeout = std::chrono::seconds(30));

 private:
  struct Entry {
    std::string kubeconfig_digest;
    Target target;
  };
  std::shared_ptr<http::Transport> transport_;
  double qps_;
  std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

}  // namespace syncbus::consumer
