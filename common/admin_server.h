// AdminServer: each daemon's operations endpoint — /metrics (Prometheus text format from the
// process registry), /healthz (liveness: event loops responsive) and /readyz (readiness: e.g.
// connected and consuming). Hooks run on the server's loop thread and must be quick and
// thread-safe. Owns its http::Server; stops it on destruction.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <prometheus/registry.h>

#include "common/http/server.h"
#include "common/status.h"

namespace syncbus {

struct AdminConfig {
  std::string host = "0.0.0.0";  // /metrics, /healthz, /readyz
  int port = 8080;               // 0 = pick a free port (tests); -1 = disabled
};

class AdminServer {
 public:
  struct Hooks {
    std::function<Status()> healthy;       // null = always healthy
    std::function<Status()> ready;         // null = always ready
    std::function<void()> before_metrics;  // refreshes values read on demand; null = none
  };

  static Result<std::unique_ptr<AdminServer>> Start(const AdminConfig& config,
                                                    std::shared_ptr<prometheus::Registry> registry,
                                                    Hooks hooks);
  ~AdminServer();
  int port() const { return server_->port(); }

 private:
  AdminServer() = default;
  std::unique_ptr<http::Server> server_;
};

}  // namespace syncbus
