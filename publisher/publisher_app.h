// PublisherApp: the syncbus-publisher process minus main(): mirrors the hub into a HubCache with
// one reflector per resource, waits for the initial lists, then runs decision rounds and
// publishes through a broker session that it (re)connects with backoff, declaring the topology
// each time. Run() blocks until `stop`; ready()/healthy() are thread-safe (admin probes).
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "common/amqp/session.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/kube/client.h"
#include "publisher/hub_cache.h"

namespace syncbus::publisher {

struct PublisherDeps {
  std::shared_ptr<kube::Client> hub;
  std::function<std::unique_ptr<amqp::Session>()> new_session;
  Clock* clock = nullptr;
  std::shared_ptr<prometheus::Registry> registry;
  std::string identity;   // leader-election identity (pod name + a unique suffix)
};

class PublisherApp {
 public:
  PublisherApp(Config config, PublisherDeps deps);
  Status Run(const std::atomic<bool>& stop);

  Status ready() const;     // hub cache synced and broker connected
  const HubCache& cache() const { return cache_; }

 private:
  Config config_;
  PublisherDeps deps_;
  HubCache cache_;
  std::atomic<bool> connected_{false};
  prometheus::Gauge* leader_gauge_;
};

}  // namespace syncbus::publisher
