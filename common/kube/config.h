// Connection settings for one API server, from kubeconfig files (read and merged as kubectl does)
// or the in-cluster service account. Value types; thread-compatible.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/http/types.h"
#include "common/json.h"
#include "common/status.h"

namespace syncbus::kube {

// A kubeconfig user's `exec` credential plugin (client.authentication.k8s.io/v1 or v1beta1):
// a program that prints an ExecCredential with a token or a client certificate. Run by
// kube::ExecCredentialPlugin (exec_credential.h).
struct ExecConfig {
  enum class Interactive { kNever, kIfAvailable, kAlways };
  std::string api_version;  // client.authentication.k8s.io/v1 or .../v1beta1
  std::string command;      // absolute, a name looked up in PATH, or resolved against the
                            // kubeconfig's directory when it holds a '/'
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  // added to this process's environment
  Interactive interactive = Interactive::kIfAvailable;
  std::string install_hint;  // printed when the command is not found
  Json cluster;              // spec.cluster of the ExecCredential input; null unless
                             // provideClusterInfo
};

// Impersonation (kubeconfig user fields as, as-uid, as-groups, as-user-extra): sent as the
// Impersonate-* headers of every request.
struct Impersonation {
  std::string user, uid;
  std::vector<std::string> groups;
  std::map<std::string, std::vector<std::string>> extra;
  bool empty() const { return user.empty(); }
};

struct ClusterConfig {
  std::string server;  // base URL, may carry a path prefix: https://host:6443/k8s/clusters/c1
  std::string
      connect_address;  // connect to this IP instead of server's host (Hive's apiServerIPOverride)
  std::string bearer_token;                // empty = none
  std::string token_file;                  // re-read when it changes (in-cluster projected tokens)
  std::string username, password;          // basic authentication (when no token is set)
  std::shared_ptr<const ExecConfig> exec;  // null = none; used when no token, basic
                                           // authentication or client certificate is set
  Impersonation impersonate;
  std::string proxy_url;  // http://, https:// or socks5://; empty = libcurl's default (the
                          // http_proxy, https_proxy, no_proxy environment, as client-go)
  std::shared_ptr<const http::TlsOptions> tls = std::make_shared<http::TlsOptions>();
  std::string user_agent = "syncbus";
  double qps = 0;  // client-side rate limit; 0 = unlimited
  // Per request. A watch must answer within it and end within timeoutSeconds plus it.
  std::chrono::milliseconds request_timeout{30000};
};

// Where a kubeconfig comes from, and so what it may make this process do. A kubeconfig from a
// Secret (a target cluster's admin kubeconfig) is data written by whoever can write that Secret:
// it may not run a program on this host (exec credential plugins) nor make it read a file of its
// own (tokenFile, certificate-authority, client-certificate, client-key: the consumer's
// ServiceAccount token would be sent to any server the Secret names). Everything must be inline.
// An operator's own kubeconfig (a file they named) may do both, as kubectl's.
enum class KubeconfigSource { kSecret, kOperator };

// Parses kubeconfig YAML and picks `context` (empty = current-context). Supports token,
// tokenFile, client-certificate(-data), client-key(-data), certificate-authority(-data),
// insecure-skip-tls-verify, tls-server-name, proxy-url, username/password, as/as-uid/as-groups/
// as-user-extra and, from KubeconfigSource::kOperator only, exec and the file forms (relative
// paths resolve against `base_dir`).
Result<ClusterConfig> ParseKubeconfig(const std::string& yaml, const std::string& context = {},
                                      const std::string& base_dir = {},
                                      KubeconfigSource source = KubeconfigSource::kSecret);
// One file an operator named (exec plugins allowed). A missing file is kNotFound.
Result<ClusterConfig> LoadKubeconfigFile(const std::string& path, const std::string& context = {});

// Where a command-line tool finds its API server, in kubectl's order: the explicit file
// (--kubeconfig; it must exist), else the files of $KUBECONFIG (colon-separated; missing ones
// skipped) merged, else ~/.kube/config, else the in-cluster service account. Merging follows
// kubectl: the first file that names a cluster, user or context wins it whole, current-context
// comes from the first file that sets one, and relative paths resolve against the file that
// holds them. Exec plugins are allowed.
struct LoadingRules {
  std::string explicit_path;
  std::string kubeconfig_env;   // the value of $KUBECONFIG
  std::string home;             // $HOME, for ~/.kube/config
  std::string context;          // --context; empty = current-context
  std::string in_cluster_root;  // service-account directory override (tests)
};
// The rules from this process's environment ($KUBECONFIG, $HOME). Read before threads start.
LoadingRules LoadingRulesFromEnvironment(std::string explicit_path, std::string context);
Result<ClusterConfig> LoadClientConfig(const LoadingRules& rules);

// In-cluster: KUBERNETES_SERVICE_HOST/PORT,
// /var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt}. `root` overrides the
// service-account directory (tests).
Result<ClusterConfig> InClusterConfig(const std::string& root = {});

}  // namespace syncbus::kube
