#include "consumer/target_clients.h"

#include "common/kube/config.h"
#include "common/kube/resource_version.h"

namespace syncbus::consumer {

Result<Target> TargetClients::Get(const std::string& cluster_key,
                                  const std::string& kubeconfig_secret,
                                  const std::string& kubeconfig_yaml,
                                  std::chrono::milliseconds request_timeout,
                                  const Endpoint& endpoint, const std::string& secret_version) {
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(cluster_key);
    if (it != entries_.end() && it->second.kubeconfig_yaml == kubeconfig_yaml &&
        it->second.request_timeout == request_timeout && it->second.endpoint == endpoint) {
      recency_.splice(recency_.begin(), recency_, it->second.recency);
      it->second.kubeconfig_secret = kubeconfig_secret;
      it->second.secret_version = secret_version;
      it->second.trusted = true;
      return it->second.target;
    }
  }
  auto config = kube::ParseKubeconfig(kubeconfig_yaml);
  if (!config.ok()) {
    return InvalidArgument("admin kubeconfig of " + cluster_key + ": " + config.status().message());
  }
  config->qps = qps_;
  config->user_agent = user_agent_;
  config->request_timeout = request_timeout;
  if (!endpoint.server.empty()) config->server = endpoint.server;
  config->connect_address = endpoint.connect_address;
  auto client = std::make_shared<kube::ClientImpl>(std::move(*config), transport_);
  Target target{client, std::make_shared<RestMapper>(*client)};
  std::lock_guard lock(mu_);
  auto [it, added] = entries_.try_emplace(cluster_key);
  if (added) {
    it->second.recency = recency_.insert(recency_.begin(), cluster_key);
  } else {
    recency_.splice(recency_.begin(), recency_, it->second.recency);
  }
  it->second.kubeconfig_secret = kubeconfig_secret;
  it->second.kubeconfig_yaml = kubeconfig_yaml;
  it->second.request_timeout = request_timeout;
  it->second.endpoint = endpoint;
  it->second.secret_version = secret_version;
  it->second.trusted = true;
  it->second.target = target;
  ForgetKeptLocked(cluster_key);
  while (entries_.size() > capacity_) {
    auto dropped =
        entries_.find(recency_.back());  // a sync still using it holds its own references
    if (dropped->second.trusted) {
      KeepLocked(dropped->first, std::move(dropped->second.kubeconfig_secret),
                 std::move(dropped->second.kubeconfig_yaml),
                 std::move(dropped->second.secret_version));
    }
    entries_.erase(dropped);
    recency_.pop_back();
  }
  return target;
}

void TargetClients::KeepLocked(const std::string& cluster_key, std::string secret, std::string yaml,
                               std::string version) {
  ForgetKeptLocked(cluster_key);
  kept_[cluster_key] = {std::move(secret), std::move(yaml), std::move(version),
                        kept_recency_.insert(kept_recency_.begin(), cluster_key)};
  while (kept_.size() > 10 * capacity_) {
    kept_.erase(kept_recency_.back());
    kept_recency_.pop_back();
  }
}

void TargetClients::ForgetKeptLocked(const std::string& cluster_key) {
  auto it = kept_.find(cluster_key);
  if (it == kept_.end()) return;
  kept_recency_.erase(it->second.recency);
  kept_.erase(it);
}

std::string TargetClients::KubeconfigSecret(const std::string& cluster_key) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(cluster_key);
  return it == entries_.end() ? "" : it->second.kubeconfig_secret;
}

std::optional<Target> TargetClients::Trusted(const std::string& cluster_key,
                                             const std::string& kubeconfig_secret,
                                             std::chrono::milliseconds request_timeout,
                                             const Endpoint& endpoint,
                                             const std::string& secret_version) {
  // Built from the Secret as it is now, as far as the request knows.
  auto current = [&](const std::string& read_version) {
    return secret_version.empty() || kube::ResourceVersionAtLeast(read_version, secret_version);
  };
  std::string yaml, version;
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(cluster_key);
    if (it != entries_.end()) {
      if (!it->second.trusted || it->second.kubeconfig_secret != kubeconfig_secret ||
          !current(it->second.secret_version)) {
        return std::nullopt;
      }
      recency_.splice(recency_.begin(), recency_, it->second.recency);
      if (it->second.endpoint == endpoint && it->second.request_timeout == request_timeout) {
        return it->second.target;
      }
      yaml = it->second.kubeconfig_yaml;  // the ClusterDeployment points elsewhere now: rebuild
      version = it->second.secret_version;
    }
  }
  if (yaml.empty()) {
    std::lock_guard lock(mu_);
    auto kept = kept_.find(cluster_key);
    if (kept == kept_.end() || kept->second.kubeconfig_secret != kubeconfig_secret ||
        !current(kept->second.secret_version)) {
      return std::nullopt;
    }
    yaml = std::move(kept->second.kubeconfig_yaml);
    version = std::move(kept->second.secret_version);
    ForgetKeptLocked(cluster_key);
  }
  Result<Target> rebuilt =
      Get(cluster_key, kubeconfig_secret, yaml, request_timeout, endpoint, version);
  if (!rebuilt.ok()) return std::nullopt;
  return *rebuilt;
}

void TargetClients::Distrust(const std::string& cluster_key) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(cluster_key);
  if (it != entries_.end()) it->second.trusted = false;
  ForgetKeptLocked(cluster_key);
}

size_t TargetClients::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

size_t TargetClients::kept_kubeconfigs() const {
  std::lock_guard lock(mu_);
  return kept_.size();
}

}  // namespace syncbus::consumer
