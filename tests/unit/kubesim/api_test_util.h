// Helpers for the kubesim engine's unit tests: a server on a FakeClock (optionally with the
// Hive CRDs), a whole Simulation, a recording WatchSink, and shorthands for requests and responses.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "common/http/transport.h"
#include "common/json.h"
#include "tests/fakes/common/fake_clock.h"
#include "tests/kubesim/api_server.h"
#include "tests/kubesim/sim_simulation.h"

namespace syncbus::kubesim::testing {

inline std::string CrdPath(const std::string& file) {
  return std::string(SYNCBUS_KUBESIM_CRD_DIR) + "/" + file;
}

inline std::vector<std::string> HiveCrds() {
  return {CrdPath("hive.openshift.io_clusterdeployments.yaml"),
          CrdPath("hive.openshift.io_syncsets.yaml"),
          CrdPath("hive.openshift.io_selectorsyncsets.yaml"),
          CrdPath("hiveinternal.openshift.io_clustersyncs.yaml"),
          CrdPath("hiveinternal.openshift.io_clustersyncleases.yaml")};
}

// Sends `request` through `transport` and waits up to 10 s for its answer (REQUIREd);
// `callback_thread`, when given, gets the thread the answer came on.
inline Result<http::Response> SendAndWait(http::Transport& transport, http::Request request,
                                          std::thread::id* callback_thread = nullptr) {
  std::promise<Result<http::Response>> promise;
  auto future = promise.get_future();
  transport.Send(std::move(request), [&](Result<http::Response> r) {
    if (callback_thread != nullptr) *callback_thread = std::this_thread::get_id();
    promise.set_value(std::move(r));
  });
  REQUIRE(future.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  return future.get();
}

struct Fixture {
  // `history`: ApiServer::Options::watch_history (0 = kube-apiserver's window).
  explicit Fixture(bool hive = false, size_t history = 0) {
    ApiServer::Options options;
    options.name = "test";
    options.clock = &clock;
    options.watch_history = history;
    if (hive) options.crd_files = HiveCrds();
    server = std::make_unique<ApiServer>(options);
  }
  FakeClock clock;
  std::unique_ptr<ApiServer> server;
};

inline Json Body(const ApiResponse& r) {
  return Json::parse(r.body, nullptr, false);
}

inline ApiResponse Raw(ApiServer& s, const std::string& method, const std::string& path,
                       const std::string& body, const std::string& content_type,
                       const std::string& query = {}) {
  ApiRequest req;
  req.method = method;
  req.path = path;
  req.query = query;
  req.body = body;
  if (!content_type.empty()) req.headers.emplace_back("Content-Type", content_type);
  return s.Handle(req);
}

inline Json ConfigMap(const std::string& name, const std::string& ns, Json data,
                      Json labels = Json::object()) {
  Json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata", {{"name", name}, {"namespace", ns}}},
             {"data", std::move(data)}};
  if (!labels.empty()) cm["metadata"]["labels"] = std::move(labels);
  return cm;
}

inline std::string CmPath(const std::string& ns, const std::string& name = {}) {
  std::string p = "/api/v1/namespaces/" + ns + "/configmaps";
  return name.empty() ? p : p + "/" + name;
}

inline std::string Rv(const Json& obj) {
  return obj["metadata"]["resourceVersion"].get<std::string>();
}

// Records watch lines; Send answers `alive`.
class RecordingSink : public WatchSink {
 public:
  bool Send(std::string line) override {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.push_back(std::move(line));
    return alive_;
  }
  void End() override {
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = true;
  }
  std::vector<Json> Events() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Json> out;
    for (const auto& l : lines_) out.push_back(Json::parse(l));
    return out;
  }
  std::vector<std::string> Lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.clear();
  }
  bool ended() {
    std::lock_guard<std::mutex> lock(mu_);
    return ended_;
  }
  void set_alive(bool alive) {
    std::lock_guard<std::mutex> lock(mu_);
    alive_ = alive;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
  bool ended_ = false;
  bool alive_ = true;
};

inline ApiRequest WatchRequest(const std::string& path, const std::string& query) {
  ApiRequest req;
  req.method = "GET";
  req.path = path;
  req.query = "watch=1" + (query.empty() ? std::string() : "&" + query);
  return req;
}

// A Simulation of `fleet` (fleet not generated yet: call GenerateFleet), requiring `token` if set.
inline std::unique_ptr<Simulation> MakeSimulation(FleetSpec fleet, std::string token = {}) {
  Simulation::Options options;
  options.fleet = fleet;
  options.token = std::move(token);
  auto sim = Simulation::Create(options);
  REQUIRE_MESSAGE(sim.ok(), sim.status().ToString());
  return std::move(sim).value();
}

}  // namespace syncbus::kubesim::testing
