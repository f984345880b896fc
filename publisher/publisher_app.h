// PublisherApp: the syncbus-publisher process minus main(): mirrors the hub into a HubCache with
// one reflector per resource, waits for the initial lists, then runs decision rounds and
// publishes through a broker session that it (re)connects with backoff, declaring the topology
// each time. On stop: the last round's confirms are awaited, the lease is released. Run() blocks
// until `stop`; ready()/healthy() are thread-safe (admin probes).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>

#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "common/amqp/session.h"
#include "common/bus/config.h"
#include "common/clock.h"
#include "common/kube/client.h"
#include "publisher/hub_cache.h"

namespace syncbus::publisher {

struct PublisherOptions;

struct PublisherDeps {
  std::shared_ptr<kube::Client> hub;
  // The same hub, every request giving up within the leader election's renewDeadline (as
  // client-go's leader-election client does): for the Lease and the HiveConfig reads, so that a
  // request the hub never answers holds neither a renewal, a takeover nor the publishing loop
  // for a whole request timeout. Null: `hub`.
  std::shared_ptr<kube::Client> quick_hub;
  std::function<std::unique_ptr<amqp::Session>()> new_session;
  Clock* clock = nullptr;
  std::shared_ptr<prometheus::Registry> registry;
  std::string identity;  // leader-election identity (pod name + a unique suffix)
  // The connection the trace events go out on (common/bus/trace_flusher.h). Null: new_session.
  std::function<std::unique_ptr<amqp::Session>()> new_trace_session;
};

class PublisherApp {
 public:
  PublisherApp(Config config, PublisherDeps deps);
  Status Run(const std::atomic<bool>& stop);

  Status ready() const;  // hub cache synced and broker connected
  // The decision loop is alive: it went round (or waited, leading or not) within stall_limit.
  Status healthy() const;
  const HubCache& cache() const { return cache_; }

  // Longer than any single wait of the loop (confirm and broker round-trip timeouts, the
  // reconnect backoff's 30 s ceiling).
  static constexpr std::chrono::seconds kStallLimit{120};

 private:
  class Election;
  class HiveConfigFollower;
  class RolloutLoop;
  // Publishes while this replica leads (connecting to the broker again after every loss) until
  // `stop`, beating between rounds and while waiting. `election` null: always leads;
  // `hive_config` null: the reapply interval is the configured one.
  void PublishUntilStopped(const PublisherOptions& options, const Election* election,
                           HiveConfigFollower* hive_config, const std::function<void()>& beat,
                           const std::atomic<bool>& stop);
  void Beat();

  Config config_;
  PublisherDeps deps_;
  HubCache cache_;

  std::atomic<bool> connected_{false};
  mutable std::mutex election_mu_;
  std::string election_problem_;  // the leader elector's problem(), guarded by election_mu_
  std::atomic<int64_t> heartbeat_ns_{-1};  // steady time of the loop's last beat; -1 not started
  prometheus::Gauge* leader_gauge_;
  prometheus::Gauge* heartbeat_gauge_;
};

}  // namespace syncbus::publisher
