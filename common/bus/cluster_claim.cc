#include "common/bus/cluster_claim.h"

#include <charconv>

namespace syncbus {

ClaimRecord ClaimOf(const Json& lease) {
  ClaimRecord claim;
  auto meta = lease.find("metadata");
  if (meta == lease.end() || !meta->is_object()) return claim;
  auto annotations = meta->find("annotations");
  if (annotations == meta->end() || !annotations->is_object()) return claim;
  auto text = [&](const char* key) {
    auto it = annotations->find(key);
    return it != annotations->end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  claim.holder = text(kClaimHolderAnnotation);
  claim.renew_time = text(kClaimRenewTimeAnnotation);
  const std::string duration = text(kClaimDurationAnnotation);
  int64_t seconds = 0;
  auto [end, error] = std::from_chars(duration.data(), duration.data() + duration.size(), seconds);
  if (error == std::errc() && end == duration.data() + duration.size() && seconds > 0)
    claim.duration_seconds = seconds;
  return claim;
}

}  // namespace syncbus
