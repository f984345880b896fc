#include "common/admin_server.h"

#include <prometheus/text_serializer.h>

namespace syncbus {

Result<std::unique_ptr<AdminServer>> AdminServer::Start(
    const AdminConfig& config, std::shared_ptr<prometheus::Registry> registry, Hooks hooks) {
  auto handler = [registry = std::move(registry), hooks = std::move(hooks)](
                     const http::ServerRequest& req, std::shared_ptr<http::ResponseWriter> w) {
    auto probe = [&](const std::function<Status()>& check) {
      Status s = check ? check() : Status::Ok();
      if (s.ok()) {
        w->Respond(200, {{"Content-Type", "text/plain"}}, "ok\n");
      } else {
        w->Respond(503, {{"Content-Type", "text/plain"}}, s.ToString() + "\n");
      }
    };
    if (req.method != "GET" && req.method != "HEAD") {
      w->Respond(405, {{"Content-Type", "text/plain"}}, "method not allowed\n");
    } else if (req.path == "/metrics") {
      if (hooks.before_metrics) hooks.before_metrics();
      prometheus::TextSerializer serializer;
      w->Respond(200, {{"Content-Type", "text/plain; version=0.0.4"}},
                 serializer.Serialize(registry->Collect()));
    } else if (req.path == "/healthz") {
      probe(hooks.healthy);
    } else if (req.path == "/readyz") {
      probe(hooks.ready);
    } else {
      w->Respond(404, {{"Content-Type", "text/plain"}},
                 "not found: try /metrics, /healthz, /readyz\n");
    }
  };
  http::Server::Options options;
  options.host = config.host;
  options.port = config.port;
  auto server = http::Server::Start(options, std::move(handler));
  if (!server.ok())
    return server.status().Annotate("admin endpoint " + config.host + ":" +
                                    std::to_string(config.port));
  std::unique_ptr<AdminServer> admin(new AdminServer());
  admin->server_ = std::move(*server);
  return admin;
}

AdminServer::~AdminServer() {
  if (server_) server_->Stop();
}

}  // namespace syncbus
