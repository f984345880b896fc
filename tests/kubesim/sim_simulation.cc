// Simulation: API servers, dispatch (routing, auth, faults) and the /_sim control API.
#include "tests/kubesim/sim_simulation.h"

#include <algorithm>
#include <charconv>
#include <exception>
#include <filesystem>

#include <strings.h>

#include "tests/kubesim/credentials.h"
#include "tests/kubesim/json_util.h"
#include "tests/kubesim/request_target.h"
#include "tests/kubesim/sim_router.h"

namespace syncbus::kubesim {
namespace {

constexpr const char* kHubName = "hub";

Json CountersJson(const SimCluster& cluster) {
  ApiServer::Stats stats = cluster.api->stats();
  return {{"requests", cluster.counters.requests()},
          {"inFlight", cluster.counters.in_flight()},
          {"peakInFlight", cluster.counters.peak_in_flight()},
          {"objects", stats.objects},
          {"openWatches", stats.open_watches}};
}

ApiResponse JsonOk(const Json& body) {
  ApiResponse response;
  response.status = 200;
  response.headers = {{"Content-Type", "application/json"}};
  response.body = body.dump();
  return response;
}

Result<std::vector<std::string>> CrdFiles(const std::string& dir) {
  std::error_code error;
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
  }
  if (error) return InvalidArgument("reading CRD directory " + dir + ": " + error.message());
  std::sort(files.begin(), files.end());
  if (files.empty()) return InvalidArgument("no CRD files (*.yaml) in " + dir);
  return files;
}

std::optional<std::chrono::seconds> WatchTimeout(const http::ServerRequest& request) {
  std::optional<std::string> text = request.QueryParam("timeoutSeconds");
  if (!text || text->empty()) return std::nullopt;
  long long seconds = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), seconds);
  if (ec != std::errc() || end != text->data() + text->size() || seconds <= 0) return std::nullopt;
  return std::chrono::seconds(seconds);
}

}  // namespace

ApiResponse Plan::WithHeaders(ApiResponse response) const {
  response.headers.insert(response.headers.end(), headers.begin(), headers.end());
  return response;
}

http::Headers Plan::StreamHeaders() const {
  http::Headers out = {{"Content-Type", "application/json"}};
  out.insert(out.end(), headers.begin(), headers.end());
  return out;
}

ApiResponse SimStatusResponse(int code, const std::string& reason, const std::string& message) {
  Json status = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", Json::object()},
                 {"status", "Failure"}, {"message", message}, {"reason", reason},
                 {"code", code}};
  ApiResponse response;
  response.status = code;
  response.headers = {{"Content-Type", "application/json"}};
  response.body = status.dump();
  return response;
}

void RequestCounters::Enter() {
  requests_.fetch_add(1, std::memory_order_relaxed);
  uint64_t now = in_flight_.fetch_add(1, std::memory_order_relaxed) + 1;
  uint64_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void RequestCounters::Leave() {
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
}

std::shared_ptr<void> RequestCounters::Begin(RequestCounters* total) {
  struct Token {
    Token(RequestCounters* c, RequestCounters* t) : counters(c), total(t) {}
    Token(const Token&) = delete;
    Token& operator=(const Token&) = delete;
    RequestCounters* counters;
    RequestCounters* total;
    ~Token() {
      counters->Leave();
      if (total != nullptr) total->Leave();
    }
  };
  Enter();
  if (total != nullptr) total->Enter();
  return std::make_shared<Token>(this, total);
}

Simulation::Simulation(Options options) : options_(std::move(options)), faults_(options_.seed) {}

Simulation::~Simulation() = default;

Result<std::unique_ptr<Simulation>> Simulation::Create(Options options) {
  SYNCBUS_RETURN_IF_ERROR(options.fleet.Validate());
  SYNCBUS_RETURN_IF_ERROR(options.faults.Validate());
  if (options.crd_dir.empty()) options.crd_dir = SYNCBUS_KUBESIM_CRD_DIR;
  auto crds = CrdFiles(options.crd_dir);
  if (!crds.ok()) return crds.status();
  std::unique_ptr<Simulation> sim(new Simulation(std::move(options)));
  SYNCBUS_RETURN_IF_ERROR(sim->faults_.SetDefault(sim->options_.faults));
  if (!sim->options_.journal_path.empty()) {
    auto journal = Journal::Open(sim->options_.journal_path);
    if (!journal.ok()) return journal.status();
    sim->journal_ = std::move(journal).value();
  }
  try {
    sim->hub_ = std::make_unique<SimCluster>();
    sim->hub_->name = kHubName;
    sim->hub_->token = sim->options_.token;
    ApiServer::Options api_options;
    api_options.watch_history = sim->options_.watch_history;
    api_options.clock = sim->options_.clock;
    api_options.name = kHubName;
    api_options.crd_files = *crds;
    api_options.journal = sim->journal_.get();
    sim->hub_->api = std::make_unique<ApiServer>(api_options);
    api_options.crd_files.clear();
    sim->names_ = FleetClusterNames(sim->options_.fleet.clusters);
    for (const std::string& name : sim->names_) {
      auto cluster = std::make_unique<SimCluster>();
      cluster->name = name;
      cluster->token = sim->options_.token;
      if (sim->options_.cluster_credentials) {
        auto token = NewBearerToken();
        if (!token.ok()) return token.status().Annotate("the token of " + name);
        cluster->token = std::move(token).value();
      }
      api_options.name = name;
      cluster->api = std::make_unique<ApiServer>(api_options);
      sim->clusters_.emplace(name, std::move(cluster));
    }
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("creating the simulated API servers: ") + e.what());
  }
  return sim;
}

Result<FleetSummary> Simulation::GenerateFleet(const std::string& base_url,
                                               const std::string& ca_pem) {
  auto summary = PopulateHub(*hub_->api, options_.fleet, base_url,
                             [&](const std::string& name) { return AdminAuth(name, ca_pem); });
  if (!summary.ok()) return summary.status();
  auto start = std::chrono::steady_clock::now();
  for (auto& [name, cluster] : clusters_) {
    auto seeded = SeedTarget(*cluster->api, options_.fleet);
    if (!seeded.ok()) return seeded.status().Annotate("seeding " + name);
    summary->target_namespaces += *seeded;
  }
  summary->elapsed += std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  return summary;
}

ApiServer* Simulation::cluster(std::string_view name) {
  auto it = clusters_.find(name);
  return it == clusters_.end() ? nullptr : it->second->api.get();
}

SimCluster* Simulation::Find(std::string_view cluster) {
  if (cluster.empty()) return hub_.get();
  auto it = clusters_.find(cluster);
  return it == clusters_.end() ? nullptr : it->second.get();
}

Result<ClientAuth> Simulation::AdminAuth(const std::string& cluster, const std::string& ca_pem) {
  SimCluster* target = Find(cluster);
  if (target == nullptr || cluster.empty()) return NotFound("no cluster " + cluster);
  ClientAuth auth;
  auth.token = target->token;
  auth.ca_pem = ca_pem;
  if (!options_.cluster_credentials) return auth;
  auto certificate = NewClientCertificate(cluster + "-admin");
  if (!certificate.ok()) return certificate.status();
  auth.client_cert_pem = std::move(certificate->cert_pem);
  auth.client_key_pem = std::move(certificate->key_pem);
  return auth;
}

bool Simulation::Authorized(const SimCluster& cluster, const http::Headers& headers) {
  if (cluster.token.empty()) return true;
  for (const auto& [name, value] : headers) {
    if (name.size() == 13 && strncasecmp(name.c_str(), "Authorization", 13) == 0) {
      return value.size() == 7 + cluster.token.size() && value.compare(0, 7, "Bearer ") == 0 &&
             value.compare(7, std::string::npos, cluster.token) == 0;
    }
  }
  return false;
}

Plan Simulation::Dispatch(const http::ServerRequest& request) {
  Plan plan;
  Route route = RouteRequest(request.path);
  if (route.kind == Route::Kind::kControl) {
    plan.response = Control(request, route.path);
    return plan;
  }
  SimCluster* target = Find(route.cluster);
  if (target == nullptr) {
    plan.response = SimStatusResponse(404, "NotFound",
                                      "cluster \"" + route.cluster + "\" is not simulated here");
    return plan;
  }
  plan.in_flight = target->counters.Begin(&total_);
  {
    RequestTarget parsed = ParseTarget(route.path);
    target->tally.Count(RequestVerb(request.method, parsed, QueryParams(request.query),
                                    http::FindHeader(request.headers, "Content-Type").value_or("")),
                        RequestResource(parsed));
  }
  plan.headers = {{"Audit-Id", NewUid()}, {"Cache-Control", "no-cache, private"}};
  if (!Authorized(*target, request.headers)) {
    plan.response = SimStatusResponse(401, "Unauthorized", "Unauthorized");
    return plan;
  }
  FaultDecision fault = faults_.Decide(target->name);
  plan.delay = fault.delay;
  switch (fault.action) {
    case FaultAction::kError500:
      plan.response = SimStatusResponse(500, "InternalError",
                                        "Internal error occurred: simulated server error");
      return plan;
    case FaultAction::kError503:
      plan.response = SimStatusResponse(503, "ServiceUnavailable",
                                        "the server is currently unable to handle the request");
      return plan;
    case FaultAction::kThrottle: {
      plan.response = SimStatusResponse(
          429, "TooManyRequests",
          "the server has received too many requests and has asked us to try again later");
      Json body = Json::parse(plan.response.body);
      body["details"] = {{"retryAfterSeconds", fault.retry_after_seconds}};
      plan.response.body = body.dump();
      plan.response.headers.emplace_back("Retry-After", std::to_string(fault.retry_after_seconds));
      return plan;
    }
    case FaultAction::kTimeout: plan.kind = Plan::Kind::kTimeout; return plan;
    case FaultAction::kDrop: plan.kind = Plan::Kind::kDrop; return plan;
    case FaultAction::kNone: break;
  }
  plan.api = target->api.get();
  plan.api_request = {request.method, route.path, request.query, request.headers, request.body};
  if (ApiServer::IsWatch(plan.api_request)) {
    plan.kind = Plan::Kind::kWatch;
    plan.watch_timeout = WatchTimeout(request);
  } else {
    plan.kind = Plan::Kind::kApi;
  }
  return plan;
}

ApiResponse Simulation::Control(const http::ServerRequest& request, const std::string& path) {
  const std::string& method = request.method;
  auto method_not_allowed = [&] {
    return SimStatusResponse(405, "MethodNotAllowed", method + " is not supported on /_sim" + path);
  };
  if (path == "/stats") {
    if (method != "GET") return method_not_allowed();
    return JsonOk(Stats());
  }
  if (path == "/clusters") {
    if (method != "GET") return method_not_allowed();
    return JsonOk({{"hub", kHubName}, {"clusters", names_}});
  }
  if (path == "/journal/flush") {
    if (method != "POST") return method_not_allowed();
    if (!journal_) {
      return SimStatusResponse(404, "NotFound",
                               "no journal: the simulator was started without one (--journal)");
    }
    Status flushed = journal_->Flush();
    if (!flushed.ok()) return SimStatusResponse(500, "InternalError", flushed.message());
    return JsonOk({{"journal", journal_->path()}, {"done", "flush"}});
  }
  if (path == "/faults") {
    if (method == "GET") return JsonOk(faults_.ToJson());
    if (method != "PUT") return method_not_allowed();
    Json body = Json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) return SimStatusResponse(400, "BadRequest", "the body is not JSON");
    Status applied = faults_.Apply(body, [this](const std::string& name) {
      return name == kHubName || clusters_.count(name) > 0;
    });
    if (!applied.ok()) {
      bool missing = applied.code() == Code::kNotFound;
      return SimStatusResponse(missing ? 404 : 400, missing ? "NotFound" : "BadRequest",
                               applied.message());
    }
    return JsonOk(faults_.ToJson());
  }
  // /hub/<action> or /clusters/<name>/<action>
  std::string rest;
  SimCluster* target = nullptr;
  if (path.rfind("/hub/", 0) == 0) {
    target = hub_.get();
    rest = path.substr(5);
  } else if (path.rfind("/clusters/", 0) == 0) {
    std::string tail = path.substr(10);
    size_t slash = tail.find('/');
    if (slash != std::string::npos) {
      std::string name = tail.substr(0, slash);
      target = Find(name);
      if (target == nullptr || name.empty()) {
        return SimStatusResponse(404, "NotFound", "cluster \"" + name + "\" is not simulated here");
      }
      rest = tail.substr(slash + 1);
    }
  }
  if (target != nullptr) {
    if (rest == "expire-history" || rest == "close-watches" || rest == "bookmarks") {
      if (method != "POST") return method_not_allowed();
      if (rest == "expire-history") target->api->ExpireHistory();
      if (rest == "close-watches") target->api->CloseAllWatches();
      if (rest == "bookmarks") target->api->SendBookmarks();
      return JsonOk({{"cluster", target->name}, {"done", rest}});
    }
    if (rest == "stats") {
      if (method != "GET") return method_not_allowed();
      return JsonOk(CountersJson(*target));
    }
  }
  return SimStatusResponse(404, "NotFound", "no simulator control endpoint /_sim" + path);
}

Status Simulation::FlushJournal() {
  return journal_ ? journal_->Flush() : Status::Ok();
}

void Simulation::SendBookmarks() {
  hub_->api->SendBookmarks();
  for (auto& [name, cluster] : clusters_) cluster->api->SendBookmarks();
}

Json Simulation::Stats() const {
  Json clusters = Json::object();
  clusters[kHubName] = CountersJson(*hub_);
  uint64_t objects = clusters[kHubName]["objects"].get<uint64_t>();
  uint64_t watches = clusters[kHubName]["openWatches"].get<uint64_t>();
  for (const auto& [name, cluster] : clusters_) {
    Json c = CountersJson(*cluster);
    objects += c["objects"].get<uint64_t>();
    watches += c["openWatches"].get<uint64_t>();
    clusters[name] = std::move(c);
  }
  Json total = {{"requests", total_.requests()},
                {"inFlight", total_.in_flight()},
                {"peakInFlight", total_.peak_in_flight()},
                {"objects", objects},
                {"openWatches", watches}};
  std::map<std::pair<std::string, std::string>, uint64_t> targets;
  for (const auto& [name, cluster] : clusters_) cluster->tally.AddTo(targets);
  return {{"total", std::move(total)},
          {"clusters", std::move(clusters)},
          {"hubRequests", hub_->tally.ToJson()},
          {"targetRequests", RequestTally::ToJson(targets)}};
}

}  // namespace syncbus::kubesim
