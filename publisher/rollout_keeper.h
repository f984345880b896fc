// RolloutKeeper: the publisher leader's side of rollouts in waves (common/bus/rollout.h). Each
// Tick() looks at the sets with syncbus.io/rollout in the hub cache, decides what each needs
// (rollout_decision.h), and writes the new state on the set itself: a JSON merge patch carrying
// the set's resourceVersion, so that a write crossing syncbusctl's (resume, abort) is refused and
// decided again from the newer set. Each step is recorded as an Event on the set (a SyncSet's
// namespace; "default" for a SelectorSyncSet) and counted; an Event the hub did not take is tried
// again on the next ticks (kEventTries in all, as client-go's recorder), its name unchanged so that
// one the hub took without answering is not doubled. Gauges show every rollout's wave and halt. A
// released wave reaches its clusters through the cache: the set's new state makes them dirty, and
// their desired state now holds the new generation. Not thread-safe: one thread, the publisher's
// rollout loop (publisher_app.cc), beside the decision loop; `cache`, `hub`, `clock` and `registry`
// must outlive it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "common/clock.h"
#include "common/kube/client.h"
#include "publisher/hub_cache.h"
#include "publisher/rollout_decision.h"

namespace syncbus::publisher {

class RolloutKeeper {
 public:
  RolloutKeeper(HubCache& cache, kube::Client& hub, Clock& clock, prometheus::Registry& registry,
                std::string identity);

  // One look at every gated set; the leader only. A write or an Event the hub refused is logged
  // and returned (the first one); the next tick decides again from the hub's state, the truth.
  Status Tick();
  // Forgets the gauges and the Events not yet recorded (on losing leadership: the next leader
  // reports).
  void Reset();

  static constexpr int kEventTries = 12;

 private:
  Status Write(const GatedSet& set, const std::string& resource_version,
               const rollout::RolloutState& state);
  Status RecordEvent(const GatedSet& set, const std::string& uid, const RolloutEvent& event);
  // Creates one Event; AlreadyExists counts as recorded (an earlier try the hub took).
  Status CreateEvent(const std::string& ns, const Json& event);
  // Tries the Events not yet recorded again; the first refusal is returned.
  Status RetryEvents();
  void SetGauges(const GatedSet& set);

  struct UnrecordedEvent {
    std::string set;  // SetLabel, for the log
    std::string ns;
    Json event;
    int tries = 1;
  };

  HubCache& cache_;
  kube::Client& hub_;
  Clock& clock_;
  std::string identity_;
  prometheus::Family<prometheus::Gauge>& wave_;
  prometheus::Family<prometheus::Gauge>& halted_;
  prometheus::Family<prometheus::Counter>& steps_;
  std::map<std::string, std::pair<prometheus::Gauge*, prometheus::Gauge*>> gauges_;  // by set
  std::vector<UnrecordedEvent> unrecorded_;                                          // oldest first
};

}  // namespace syncbus::publisher
