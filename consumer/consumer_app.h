// ConsumerApp: the syncbus-consumer process minus main(): (re)connects its broker session with
// backoff, declares the topology, consumes both lanes through a DeliveryLoop whose workers run
// ClusterSyncer under per-cluster hub leases, serves previews (preview_loop.h) on a session and
// thread of their own, and on stop drains in-flight work within the grace period. Run() blocks
// until `stop`; ready() is thread-safe (admin probe).
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include <prometheus/registry.h>

#include "common/amqp/session.h"
#include "common/bus/config.h"
#include "common/clock.h"
#include "common/http/transport.h"
#include "common/kube/client.h"
#include "consumer/hub_reader.h"
#include "consumer/preview_loop.h"

namespace syncbus::consumer {

class DeliveryLoop;

// Given the reader the syncs would use (which outlives the result), returns the one they use.
using ReaderDecorator = std::function<std::unique_ptr<HubReader>(HubReader&)>;

struct ConsumerDeps {
  std::shared_ptr<kube::Client> hub;
  std::shared_ptr<http::Transport> transport;  // for target clusters
  std::function<std::unique_ptr<amqp::Session>()> new_session;
  // The preview loop's own session (preview_loop.h), named apart in the management UI; optional:
  // without it (or with consumer.previewWorkers 0) this consumer serves no previews.
  std::function<std::unique_ptr<amqp::Session>()> new_preview_session;
  // The connection the trace events go out on (common/bus/trace_flusher.h). Null: new_session.
  std::function<std::unique_ptr<amqp::Session>()> new_trace_session;
  Clock* clock = nullptr;
  std::shared_ptr<prometheus::Registry> registry;
  std::string identity;  // lease holder identity, unique per process
  // Fails the hub and target requests still in flight at once (CurlTransport::Shutdown), so a
  // request stuck on an unresponsive server cannot hold the exit past the grace period. Optional.
  std::function<void()> abort_io;
  // Wraps the reader the syncs read the hub through (optional): how a whole-system test injects
  // faults into the sync path (tests/chaos); production leaves it empty.
  ReaderDecorator decorate_reader;
};

class ConsumerApp {
 public:
  ConsumerApp(Config config, ConsumerDeps deps);
  Status Run(const std::atomic<bool>& stop);
  Status ready() const;
  // Liveness: the delivery loop went round within the last kLoopStallLimit (longer than the
  // longest reconnect backoff, 30 s).
  Status healthy() const;
  static constexpr std::chrono::seconds kLoopStallLimit{60};

 private:
  // Connects (again after every loss), consumes through `loop` until `stop`, then drains what is
  // in flight within the grace period and closes the session.
  void Consume(DeliveryLoop& loop, amqp::Session& session, const std::atomic<bool>& stop);
  // Serves the preview queue on its own session through `loop`'s preview function until `stop`,
  // reconnecting after every loss.
  void ServePreviews(const PreviewLoop::PreviewFn& preview, const std::atomic<bool>& stop);

  Config config_;
  ConsumerDeps deps_;
  std::atomic<bool> consuming_{false};
  std::atomic<int64_t> loop_seen_ns_{-1};  // steady ns of the last loop round; -1 before Run
};

}  // namespace syncbus::consumer
