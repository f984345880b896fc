// ConsumersLiveness: the LivenessView of a consumer, from its own ConsumerLiveness and a watched
// copy of every consumer's liveness Lease (it is the kube::ReflectorHandler of a Reflector over
// the Leases of the liveness namespace with kLivenessSelector, which the app runs). Thread-safe;
// the handler calls come from the reflector's thread.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/json.h"
#include "common/kube/client.h"
#include "common/kube/reflector.h"
#include "consumer/consumer_liveness.h"
#include "consumer/liveness_view.h"

namespace syncbus::consumer {

class ConsumersLiveness final : public LivenessView, public kube::ReflectorHandler {
 public:
  // `own`, `hub` and `clock` must outlive this. A Lease counts as alive until renewTime +
  // duration, with no tolerance for clock skew beyond the holders' own: each holder stops writing
  // safetyMargin before its Lease lapses, which bounds the skew, as for per-sync claims.
  ConsumersLiveness(ConsumerLiveness& own, kube::Client& hub, std::string ns, Clock& clock);

  LivenessCheck Own() const override;
  bool Alive(const std::string& identity, int64_t epoch) const override;
  bool Renewing(const std::string& identity, int64_t epoch) const override;
  Result<bool> AliveFresh(const std::string& identity, int64_t epoch) override;
  size_t LiveCount() const override;

  void OnReplace(std::vector<Json> items) override;
  void OnUpsert(Json object) override;
  void OnDelete(Json object) override;
  void OnSynced() override {}

 private:
  // `record` shows `identity` alive in `epoch` at `now`.
  static bool AliveBy(const LivenessRecord& record, const std::string& identity, int64_t epoch,
                      WallTime now);
  // The watched record showing `identity` alive in `epoch` at `now`, or null. Needs mu_.
  const LivenessRecord* AliveRecord(const std::string& identity, int64_t epoch, WallTime now) const;

  ConsumerLiveness& own_;
  kube::Client& hub_;
  const std::string ns_;
  Clock& clock_;
  mutable std::mutex mu_;
  std::map<std::string, LivenessRecord> leases_;  // by Lease name; guarded by mu_
};

}  // namespace syncbus::consumer
