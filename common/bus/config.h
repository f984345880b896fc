// Config: the one YAML file every syncbus binary reads (sections per component), with defaults,
// validation and errors that name the bad key ("config.yaml: publisher.resyncInterval: invalid
// duration ..."). Unknown keys are warnings the daemons log at start (a rollback must start under
// the newer ConfigMap of a later version), or errors in strict mode. Value types;
// thread-compatible. Every knob is documented in docs/configuration.md.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/admin_server.h"
#include "common/amqp/session.h"
#include "common/bus/topology.h"
#include "common/status.h"

namespace syncbus {

struct LogConfig {
  std::string level = "info";   // trace, debug, info, warn, error
  std::string format = "text";  // text (logfmt-style) or json
};

struct HubConfig {
  std::string kubeconfig;  // empty = in-cluster service account
  std::string context;
  double qps = 0;  // client-side rate limit to the hub; 0 = none
};

struct LeaderElectionConfig {
  bool enabled = true;
  std::string ns = "syncbus";  // parsed: the file's, else ConfigOptions::own_namespace
  std::string name = "syncbus-publisher";
  // Shorter than client-go's 15 s / 10 s: a SIGKILLed leader is replaced within about
  // leaseDuration + 2 x retryPeriod, 14 s (docs/publisher.md); the 3 s between renewDeadline and
  // leaseDuration stays the margin a cut-off leader has to stop.
  std::chrono::milliseconds lease_duration{10000};
  std::chrono::milliseconds renew_deadline{7000};
  std::chrono::milliseconds retry_period{2000};
};

struct PublisherConfig {
  std::string ns;  // watch one namespace; empty = all
  // Unset: HiveConfig's spec.syncSetReapplyInterval when it has one, else 2h (Hive's default).
  std::chrono::milliseconds resync_interval{std::chrono::hours(2)};
  bool resync_interval_set = false;  // given in the config: HiveConfig is not read
  double resync_jitter = 0.1;        // fraction of the interval, stable per cluster
  double max_publish_rate = 500;     // messages per second
  int max_outstanding = 10000;       // requests published but not yet processed
  std::chrono::milliseconds outstanding_timeout{std::chrono::minutes(30)};  // then re-sent
  // An edit that makes more clusters need a sync is a bulk edit: its requests take the resync
  // lane, behind single edits (docs/publisher.md, "Lanes").
  int bulk_edit_clusters = 100;
  // Clusters a decision round takes of those that wait (start-up work, a bulk edit's, due
  // reapplies), in turn: an edit is never held behind the whole fleet's round.
  int round_clusters = 1000;
  // A metadata-only watch of Secrets, so a changed secretMappings source triggers a sync at once;
  // false: no Secret rights needed, a change reaches clusters at their next reapply.
  bool watch_source_secrets = true;
  LeaderElectionConfig leader_election;
};

// The per-cluster claim, on the cluster's ClusterSyncLease, that keeps two consumers off one
// cluster (docs/operations.md). A dead consumer's clusters are taken over once its claims lapse:
// 20 s, renewed 5 s after their last write.
struct ClusterLeaseConfig {
  std::chrono::milliseconds duration{20000};       // how long a claim holds (whole seconds)
  std::chrono::milliseconds renew_interval{5000};  // a claim is renewed this long after its write
  std::chrono::milliseconds safety_margin{5000};   // stop writing this long before it could lapse
  // The ClusterSync write gives the claim back (no lease write); needs the hub mirror.
  bool release_by_status = true;
  // Sticky claims (consumer/cluster_lease.h): a claim holds while its holder's liveness Lease
  // lives (renewed with renew_interval, lapsing after duration), over many syncs, and requests
  // for a held cluster are forwarded to its holder. Needs the hub mirror: the file's setting,
  // else on wherever the hub mirror is.
  bool sticky = true;
  // Where the consumers' liveness Leases live: a namespace of their own, so that the right to
  // write them reaches no other Lease. Parsed: the file's, else "<own namespace>-liveness".
  std::string liveness_namespace;
};

// The consumer's watch-fed copy of the hub (consumer/hub_mirror.h, docs/architecture.md).
struct HubMirrorConfig {
  bool enabled = true;  // false: every sync reads the hub directly
  // How long a sync waits for the mirror to reach what the publisher saw before reading the hub.
  std::chrono::milliseconds max_wait{5000};
};

struct ConsumerConfig {
  int prefetch = 20;
  // Sets of one cluster applied at once. They keep Hive's order (SyncSets, then SelectorSyncSets,
  // each by name) wherever it could be seen: only sets of namespaced built-in objects with no
  // object in common run side by side (consumer/set_plan.h: MustFollow). 1: strictly serial.
  int parallel_sync_sets = 8;
  // Update-operation field managers of client-side apply whose fields syncbus takes over when it
  // applies an object (Hive's: mce-2.2 and older wrote as Go-http-client, newer as
  // hive6-clustersync; kubectl's own). A manager owning the last-applied annotation is one anyway.
  std::vector<std::string> take_over_managers = {"hive6-clustersync", "Go-http-client",
                                                 "kubectl-client-side-apply"};
  int max_in_flight = 2000;  // target API requests across all clusters
  int per_cluster_in_flight = 20;
  double per_cluster_qps = 50;
  std::chrono::milliseconds request_timeout{30000};
  std::chrono::milliseconds cluster_deadline{std::chrono::minutes(10)};
  int max_attempts = 8;  // then the dead-letter queue
  std::chrono::milliseconds shutdown_grace{25000};
  // Connections to one host:port (HTTP/1.1 runs one request per connection); 0 = no cap.
  int max_connections_per_host = 32;
  // Connections kept open to targets with no request in flight (least recently used closed
  // first), and how long an unused target keeps its connections.
  int max_idle_connections = 1024;
  std::chrono::milliseconds idle_connection_timeout{90000};
  int target_clients = 2000;  // clusters whose client and discovery are kept (LRU)
  bool events = true;         // Kubernetes Events on ClusterSyncs (failed, parked, recovered)
  // Clusters of one preview request (syncbus.preview) previewed at once, on a broker connection
  // and threads of their own; 0 = this consumer serves no previews.
  int preview_workers = 16;
  ClusterLeaseConfig cluster_lease;
  HubMirrorConfig hub_mirror;
};

struct Config {
  LogConfig log;
  AdminConfig admin;
  amqp::ConnectionOptions amqp;
  HubConfig hub;
  amqp::TopologyOptions topology;
  PublisherConfig publisher;
  ConsumerConfig consumer;
  // What the file had that this version does not know ("publisher.newKey: unknown key ...,
  // ignored"), in file order; empty in strict mode (those are errors there).
  std::vector<std::string> warnings;
};

struct ConfigOptions {
  // The namespace syncbus runs in: publisher.leaderElection.namespace when the file leaves it
  // out or empty, and consumer.clusterLease.livenessNamespace is "<it>-liveness" then.
  std::string own_namespace = "syncbus";
  bool strict = false;  // unknown keys are errors instead of warnings
};

// `source` names the input in errors (a file name). Empty text = all defaults.
Result<Config> ParseConfig(const std::string& yaml_text, const std::string& source = "config",
                           const ConfigOptions& options = {});
// Reads `path`; password files referenced by the config are read too.
Result<Config> LoadConfigFile(const std::string& path, const ConfigOptions& options = {});

}  // namespace syncbus
