// The shared RabbitMQ fixture for integration tests: its connection details (the env file named
// by $SYNCBUS_TEST_BROKER_ENV), a fresh vhost per test (TestVhost, deleted on destruction) and
// management-API helpers (queue stats, forced connection close). Thread-compatible.
#pragma once

#include <chrono>
#include <string>

#include "common/amqp/session.h"
#include "common/amqp/topology.h"
#include "common/bus/topology.h"
#include "common/json.h"
#include "common/status.h"

namespace syncbus::testing {

// KEY=VALUE lines written by scripts/rabbitmq-node.
struct BrokerEnv {
  std::string host;
  std::string version;  // SYNCBUS_RABBITMQ_VERSION: 3.10 or 4.0
  int amqp_port = 0;
  int mgmt_port = 0;
  int prometheus_port = 0;
  std::string user;
  std::string password;
  std::string node;
  std::string dir;
  std::string tls_dir;   // SYNCBUS_TLS_DIR: the node's CA and client certificates ("" without TLS)
  std::string mgmt_url;  // http://127.0.0.1:PORT
};

// Parses the env file's text. kInvalidArgument names a missing or malformed key.
Result<BrokerEnv> ParseBrokerEnv(const std::string& text);
// Reads the file named by $SYNCBUS_TEST_BROKER_ENV (kNotFound when unset or unreadable).
Result<BrokerEnv> LoadBrokerEnv();

// The management HTTP API with the fixture's credentials (libcurl, one request at a time).
class ManagementApi {
 public:
  struct Response {
    long status = 0;
    std::string body;
  };
  explicit ManagementApi(BrokerEnv env) : env_(std::move(env)) {}

  // `path` starts with /api/. Transport failures are kUnavailable; HTTP errors are Responses.
  Result<Response> Call(const std::string& method, const std::string& path,
                        const std::string& body = "") const;
  // GET with a 2xx answer parsed as JSON; 404 -> kNotFound, other statuses -> kUnavailable.
  Result<Json> Get(const std::string& path) const;

  // Percent-encodes one path segment (vhost, queue or connection name).
  static std::string Escape(const std::string& segment);

 private:
  BrokerEnv env_;
};

class TestVhost {
 public:
  // Creates vhost "test-<random hex>" and grants the fixture user every permission on it.
  static Result<TestVhost> Create(const BrokerEnv& env);
  static Result<TestVhost> Create();  // with LoadBrokerEnv()

  TestVhost(TestVhost&& other) noexcept;
  TestVhost& operator=(TestVhost&&) = delete;
  TestVhost(const TestVhost&) = delete;
  ~TestVhost();  // deletes the vhost and everything in it

  const std::string& name() const { return name_; }
  const BrokerEnv& env() const { return env_; }
  const ManagementApi& api() const { return api_; }

  // Options for a Session on this vhost, shown in the management UI as `connection_name`.
  amqp::ConnectionOptions Options(const std::string& connection_name) const;
  // The same connection as the `amqp:` line of a syncbus.yaml (flow style, ending in a newline);
  // `more` adds fields, e.g. ", heartbeatSeconds: 10".
  std::string ConfigYaml(const std::string& more = "") const;

  // Puts `policies` on this vhost (PUT /api/policies/...), as the shipped definitions and
  // deploy/ do for syncbus's own; an error names the policy the broker refused.
  Status ApplyPolicies(const std::vector<amqp::PolicySpec>& policies) const;
  // syncbus's topology for `options` as a deployment sets it up: its policies on this vhost,
  // then the daemons' declaration over `session` (connected to this vhost).
  Status SetUpSyncbus(amqp::Session& session, const amqp::TopologyOptions& options = {}) const;

  // GET /api/queues/<vhost>/<queue>: the management view (its counts lag by seconds).
  Result<Json> QueueStats(const std::string& queue) const;

  // Force-closes this vhost's connections whose client connection_name matches, as an operator
  // would (DELETE /api/connections/<name>); waits up to `timeout` for the management API to
  // list them. Returns how many were closed (kTimeout when none showed up).
  Result<int> CloseConnections(const std::string& connection_name,
                               std::chrono::milliseconds timeout) const;

 private:
  TestVhost(BrokerEnv env, std::string name);

  BrokerEnv env_;
  std::string name_;
  ManagementApi api_;
  bool owned_ = true;
};

// TestVhost::Create() inside a doctest test case: failing to create one fails the test.
TestVhost NewTestVhost();

}  // namespace syncbus::testing
