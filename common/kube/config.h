// Connection settings for one API server, from a kubeconfig or the in-cluster service account.
// Value type; thread-compatible.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/http/types.h"
#include "common/status.h"

namespace syncbus::kube {

struct ClusterConfig {
  std::string server;          // base URL, may carry a path prefix: https://host:6443/k8s/clusters/c1
  std::string bearer_token;    // empty = none
  std::string token_file;      // re-read when it changes (in-cluster projected tokens)
  std::shared_ptr<const http::TlsOptions> tls = std::make_shared<http::TlsOptions>();
  std::string user_agent = "syncbus";
  double qps = 0;              // client-side rate limit; 0 = unlimited
  // Per request. A watch must answer within it and end within timeoutSeconds plus it.
  std::chrono::milliseconds request_timeout{30000};
};

// Parses kubeconfig YAML and picks `context` (empty = current-context). Supports token,
// tokenFile, client-certificate(-data), client-key(-data), certificate-authority(-data),
// insecure-skip-tls-verify, tls-server-name. Relative file paths resolve against `base_dir`.
Result<ClusterConfig> ParseKubeconfig(const std::string& yaml, const std::string& context = {},
                                      const std::string& base_dir = {});
Result<ClusterConfig> LoadKubeconfigFile(const std::string& path, const std::string& context = {});

// In-cluster: KUBERNETES_SERVICE_HOST/PORT, /var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt}.
// `root` overrides the service-account directory (tests).
Result<ClusterConfig> InClusterConfig(const std::string& root = {});

}  // namespace syncbus::kube
