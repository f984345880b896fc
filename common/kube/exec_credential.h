// ExecCredentialPlugin: runs a kubeconfig user's exec credential plugin as kubectl does
// (client.authentication.k8s.io/v1 and v1beta1: the ExecCredential input in
// KUBERNETES_EXEC_INFO, the configured args and env, interactiveMode, provideClusterInfo) and
// keeps what it printed until its expirationTimestamp passes or the server refuses it (401).
// Thread-safe: the plugin runs on the calling thread, one run at a time (an interactive plugin
// asks its user once); other callers wait for that run.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/http/types.h"
#include "common/kube/config.h"
#include "common/status.h"

namespace syncbus::kube {

class ExecCredentialPlugin {
 public:
  struct Credential {
    std::string token;                            // empty when the plugin gave a certificate
    std::shared_ptr<const http::TlsOptions> tls;  // the base TLS options plus the plugin's
                                                  // client certificate; null without one
    std::optional<WallTime> expires;              // none: valid until the server refuses it
  };
  // The plugin's view of this process's standard streams: stdin is handed to it only when it
  // runs interactively (IfAvailable on a terminal, or Always); its stderr is this process's.
  struct Terminal {
    bool stdin_is_terminal = false;
  };
  static Terminal ThisProcessTerminal();

  // `base_tls` (not null) is the cluster's TLS options, which a client certificate from the
  // plugin is added to. `clock` must outlive the plugin.
  ExecCredentialPlugin(std::shared_ptr<const ExecConfig> config,
                       std::shared_ptr<const http::TlsOptions> base_tls, const Clock& clock,
                       Terminal terminal = ThisProcessTerminal());

  // The cached credential while it has not expired or been refused, else a fresh one from a run
  // of the plugin. Errors (kUnauthorized) say what went wrong as kubectl says it: the executable
  // not found (with the kubeconfig's installHint), its exit code, output that is no
  // ExecCredential of the configured apiVersion, no token nor certificate and key.
  Result<std::shared_ptr<const Credential>> Get();

  // The server answered 401 to a request made with `credential`: the next Get runs the plugin
  // again (unless it ran since).
  void Rejected(const std::shared_ptr<const Credential>& credential);

 private:
  Result<std::shared_ptr<const Credential>> RunLocked();

  const std::shared_ptr<const ExecConfig> config_;
  const std::shared_ptr<const http::TlsOptions> base_tls_;
  const Clock& clock_;
  const Terminal terminal_;
  std::mutex mu_;  // held while the plugin runs
  std::shared_ptr<const Credential> cached_;
};

// The ExecCredential input of a run (KUBERNETES_EXEC_INFO), exposed for tests.
std::string ExecCredentialInput(const ExecConfig& config, bool interactive);

}  // namespace syncbus::kube
