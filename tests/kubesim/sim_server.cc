// SimServer: carries out each request's Plan on the http::Server's loops.
#include "tests/kubesim/sim_server.h"

#include <fstream>
#include <sstream>

#include "tests/kubesim/sim_watch_sink.h"

namespace syncbus::kubesim {

Result<std::unique_ptr<SimServer>> SimServer::Start(Options options) {
  std::unique_ptr<SimServer> sim(new SimServer());
  sim->options_ = std::move(options);
  auto simulation = Simulation::Create(sim->options_.simulation);
  if (!simulation.ok()) return simulation.status();
  sim->simulation_ = std::move(*simulation);
  http::Server::Options server_options;
  server_options.host = sim->options_.host;
  server_options.port = sim->options_.port;
  server_options.threads = sim->options_.threads;
  server_options.tls_cert_file = sim->options_.tls_cert_file;
  server_options.tls_key_file = sim->options_.tls_key_file;
  if (!sim->options_.tls_cert_file.empty()) {
    std::ifstream cert(sim->options_.tls_cert_file);
    if (!cert.is_open()) return InvalidArgument("reading " + sim->options_.tls_cert_file);
    std::stringstream pem;
    pem << cert.rdbuf();
    sim->ca_pem_ = pem.str();
  }
  SimServer* raw = sim.get();
  auto server = http::Server::Start(
      server_options,
      [raw](const http::ServerRequest& request, std::shared_ptr<http::ResponseWriter> writer) {
        raw->Handle(request, std::move(writer));
      });
  if (!server.ok()) return server.status();
  sim->server_ = std::move(*server);
  // Wildcard listen addresses are not reachable as such: advertise loopback instead.
  const std::string& host = sim->options_.host;
  if (host.empty() || host == "0.0.0.0") {
    sim->host_for_urls_ = "127.0.0.1";
  } else if (host == "::") {
    sim->host_for_urls_ = "[::1]";
  } else {
    sim->host_for_urls_ = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  }
  auto fleet = sim->simulation_->GenerateFleet(sim->base_url(), sim->ca_pem_);
  if (!fleet.ok()) return fleet.status().Annotate("generating the fleet");
  sim->fleet_ = *fleet;
  sim->ScheduleBookmarks();
  return sim;
}

SimServer::~SimServer() {
  Stop();
}

void SimServer::Stop() {
  if (server_) server_->Stop();
  if (simulation_) simulation_->FlushJournal();  // a failure was logged by the journal
}

int SimServer::port() const {
  return server_->port();
}

std::string SimServer::base_url() const {
  return (ca_pem_.empty() ? "http://" : "https://") + host_for_urls_ + ":" + std::to_string(port());
}

std::string SimServer::HubKubeconfig() const {
  ClientAuth auth;
  auth.token = options_.simulation.token;
  auth.ca_pem = ca_pem_;
  return MakeKubeconfig("kubesim-hub", base_url(), auth);
}

void SimServer::ScheduleBookmarks() {
  if (options_.bookmark_interval.count() <= 0) return;
  server_->RunAfter(options_.bookmark_interval, [this] {
    simulation_->SendBookmarks();
    ScheduleBookmarks();
  });
}

void SimServer::Handle(const http::ServerRequest& request,
                       std::shared_ptr<http::ResponseWriter> writer) {
  Plan plan = simulation_->Dispatch(request);
  if (plan.delay.count() > 0) {
    // Latency on a timer: a slow request costs no thread.
    server_->RunAfter(plan.delay, [this, plan = std::move(plan), writer]() mutable {
      Execute(std::move(plan), writer);
    });
    return;
  }
  Execute(std::move(plan), writer);
}

void SimServer::Execute(Plan plan, const std::shared_ptr<http::ResponseWriter>& writer) {
  switch (plan.kind) {
    case Plan::Kind::kRespond: {
      ApiResponse response = plan.WithHeaders(std::move(plan.response));
      writer->Respond(response.status, std::move(response.headers), std::move(response.body));
      return;
    }
    case Plan::Kind::kApi:
      Answer(std::move(plan), writer, std::chrono::steady_clock::now() + ApiServer::kFreshnessWait);
      return;
    case Plan::Kind::kWatch: StartWatch(std::move(plan), writer); return;
    case Plan::Kind::kTimeout:
      // Never answered; counted in flight until the client hangs up.
      writer->OnClientClose([in_flight = std::move(plan.in_flight)] {});
      return;
    case Plan::Kind::kDrop: writer->Abort(); return;
  }
}

void SimServer::Answer(Plan plan, const std::shared_ptr<http::ResponseWriter>& writer,
                       std::chrono::steady_clock::time_point hold_until) {
  if (std::chrono::steady_clock::now() < hold_until && plan.api->MustWait(plan.api_request)) {
    server_->RunAfter(ApiServer::kFreshnessPoll,
                      [this, plan = std::move(plan), writer, hold_until]() mutable {
                        Answer(std::move(plan), writer, hold_until);
                      });
    return;
  }
  ApiResponse response = plan.WithHeaders(plan.api->Handle(plan.api_request));
  writer->Respond(response.status, std::move(response.headers), std::move(response.body));
}

void SimServer::StartWatch(Plan plan, const std::shared_ptr<http::ResponseWriter>& writer) {
  auto sink = std::make_shared<PendingWatchSink>();
  ApiServer* api = plan.api;
  auto started = api->StartWatch(plan.api_request, sink);
  if (auto* error = std::get_if<ApiResponse>(&started)) {
    sink->Discard();
    ApiResponse response = plan.WithHeaders(std::move(*error));
    writer->Respond(response.status, std::move(response.headers), std::move(response.body));
    return;
  }
  uint64_t id = std::get<uint64_t>(started);
  writer->StartStream(200, plan.StreamHeaders());
  sink->Open({[writer](std::string line) { return writer->WriteChunk(std::move(line)); },
              [writer] { writer->EndStream(); }});
  writer->OnClientClose([api, id] { api->StopWatch(id); });
  if (plan.watch_timeout) {
    // As kube-apiserver: the watch ends cleanly once the client's timeoutSeconds pass.
    server_->RunAfter(*plan.watch_timeout, [api, id, writer] {
      api->StopWatch(id);
      writer->EndStream();
    });
  }
}

}  // namespace syncbus::kubesim
