// Daemon scaffolding shared by the binaries' thin mains: config and logging at start, stop
// signals, the hub connection from config (kubeconfig file or in-cluster service account),
// running with the admin endpoint, and sleeping that wakes on stop.
// Functions are thread-safe; the stop flag is process-wide.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/admin_server.h"
#include "common/bus/config.h"
#include "common/http/curl_transport.h"
#include "common/kube/client.h"
#include "common/kube/client_impl.h"
#include "common/kube/config.h"
#include "common/status.h"

namespace syncbus {

// The namespace this process runs in: $POD_NAMESPACE (the downward API), else the service
// account's namespace file, else "syncbus" (outside a cluster).
std::string OwnNamespace(
    const std::string& service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount");
// How the binaries read the config file: OwnNamespace() for the namespaces it leaves out, unknown
// keys as warnings unless `strict`.
ConfigOptions DaemonConfigOptions(bool strict);

// Loads the config file and starts logging as `component` ("consumer"); logs the keys it ignored
// as warnings. On error prints "syncbus-<component>: <message>" to stderr and returns nullopt:
// the main exits 2.
std::optional<Config> LoadDaemonConfig(const std::string& path, const std::string& component,
                                       bool strict);

// Installs SIGTERM/SIGINT handlers that set the returned flag (idempotent).
const std::atomic<bool>& InstallStopSignals();

// The daemons' hub: kubeconfig (+ context) when configured, else the in-cluster service account.
Result<kube::ClusterConfig> HubClusterConfig(const HubConfig& hub);
// syncbusctl's hub: hub.kubeconfig when set (--kubeconfig, else the config file's), else
// kubectl's lookup ($KUBECONFIG merged, ~/.kube/config, in-cluster; kube::LoadClientConfig), with
// hub.context (--context, else the config file's) picking the context.
Result<kube::ClusterConfig> CommandLineHubConfig(const HubConfig& hub);

// A client of the hub and the transport under it (shared: other clients may use it too).
struct HubConnection {
  std::shared_ptr<http::CurlTransport> transport;
  std::shared_ptr<kube::ClientImpl> client;
};
// Creates the transport and the hub client. The client's requests are counted and timed in
// `registry` as syncbus_hub_requests_total{method,code} and syncbus_hub_request_duration_seconds
// (http::MeteredTransport); other clients of the transport are not. On error logs "cannot start"
// and returns nullopt: the main exits 1.
// `user_agent` names the process to the hub ("syncbus-consumer/<identity>"), so the hub's audit
// log tells replicas apart.
std::optional<HubConnection> NewHubConnection(const HubConfig& hub,
                                              const http::CurlTransport::Options& transport_options,
                                              prometheus::Registry& registry,
                                              const std::string& user_agent);

// Runs the daemon's loop (`run`, until stop) with the admin endpoint serving the `healthy` and
// `ready` probes unless disabled, then logs "<component> stopped". /metrics also carries
// `transport`'s counters (see http::TransportMetrics) and syncbus_build_info
// (common/build_info.h). Returns the exit code: 1 when the admin endpoint cannot start or `run`
// fails, else 0.
int RunDaemon(const AdminConfig& admin, std::shared_ptr<prometheus::Registry> registry,
              std::shared_ptr<http::CurlTransport> transport, std::function<Status()> healthy,
              std::function<Status()> ready, const std::function<Status()>& run,
              const std::string& component);

// Sleeps up to `d`, returning early once `stop` is set.
void SleepUnlessStopped(std::chrono::milliseconds d, const std::atomic<bool>& stop);
// An amqp::Reconnector's wait: SleepUnlessStopped, calling `beat` before and after (the daemon's
// liveness probe sees a loop that waits on purpose), and `go_on` after; false (stop trying)
// once stopping or when `go_on` says so. `go_on` null: always.
std::function<bool(Duration)> WaitUnlessStopped(const std::atomic<bool>& stop,
                                                std::function<void()> beat,
                                                std::function<bool()> go_on = nullptr);

}  // namespace syncbus
