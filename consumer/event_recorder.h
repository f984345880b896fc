// EventRecorder: the consumer's SyncEventSink. Writes each SyncEvent as a core/v1 Event about
// the cluster's ClusterSync (its ClusterDeployment while it has none yet; nothing for a cluster
// gone from the hub), in the cluster's namespace, so `kubectl describe clustersync` lists it.
// Events pass an EventCorrelator (client-go's aggregation, counting and spam filter), then a
// thread of its own creates them, or patches the count of one written before (creating it again
// if it was deleted meanwhile, e.g. by the apiserver's event TTL). Best effort, as client-go's
// recorder: at most `max_queued` wait (more are dropped), a failure to reach the hub is retried
// `max_tries` times `retry_interval` apart, an answer refusing the Event abandons it. Counted in
// syncbus_consumer_events_total{reason,result}. The involved object's uid comes from the hub
// mirror when it has the object, else one GET. Thread-safe; Record() never blocks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "common/clock.h"
#include "common/kube/client.h"
#include "common/random.h"
#include "consumer/event_correlator.h"
#include "consumer/hub_mirror.h"
#include "consumer/sync_events.h"

namespace syncbus::consumer {

class EventRecorder final : public SyncEventSink {
 public:
  struct Options {
    std::string component = "syncbus-consumer";  // source.component ("From" in kubectl)
    std::string host;                            // source.host: the consumer's identity
    size_t max_queued = 1000;
    int max_tries = 12;
    std::chrono::milliseconds retry_interval{10000};  // the first wait is drawn in [0, this)
    EventCorrelator::Options correlator;
  };
  // `hub`, `clock`, `random`, `registry` and `mirror` (may be null) must outlive the recorder.
  EventRecorder(Options options, kube::Client& hub, const HubMirror* mirror, const Clock& clock,
                Random& random, prometheus::Registry& registry);
  // Stops the writer; events still waiting are dropped.
  ~EventRecorder() override;
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  void Record(SyncEvent event) override;
  // Waits up to `timeout` until every event recorded so far was written or given up.
  bool WaitIdle(std::chrono::milliseconds timeout);

 private:
  void Run();
  void Write(const SyncEvent& event);
  // The ClusterSync (else the ClusterDeployment) of cluster ns/name; nullopt when neither exists
  // or the hub could not be read.
  std::optional<EventObject> InvolvedObject(const std::string& ns, const std::string& name);
  // One attempt: true when done (written, or refused by the server: not retried).
  bool Send(EventRecord& event, bool update, const char* reason);
  // Waits `delay` unless stopping; false when stopping.
  bool Pause(std::chrono::milliseconds delay);
  void Count(const char* reason, const char* result);

  const Options options_;
  kube::Client& hub_;
  const HubMirror* mirror_;
  Random& random_;
  EventCorrelator correlator_;
  prometheus::Family<prometheus::Counter>& events_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<SyncEvent> queue_;  // guarded by mu_
  bool busy_ = false;            // guarded by mu_: the writer is on an event
  bool stopping_ = false;        // guarded by mu_
  std::thread writer_;
};

}  // namespace syncbus::consumer
