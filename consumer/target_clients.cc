#include "consumer/target_clients.h"

#include "common/digest.h"
#include "common/kube/config.h"

namespace syncbus::consumer {

Result<Target> TargetClients::Get(const std::string& cluster_key, const std::string& kubeconfig_yaml,
                                  std::chrono::milliseconds request_timeout) {
  std::string digest = Sha256Hex(kubeconfig_yaml + "\n" + std::to_string(request_timeout.count()));
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(cluster_key);
    if (it != entries_.end() && it->second.kubeconfig_digest == digest) return it->second.target;
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
  entries_[cluster_key] = {digest, target};
  return target;
}

}  // namespace syncbus::consumer
