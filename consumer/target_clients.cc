#include "consumer/target_clients.h"

#include "common/digest.h"
#include "common/kube/config.h"

namespace syncbus::consumer {

Result<Target> TargetClients::Get(const std::string& cluster_key,
                                  const std::string& kubeconfig_secret,
                                  const std::string& kubeconfig_yaml,
                                  std::chrono::milliseconds request_timeout) {
  std::string digest = Sha256Hex(kubeconfig_yaml + "\n" + std::to_string(request_timeout.count()));
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(cluster_key);
    if (it != entries_.end() && it->second.kubeconfig_digest == digest) {
      recency_.splice(recency_.begin(), recency_, it->second.recency);
      it->second.kubeconfig_secret = kubeconfig_secret;
      it->second.trusted = true;
      return it->second.target;
    }
  }
  auto config = kube::ParseKubeconfig(kubeconfig_yaml);
  if (!config.ok()) {
    return InvalidArgument("admin kubeconfig of " + cluster_key + ": " + config.status().message());
  }
  config->qps = qps_;
  config->user_agent = "syncbus-consumer";
  config->request_timeout = request_timeout;
  auto client = std::make_shared<kube::ClientImpl>(std::move(*config), transport_);
  Target target{client, std::make_shared<RestMapper>(*client)};
  std::lock_guard lock(mu_);
  auto [it, added] = entries_.try_emplace(cluster_key);
  if (added) {
    it->second.recency = recency_.insert(recency_.begin(), cluster_key);
  } else {
    recency_.splice(recency_.begin(), recency_, it->second.recency);
  }
  it->second.kubeconfig_digest = std::move(digest);
  it->second.kubeconfig_secret = kubeconfig_secret;
  it->second.trusted = true;
  it->second.target = target;
  while (entries_.size() > capacity_) {
    entries_.erase(recency_.back());  // a sync still using it holds its own references
    recency_.pop_back();
  }
  return target;
}

std::string TargetClients::KubeconfigSecret(const std::string& cluster_key) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(cluster_key);
  return it == entries_.end() ? "" : it->second.kubeconfig_secret;
}

std::optional<Target> TargetClients::Trusted(const std::string& cluster_key, const std::string& kubeconfig_secret) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(cluster_key);
  if (it == entries_.end() || !it->second.trusted || it->second.kubeconfig_secret != kubeconfig_secret) {
    return std::nullopt;
  }
  recency_.splice(recency_.begin(), recency_, it->second.recency);
  return it->second.target;
}

void TargetClients::Distrust(const std::string& cluster_key) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(cluster_key);
  if (it != entries_.end()) it->second.trusted = false;
}

size_t TargetClients::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace syncbus::consumer
