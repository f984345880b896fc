#include "common/bus/config.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <doctest/doctest.h>
#include <unistd.h>

#include "common/bus/daemon.h"

using namespace syncbus;
using namespace std::chrono_literals;

TEST_CASE("empty config gives the documented defaults") {
  auto c = ParseConfig("");
  REQUIRE(c.ok());
  CHECK(c->publisher.resync_interval == std::chrono::hours(2));
  CHECK(c->publisher.leader_election.lease_duration == 10s);
  CHECK(c->publisher.leader_election.renew_deadline == 7s);
  CHECK(c->publisher.leader_election.retry_period == 2s);
  CHECK(c->amqp.heartbeat_seconds == 10);
  CHECK(c->topology.retry_tiers.size() == 4);
  CHECK(c->consumer.prefetch == 20);
  CHECK(c->consumer.max_connections_per_host == 32);
  CHECK(c->consumer.cluster_lease.duration == 20s);
  CHECK(c->consumer.cluster_lease.renew_interval == 5s);
  CHECK(c->consumer.cluster_lease.safety_margin == 5s);
  CHECK(c->consumer.events);
  CHECK(c->consumer.preview_workers == 16);
  CHECK(c->publisher.watch_source_secrets);
  CHECK(c->publisher.bulk_edit_clusters == 100);
  CHECK(c->publisher.round_clusters == 1000);
  CHECK(c->admin.port == 8080);
}

TEST_CASE("a full config is read") {
  auto c = ParseConfig(R"(
log: {level: debug, format: json}
admin: {listen: "127.0.0.1:9090"}
amqp: {host: rabbit, port: 5671, vhost: prod, user: u, password: p, heartbeatSeconds: 10}
hub: {kubeconfig: /etc/kubeconfig, context: hub}
topology: {retryTiers: [1s, 10s], deliveryLimit: 3, maxLength: 1000, traceMaxAge: 2h, traceMaxMiB: 64}
publisher:
  resyncInterval: 30m
  maxPublishRate: 100
  bulkEditClusters: 20
  roundClusters: 50
  watchSourceSecrets: false
  leaderElection: {leaseDuration: 20s, renewDeadline: 12s, retryPeriod: 3s}
consumer:
  prefetch: 5
  maxAttempts: 4
  requestTimeout: 10s
  maxConnectionsPerHost: 0
  maxIdleConnections: 0
  idleConnectionTimeout: 0s
  targetClients: 50
  events: false
  clusterLease: {duration: 60s, renewInterval: 15s, safetyMargin: 20s}
)");
  REQUIRE(c.ok());
  CHECK(c->log.format == "json");
  CHECK(c->admin.host == "127.0.0.1");
  CHECK(c->admin.port == 9090);
  CHECK(c->amqp.host == "rabbit");
  CHECK(c->amqp.port == 5671);
  CHECK(c->topology.retry_tiers == std::vector<std::chrono::seconds>{1s, 10s});
  CHECK(c->topology.trace_max_age == 2h);
  CHECK(c->topology.trace_max_bytes == 64 << 20);
  CHECK(c->publisher.resync_interval == 30min);
  CHECK(c->publisher.leader_election.retry_period == 3s);
  CHECK(c->publisher.bulk_edit_clusters == 20);
  CHECK(c->publisher.round_clusters == 50);
  CHECK(c->consumer.max_attempts == 4);
  CHECK(c->consumer.max_connections_per_host == 0);
  CHECK(c->consumer.max_idle_connections == 0);
  CHECK(c->consumer.idle_connection_timeout == 0s);
  CHECK(c->consumer.target_clients == 50);
  CHECK(c->consumer.cluster_lease.duration == 60s);
  CHECK(c->consumer.cluster_lease.renew_interval == 15s);
  CHECK(c->consumer.cluster_lease.safety_margin == 20s);
  CHECK_FALSE(c->consumer.events);
  CHECK_FALSE(c->publisher.watch_source_secrets);
}

TEST_CASE("config errors name the bad key") {
  struct Case {
    const char* yaml;
    const char* expect;
  };
  Case cases[] = {
      {"publisher: {resyncIntreval: 1h}", "publisher.resyncIntreval: unknown key"},
      {"amqp: {port: abc}", "amqp.port: expected an integer"},
      {"amqp: {port: 70000}", "amqp.port: must be between"},
      {"publisher: {resyncInterval: soon}", "publisher.resyncInterval: invalid duration"},
      {"log: {level: loud}", "log.level"},
      {"topology: {retryTiers: [30s, 5s]}", "topology.retryTiers[1]: tiers must increase"},
      {"topology: {traceMaxAge: 10s}", "topology.traceMaxAge: must be at least 1m"},
      {"topology: {traceMaxAge: 90500ms}", "topology.traceMaxAge: must be whole seconds"},
      {"topology: {traceMaxMiB: 1}", "topology.traceMaxMiB: must be between 16"},
      {"publisher: {leaderElection: {leaseDuration: 5s, renewDeadline: 10s}}", "renewDeadline"},
      {"admin: {listen: nowhere}", "admin.listen"},
      {"amqp: [1, 2]", "amqp: expected a mapping"},
      {"a: b: c", "invalid YAML"},
      {"bogus: 1", "bogus: unknown key"},
      {"consumer: {clusterLease: {duration: 1500ms}}",
       "consumer.clusterLease.duration: must be a whole number"},
      {"consumer: {clusterLease: {duration: 10s}}",
       "consumer.clusterLease.renewInterval: renewInterval + safetyMargin"},
      {"consumer: {clusterLease: {lease: 15s}}", "consumer.clusterLease.lease: unknown key"},
      {"consumer: {clusterLease: {sticky: true}, hubMirror: {enabled: false}}",
       "consumer.clusterLease.sticky: sticky claims need the hub mirror"},
      {"consumer: {events: maybe}", "consumer.events"},
      {"consumer: {maxConnectionsPerHost: -1}", "consumer.maxConnectionsPerHost: must be between"},
      {"consumer: {targetClients: 0}", "consumer.targetClients: must be between"},
      {"consumer: {previewWorkers: -1}", "consumer.previewWorkers: must be between"},
      {"consumer: {idleConnectionTimeout: -1s}", "consumer.idleConnectionTimeout"},
      {"publisher: {bulkEditClusters: 0}", "publisher.bulkEditClusters: must be between"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.yaml);
    auto r = ParseConfig(c.yaml, "test.yaml", ConfigOptions{.strict = true});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find(c.expect) != std::string::npos);
    CHECK(r.status().message().rfind("test.yaml", 0) == 0);
  }
}

TEST_CASE("unknown keys are warnings unless strict: an older version starts under a newer file") {
  const char* newer = R"(
publisher: {resyncInterval: 30m, futureKnob: 3, leaderElection: {futureMode: fast}}
futureSection: {a: 1}
consumer: {prefetch: 7}
)";
  auto lenient = ParseConfig(newer, "newer.yaml");
  REQUIRE(lenient.ok());
  CHECK(lenient->publisher.resync_interval == std::chrono::minutes(30));
  CHECK(lenient->consumer.prefetch == 7);
  REQUIRE(lenient->warnings.size() == 3);
  CHECK(lenient->warnings[0].rfind("newer.yaml: futureSection: unknown key (known keys: ", 0) == 0);
  CHECK(lenient->warnings[1].rfind("newer.yaml: publisher.futureKnob: unknown key", 0) == 0);
  CHECK(lenient->warnings[2].rfind("newer.yaml: publisher.leaderElection.futureMode: unknown key",
                                   0) == 0);
  CHECK(lenient->warnings[2].find("; ignored") != std::string::npos);

  auto strict = ParseConfig(newer, "newer.yaml", ConfigOptions{.strict = true});
  REQUIRE_FALSE(strict.ok());
  CHECK(strict.status().message().find("newer.yaml: futureSection: unknown key") == 0);

  // A known key with a bad value stays an error: it would not mean what the file says.
  CHECK_FALSE(ParseConfig("futureSection: 1\npublisher: {resyncInterval: soon}").ok());
  CHECK(ParseConfig("log: {level: info}")->warnings.empty());
}

TEST_CASE("the leader election's namespace the file leaves out is the namespace syncbus runs in") {
  auto defaulted = ParseConfig("publisher: {leaderElection: {namespace: \"\"}}", "c.yaml",
                               ConfigOptions{.own_namespace = "hive-syncbus"});
  REQUIRE(defaulted.ok());
  CHECK(defaulted->publisher.leader_election.ns == "hive-syncbus");

  auto given = ParseConfig("publisher: {leaderElection: {namespace: elsewhere}}", "c.yaml",
                           ConfigOptions{.own_namespace = "hive-syncbus"});
  REQUIRE(given.ok());
  CHECK(given->publisher.leader_election.ns == "elsewhere");
}

TEST_CASE("consumer.clusterLease.namespace of older releases is an unknown key: warned, ignored") {
  auto old = ParseConfig("consumer: {clusterLease: {namespace: syncbus}}", "c.yaml");
  REQUIRE(old.ok());
  REQUIRE(old->warnings.size() == 1);
  CHECK(old->warnings[0].find("consumer.clusterLease.namespace") != std::string::npos);
}

TEST_CASE("OwnNamespace reads the downward API variable, else the service account's file") {
  char dir[] = "/tmp/syncbus-sa-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string sa = dir;
  const char* saved = std::getenv("POD_NAMESPACE");
  std::string saved_value = saved ? saved : "";
  unsetenv("POD_NAMESPACE");
  CHECK(OwnNamespace(sa) == "syncbus");  // no file: outside a cluster
  std::ofstream(sa + "/namespace") << "from-file\n";
  CHECK(OwnNamespace(sa) == "from-file");
  setenv("POD_NAMESPACE", "from-env", 1);
  CHECK(OwnNamespace(sa) == "from-env");
  if (saved)
    setenv("POD_NAMESPACE", saved_value.c_str(), 1);
  else
    unsetenv("POD_NAMESPACE");
  std::remove((sa + "/namespace").c_str());
  rmdir(dir);
}

TEST_CASE("password file is read and trimmed") {
  char path[] = "/tmp/syncbus-pw-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  std::ofstream(path) << "s3cret\n";
  auto c = ParseConfig(std::string("amqp: {passwordFile: ") + path + "}");
  std::remove(path);
  REQUIRE(c.ok());
  CHECK(c->amqp.password == "s3cret");
  CHECK_FALSE(ParseConfig("amqp: {passwordFile: /nonexistent/pw}").ok());
}

TEST_CASE("amqp.addresses lists the nodes of a cluster while host and port name one node") {
  auto one = ParseConfig("amqp: {host: rabbit, port: 5671}");
  REQUIRE(one.ok());
  CHECK(one->amqp.DescribeEndpoints() == "rabbit:5671");

  auto many =
      ParseConfig(R"(amqp: {port: 5671, addresses: ["rabbit-0:5672", "rabbit-1", "[::1]:5673"]})");
  REQUIRE(many.ok());
  REQUIRE(many->amqp.Endpoints().size() == 3);
  CHECK(many->amqp.Endpoints()[0] == amqp::Address{"rabbit-0", 5672});
  CHECK(many->amqp.Endpoints()[1] == amqp::Address{"rabbit-1", 5671});  // the port key
  CHECK(many->amqp.Endpoints()[2] == amqp::Address{"::1", 5673});
  CHECK(many->amqp.DescribeEndpoints() == "rabbit-0:5672,rabbit-1:5671,[::1]:5673");
}

TEST_CASE("bad amqp.addresses are errors that name the entry") {
  auto both = ParseConfig(R"(amqp: {host: rabbit, addresses: ["a:1"]})");
  REQUIRE_FALSE(both.ok());
  CHECK(both.status().message().find("amqp.addresses: give either host (and port) or addresses") !=
        std::string::npos);
  auto port = ParseConfig(R"(amqp: {addresses: ["a:1", "b:99999"]})");
  REQUIRE_FALSE(port.ok());
  CHECK(port.status().message().find("amqp.addresses[1]: broker address \"b:99999\": the port") !=
        std::string::npos);
  CHECK_FALSE(ParseConfig("amqp: {addresses: []}").ok());
  CHECK_FALSE(ParseConfig("amqp: {addresses: rabbit}").ok());
  CHECK_FALSE(ParseConfig("amqp: {addresses: [[a]]}").ok());
}

TEST_CASE("sticky claims are on by default with the hub mirror, their Leases beside syncbus's") {
  auto defaults = ParseConfig("", "test.yaml", ConfigOptions{.own_namespace = "fleet"});
  REQUIRE(defaults.ok());
  CHECK(defaults->consumer.cluster_lease.sticky);
  CHECK(defaults->consumer.cluster_lease.liveness_namespace == "fleet-liveness");
  auto set = ParseConfig("consumer: {clusterLease: {sticky: false, livenessNamespace: alive}}",
                         "test.yaml", ConfigOptions{.own_namespace = "fleet"});
  REQUIRE(set.ok());
  CHECK_FALSE(set->consumer.cluster_lease.sticky);
  CHECK(set->consumer.cluster_lease.liveness_namespace == "alive");
  // Without the mirror they cannot be: off unless asked for (then an error, above).
  auto direct = ParseConfig("consumer: {hubMirror: {enabled: false}}", "test.yaml");
  REQUIRE(direct.ok());
  CHECK_FALSE(direct->consumer.cluster_lease.sticky);
}
