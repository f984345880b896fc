// LivenessView: what a consumer knows of the pool's liveness Leases (one per consumer process,
// renewed while it lives, in a namespace of their own): its own liveness (the fence of its sticky
// cluster claims) and whether another consumer's claims still hold. A sticky claim on a cluster
// names its holder and the holder's liveness epoch; it holds while that holder is alive in that
// epoch. An epoch moves when a consumer's liveness lapsed (it was not renewed in time) or its
// Lease was re-created, which voids every claim it made before. Implementations are thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace syncbus::consumer {

struct LivenessCheck {
  bool alive = false;  // this process's liveness certainly holds now (its fence)
  int64_t epoch = 0;   // the epoch its claims are made in (0: never alive yet)
};

class LivenessView {
 public:
  virtual ~LivenessView() = default;
  // This process's own liveness, from its last successful renewal (no request).
  virtual LivenessCheck Own() const = 0;
  // Whether consumer `identity` is alive in `epoch`, by the watched copy of its Lease (no
  // request): false once its Lease is gone, expired (renewTime + duration, the clock skew that
  // the safety margin bounds tolerated in its favour) or in another epoch.
  virtual bool Alive(const std::string& identity, int64_t epoch) const = 0;
  // Alive, and renewed within the first half of its duration, by the watched copy: a consumer
  // that stopped renewing (paused, cut off, dead) is not sent requests while its claims still hold
  // (they would wait in its queue), but not yet taken over either.
  virtual bool Renewing(const std::string& identity, int64_t epoch) const = 0;
  // The same, read fresh from the hub (one GET): what a takeover of its claims needs. An error
  // when the hub cannot tell.
  virtual Result<bool> AliveFresh(const std::string& identity, int64_t epoch) = 0;
  // Consumers alive now by the watched copies, this one included (at least 1).
  virtual size_t LiveCount() const = 0;
};

}  // namespace syncbus::consumer
