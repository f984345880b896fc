// The claim a consumer writes on a cluster's ClusterSyncLease (Hive's hiveinternal object of the
// cluster's namespace and name) while it syncs the cluster: who holds it, when the holder last
// wrote it (its own clock) and for how long that write holds, as annotations, so that Hive's
// reader of the lease (spec.renewTime) is not disturbed. A sticky claim also names the holder's
// liveness epoch (consumer/liveness_view.h) and holds while the holder lives in that epoch, over
// many syncs, instead of for the duration after its write. Consumers take and check it;
// syncbusctl and the chaos run read it. Pure.
#pragma once

#include <cstdint>
#include <string>

#include "common/json.h"

namespace syncbus {

inline constexpr char kClaimHolderAnnotation[] = "syncbus.io/holder";
inline constexpr char kClaimRenewTimeAnnotation[] = "syncbus.io/renew-time";
inline constexpr char kClaimDurationAnnotation[] = "syncbus.io/lease-duration-seconds";
// A sticky claim (kClaimKindAnnotation = kStickyClaim) holds while its holder is alive in the
// liveness epoch it was made in (kEpochAnnotation); without the kind, a claim holds for one sync.
inline constexpr char kClaimKindAnnotation[] = "syncbus.io/claim";
inline constexpr char kStickyClaim[] = "sticky";
inline constexpr char kEpochAnnotation[] = "syncbus.io/epoch";
// The label of a consumer's liveness Lease (coordination.k8s.io), "true"; the Lease carries the
// holder's epoch in kEpochAnnotation. kLivenessSelector lists and watches them.
inline constexpr char kLivenessLabel[] = "syncbus.io/consumer-liveness";
inline constexpr char kLivenessSelector[] = "syncbus.io/consumer-liveness=true";

struct ClaimRecord {
  std::string holder;      // "" when nobody holds it
  std::string renew_time;  // RFC 3339 with microseconds; "" when never written
  int64_t duration_seconds = 0;
  bool sticky = false;
  int64_t epoch = 0;  // a sticky claim's: the holder's liveness epoch (> 0)
};

// The claim on `lease` (a ClusterSyncLease as JSON); empty fields where it has none or they are
// malformed.
ClaimRecord ClaimOf(const Json& lease);

}  // namespace syncbus
