// Hive's HiveConfig as the publisher reads it: the cluster-wide object "hive" whose
// spec.syncSetReapplyInterval (a Go duration) Hive's operator hands to its clustersync controller
// as the full reapply interval. Stateless; thread-safe.
#pragma once

#include <chrono>
#include <optional>

#include "common/kube/client.h"
#include "common/status.h"

namespace syncbus::publisher {

inline constexpr char kHiveConfigName[] = "hive";

// The interval HiveConfig sets; nullopt when it sets none (no HiveConfig, no such CRD, or the field
// empty). An unreadable value is kInvalidArgument, a failed read the read's error.
Result<std::optional<std::chrono::milliseconds>> ReadHiveReapplyInterval(kube::Client& hub);

}  // namespace syncbus::publisher
