// A set rolled out in waves as tests write it on a hub (simulated or real): a SelectorSyncSet of
// the simulated fleet with a syncbus.io/rollout annotation, the labels its waves select on, a
// cluster's ClusterSync entry of the set, and the rollout state the publisher's leader would
// write. Each write REQUIREs success. Thread-compatible.
#pragma once

#include <string>

#include "common/bus/rollout.h"
#include "common/json.h"
#include "common/kube/client.h"

namespace syncbus::testing {

// A SelectorSyncSet `name` that selects the simulated fleet (kubesim::kFleetLabel), with one
// ConfigMap and the annotation `rollout_spec` (JSON text; none when empty).
Json RolledOutSelectorSyncSet(const std::string& name, const std::string& rollout_spec);

// Sets label `key`=`value` on the fleet cluster `cluster` (its namespace is its name).
void LabelFleetCluster(kube::Client& hub, const std::string& cluster, const std::string& key,
                       const std::string& value);

// Writes the entry of SelectorSyncSet `set` in the ClusterSync of fleet cluster `cluster` (made
// when missing): `generation` observed, Success when `message` is empty, else Failure with it.
void WriteSelectorSetEntry(kube::Client& hub, const std::string& cluster, const std::string& set,
                           int64_t generation, const std::string& message = "");

// Writes `state` into SelectorSyncSet `set`'s syncbus.io/rollout-state, as the publisher does.
void WriteRolloutState(kube::Client& hub, const std::string& set,
                       const rollout::RolloutState& state);

// The SelectorSyncSet's rollout state as stored (REQUIREs that it parses).
rollout::RolloutState ReadRolloutState(kube::Client& hub, const std::string& set);

}  // namespace syncbus::testing
