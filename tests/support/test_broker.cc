#include "tests/support/test_broker.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <utility>

#include <curl/curl.h>
#include <doctest/doctest.h>

#include "tests/support/env_file.h"

namespace syncbus::testing {
namespace {

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
struct CurlStringDeleter {
  void operator()(char* s) const { curl_free(s); }
};

size_t AppendBody(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

Result<int> ParsePort(const std::map<std::string, std::string>& kv, const std::string& key) {
  auto it = kv.find(key);
  if (it == kv.end()) return InvalidArgument("broker env: missing " + key);
  char* end = nullptr;
  long port = std::strtol(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || port < 1 || port > 65535) {
    return InvalidArgument("broker env: " + key + " is not a port: " + it->second);
  }
  return static_cast<int>(port);
}

std::string RandomHex(int digits) {
  std::random_device device;
  std::mt19937_64 engine((uint64_t(device()) << 32) ^ device());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < digits; ++i) out += kHex[engine() % 16];
  return out;
}

Result<BrokerEnv> BrokerEnvOf(EnvFile kv) {
  BrokerEnv env;
  for (auto [key, field] :
       {std::pair{"SYNCBUS_AMQP_HOST", &env.host}, std::pair{"SYNCBUS_BROKER_USER", &env.user},
        std::pair{"SYNCBUS_BROKER_PASSWORD", &env.password},
        std::pair{"SYNCBUS_MGMT_URL", &env.mgmt_url}}) {
    Result<std::string> value = EnvValue(kv, key, "broker env");
    if (!value.ok()) return value.status();
    *field = *value;
  }
  env.node = kv.count("SYNCBUS_BROKER_NODE") ? kv["SYNCBUS_BROKER_NODE"] : "";
  env.version = kv.count("SYNCBUS_RABBITMQ_VERSION") ? kv["SYNCBUS_RABBITMQ_VERSION"] : "3.10";
  env.dir = kv.count("SYNCBUS_BROKER_DIR") ? kv["SYNCBUS_BROKER_DIR"] : "";
  env.tls_dir = kv.count("SYNCBUS_TLS_DIR") ? kv["SYNCBUS_TLS_DIR"] : "";
  for (auto [key, field] : {std::pair{"SYNCBUS_AMQP_PORT", &env.amqp_port},
                            std::pair{"SYNCBUS_MGMT_PORT", &env.mgmt_port},
                            std::pair{"SYNCBUS_PROMETHEUS_PORT", &env.prometheus_port}}) {
    auto port = ParsePort(kv, key);
    if (!port.ok()) return port.status();
    *field = *port;
  }
  while (!env.mgmt_url.empty() && env.mgmt_url.back() == '/') env.mgmt_url.pop_back();
  return env;
}

}  // namespace

Result<BrokerEnv> ParseBrokerEnv(const std::string& text) {
  Result<EnvFile> parsed = ParseEnvFile(text, "broker env");
  if (!parsed.ok()) return parsed.status();
  return BrokerEnvOf(std::move(*parsed));
}

Result<BrokerEnv> LoadBrokerEnv() {
  Result<EnvFile> file = LoadEnvFile(
      "SYNCBUS_TEST_BROKER_ENV", "broker env",
      "run through ctest, or point it at a broker.env written by scripts/rabbitmq-node");
  if (!file.ok()) return file.status();
  return BrokerEnvOf(std::move(*file));
}

std::string ManagementApi::Escape(const std::string& segment) {
  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  std::unique_ptr<char, CurlStringDeleter> escaped(
      curl_easy_escape(curl.get(), segment.data(), static_cast<int>(segment.size())));
  return escaped ? std::string(escaped.get()) : segment;
}

Result<ManagementApi::Response> ManagementApi::Call(const std::string& method,
                                                    const std::string& path,
                                                    const std::string& body) const {
  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  if (!curl) return Internal("curl_easy_init failed");
  const std::string url = env_.mgmt_url + path;
  const std::string credentials = env_.user + ":" + env_.password;
  std::unique_ptr<curl_slist, SlistDeleter> headers(
      curl_slist_append(nullptr, "Content-Type: application/json"));
  headers.reset(curl_slist_append(headers.release(), "X-Reason: closed by a syncbus test"));
  Response response;
  curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_USERPWD, credentials.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT_MS, 30000L);
  curl_easy_setopt(curl.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, &AppendBody);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &response.body);
  if (!body.empty()) {
    curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  CURLcode rc = curl_easy_perform(curl.get());
  if (rc != CURLE_OK) {
    return Unavailable(method + " " + url + ": " + curl_easy_strerror(rc));
  }
  curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

Result<Json> ManagementApi::Get(const std::string& path) const {
  auto r = Call("GET", path);
  if (!r.ok()) return r.status();
  if (r->status == 404) return NotFound("GET " + path + ": 404 " + r->body);
  if (r->status / 100 != 2) {
    return Unavailable("GET " + path + ": HTTP " + std::to_string(r->status) + " " + r->body);
  }
  Json parsed = Json::parse(r->body, nullptr, false);
  if (parsed.is_discarded()) return Internal("GET " + path + ": response is not JSON");
  return parsed;
}

TestVhost::TestVhost(BrokerEnv env, std::string name)
    : env_(std::move(env)), name_(std::move(name)), api_(env_) {}

TestVhost::TestVhost(TestVhost&& other) noexcept
    : env_(std::move(other.env_)),
      name_(std::move(other.name_)),
      api_(std::move(other.api_)),
      owned_(std::exchange(other.owned_, false)) {}

Result<TestVhost> TestVhost::Create() {
  auto env = LoadBrokerEnv();
  if (!env.ok()) return env.status();
  return Create(*env);
}

Result<TestVhost> TestVhost::Create(const BrokerEnv& env) {
  TestVhost vhost(env, "test-" + RandomHex(12));
  const std::string v = ManagementApi::Escape(vhost.name_);
  auto created = vhost.api_.Call("PUT", "/api/vhosts/" + v, "{}");
  if (!created.ok()) return created.status();
  if (created->status / 100 != 2) {
    return Unavailable("creating vhost " + vhost.name_ + ": HTTP " +
                       std::to_string(created->status) + " " + created->body);
  }
  auto granted =
      vhost.api_.Call("PUT", "/api/permissions/" + v + "/" + ManagementApi::Escape(env.user),
                      R"({"configure":".*","write":".*","read":".*"})");
  if (!granted.ok()) return granted.status();
  if (granted->status / 100 != 2) {
    return Unavailable("granting permissions on vhost " + vhost.name_ + ": HTTP " +
                       std::to_string(granted->status) + " " + granted->body);
  }
  return vhost;
}

TestVhost::~TestVhost() {
  if (owned_) (void)api_.Call("DELETE", "/api/vhosts/" + ManagementApi::Escape(name_));
}

amqp::ConnectionOptions TestVhost::Options(const std::string& connection_name) const {
  amqp::ConnectionOptions o;
  o.host = env_.host;
  o.port = env_.amqp_port;
  o.vhost = name_;
  o.user = env_.user;
  o.password = env_.password;
  o.connection_name = connection_name;
  return o;
}

std::string TestVhost::ConfigYaml(const std::string& more) const {
  return "amqp: {host: " + env_.host + ", port: " + std::to_string(env_.amqp_port) +
         ", vhost: " + name_ + ", user: " + env_.user + ", password: \"" + env_.password + "\"" +
         more + "}\n";
}

Status TestVhost::ApplyPolicies(const std::vector<amqp::PolicySpec>& policies) const {
  for (const amqp::PolicySpec& p : policies) {
    Json body = {{"pattern", p.pattern},
                 {"apply-to", p.apply_to},
                 {"priority", p.priority},
                 {"definition", p.definition}};
    auto put = api_.Call(
        "PUT",
        "/api/policies/" + ManagementApi::Escape(name_) + "/" + ManagementApi::Escape(p.name),
        body.dump());
    if (!put.ok()) return put.status();
    if (put->status / 100 != 2) {
      return InvalidArgument("policy " + p.name + " on vhost " + name_ + ": HTTP " +
                             std::to_string(put->status) + " " + put->body);
    }
  }
  return Status::Ok();
}

Status TestVhost::SetUpSyncbus(amqp::Session& session, const amqp::TopologyOptions& options) const {
  amqp::Topology topology = amqp::SyncbusTopology(options);
  SYNCBUS_RETURN_IF_ERROR(ApplyPolicies(topology.policies));
  return amqp::DeclareTopology(session, topology);
}

Result<Json> TestVhost::QueueStats(const std::string& queue) const {
  return api_.Get("/api/queues/" + ManagementApi::Escape(name_) + "/" +
                  ManagementApi::Escape(queue));
}

Result<int> TestVhost::CloseConnections(const std::string& connection_name,
                                        std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto list = api_.Get("/api/vhosts/" + ManagementApi::Escape(name_) + "/connections");
    if (!list.ok()) return list.status();
    int closed = 0;
    for (const auto& c : *list) {
      const Json& props = c.value("client_properties", Json::object());
      if (props.value("connection_name", "") != connection_name) continue;
      auto r =
          api_.Call("DELETE", "/api/connections/" + ManagementApi::Escape(c.value("name", "")));
      if (!r.ok()) return r.status();
      if (r->status / 100 == 2) ++closed;
    }
    if (closed > 0) return closed;
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status(Code::kTimeout, "no connection named " + connection_name + " in vhost " +
                                        name_ + " appeared in the management API");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

TestVhost NewTestVhost() {
  auto vhost = TestVhost::Create();
  REQUIRE_MESSAGE(vhost.ok(), vhost.status().ToString());
  return std::move(*vhost);
}

}  // namespace syncbus::testing
