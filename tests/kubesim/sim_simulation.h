// Simulation: everything the Kubernetes simulator serves, without a transport — the hub and the
// target clusters (one ApiServer each, with request counters and credentials), fault settings,
// the control API, the write journal and the fleet. Dispatch() turns one HTTP request into a Plan
// that the socket server and the in-process transport carry out alike, so their behaviour cannot
// diverge. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/http/server.h"
#include "common/json.h"
#include "common/status.h"
#include "tests/kubesim/api_server.h"
#include "tests/kubesim/faults.h"
#include "tests/kubesim/fleet.h"
#include "tests/kubesim/journal.h"
#include "tests/kubesim/request_tally.h"

namespace syncbus::kubesim {

// Requests counted per API server: total, in flight now, and the most in flight at once.
class RequestCounters {
 public:
  // Counts one request as in flight until the returned token is released.
  std::shared_ptr<void> Begin(RequestCounters* total);
  uint64_t requests() const { return requests_.load(); }
  uint64_t in_flight() const { return in_flight_.load(); }
  uint64_t peak_in_flight() const { return peak_.load(); }

 private:
  void Enter();
  void Leave();
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> in_flight_{0};
  std::atomic<uint64_t> peak_{0};
};

// One simulated API server.
struct SimCluster {
  std::string name;   // "hub" or the target's name
  std::string token;  // the bearer token it requires; empty = none
  std::unique_ptr<ApiServer> api;
  RequestCounters counters;
  RequestTally tally;  // by verb and resource
};

// What to do with one request, decided up front.
struct Plan {
  enum class Kind {
    kRespond,  // send `response` (control API, auth and routing errors, injected errors)
    kApi,      // answer with api->Handle(api_request)
    kWatch,    // start api->StartWatch(api_request, sink) and stream it
    kTimeout,  // never answer: the client gives up
    kDrop,     // drop the connection without an answer
  };
  Kind kind = Kind::kRespond;
  std::chrono::milliseconds delay{0};  // injected latency before acting
  ApiResponse response;
  ApiServer* api = nullptr;
  ApiRequest api_request;
  // kWatch: the client's timeoutSeconds, after which the transport ends the stream.
  std::optional<std::chrono::seconds> watch_timeout;
  // Keeps the request counted as in flight; release it once the answer is complete.
  std::shared_ptr<void> in_flight;
  // What kube-apiserver's filters add to every answer it gives, errors and watches included:
  // Cache-Control and this request's Audit-Id. Empty for the control API.
  http::Headers headers;

  // `response` with `headers` added.
  ApiResponse WithHeaders(ApiResponse response) const;
  // The headers of a kWatch stream.
  http::Headers StreamHeaders() const;
};

class Simulation {
 public:
  struct Options {
    FleetSpec fleet;    // targets are the fleet's clusters
    std::string token;  // required bearer token; empty = none
    // Every target requires its own random bearer token instead of `token` (which the hub keeps)
    // and its admin kubeconfig also carries a client key and certificate of its own.
    bool cluster_credentials = false;
    // Journal the successful writes of every API server to this file (journal.h); empty = none.
    std::string journal_path;
    std::string crd_dir;           // the hub's CRDs (*.yaml); empty = SYNCBUS_KUBESIM_CRD_DIR
    uint64_t seed = 1;             // fault draws
    FaultSpec faults;              // initial setting for every cluster and the hub
    const Clock* clock = nullptr;  // null = the real clock
    size_t watch_history = 0;      // ApiServer::Options::watch_history
  };

  static Result<std::unique_ptr<Simulation>> Create(Options options);
  ~Simulation();
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  // Writes the fleet's objects to the hub and the targets. `base_url` is where this simulation
  // is served ("http://127.0.0.1:PORT"): the admin kubeconfigs point below it, trusting
  // `ca_pem` when it is served over HTTPS. With cluster_credentials each kubeconfig gets its
  // cluster's token and a fresh client key and certificate.
  Result<FleetSummary> GenerateFleet(const std::string& base_url, const std::string& ca_pem = {});

  // Routes, authenticates and draws faults for one request; control requests are carried out
  // here and come back as kRespond.
  Plan Dispatch(const http::ServerRequest& request);

  ApiServer& hub() { return *hub_->api; }
  // A target by name; null if there is none.
  ApiServer* cluster(std::string_view name);
  const std::vector<std::string>& cluster_names() const { return names_; }
  FaultTable& faults() { return faults_; }
  const Options& options() const { return options_; }

  // Sends a BOOKMARK on every open watch of every API server (and ends expired watches).
  void SendBookmarks();
  // Returns once everything journaled so far is on disk (Journal::Flush); Ok without a journal.
  Status FlushJournal();
  // The body of GET /_sim/stats: requests per API server, and by verb and resource for the hub
  // ("hubRequests") and summed over the targets ("targetRequests").
  Json Stats() const;

 private:
  explicit Simulation(Options options);
  SimCluster* Find(std::string_view cluster);  // "" = the hub
  ApiResponse Control(const http::ServerRequest& request, const std::string& path);
  static bool Authorized(const SimCluster& cluster, const http::Headers& headers);
  // The credentials of `cluster`'s admin kubeconfig.
  Result<ClientAuth> AdminAuth(const std::string& cluster, const std::string& ca_pem);

  const Options options_;
  FaultTable faults_;
  RequestCounters total_;
  std::unique_ptr<Journal> journal_;  // outlives the API servers that append to it
  std::unique_ptr<SimCluster> hub_;
  std::map<std::string, std::unique_ptr<SimCluster>, std::less<>> clusters_;
  std::vector<std::string> names_;
};

// A metav1.Status error response.
ApiResponse SimStatusResponse(int code, const std::string& reason, const std::string& message);

}  // namespace syncbus::kubesim
