// SimServer: the Kubernetes simulator on a real socket — the Simulation served over http::Server
// (hub at the root, targets under /clusters/<name>, control API under /_sim/), with injected
// latency on timers, chunked watch streams, periodic bookmarks and the fleet generated at start.
// Used by the syncbus-kubesim binary and in-process by tests. Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/http/server.h"
#include "common/status.h"
#include "tests/kubesim/fleet.h"
#include "tests/kubesim/sim_simulation.h"

namespace syncbus::kubesim {

class SimServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = 0;                                       // 0 = a free port
    int threads = 2;                                    // event-loop threads
    std::chrono::milliseconds bookmark_interval{5000};  // 0 = no periodic bookmarks
    // Serve HTTPS with this PEM certificate and key; the kubeconfigs then trust the certificate
    // itself (fit for a self-signed one). Both empty = plain HTTP.
    std::string tls_cert_file;
    std::string tls_key_file;
    Simulation::Options simulation;
  };

  // Listens, generates the fleet, starts the bookmark timer; ready when this returns.
  static Result<std::unique_ptr<SimServer>> Start(Options options);
  ~SimServer();
  SimServer(const SimServer&) = delete;
  SimServer& operator=(const SimServer&) = delete;

  // Stops serving (open watches and pending requests are cut) and flushes the journal.
  // Idempotent.
  void Stop();

  int port() const;
  // "http://127.0.0.1:PORT" (https with TLS): the hub's server URL; a target's is
  // base_url() + "/clusters/<name>".
  std::string base_url() const;
  // A kubeconfig (YAML) for the hub, with the token when one is required.
  std::string HubKubeconfig() const;
  const FleetSummary& fleet() const { return fleet_; }
  Simulation& simulation() { return *simulation_; }

 private:
  SimServer() = default;
  void Handle(const http::ServerRequest& request, std::shared_ptr<http::ResponseWriter> writer);
  void Execute(Plan plan, const std::shared_ptr<http::ResponseWriter>& writer);
  // Answers a kApi plan once the API server need not hold it (ApiServer::MustWait) any more, or
  // at `hold_until`.
  void Answer(Plan plan, const std::shared_ptr<http::ResponseWriter>& writer,
              std::chrono::steady_clock::time_point hold_until);
  void StartWatch(Plan plan, const std::shared_ptr<http::ResponseWriter>& writer);
  void ScheduleBookmarks();

  Options options_;
  std::unique_ptr<Simulation> simulation_;
  std::unique_ptr<http::Server> server_;
  std::string host_for_urls_;
  std::string ca_pem_;  // the served certificate, when serving HTTPS
  FleetSummary fleet_;
};

}  // namespace syncbus::kubesim
