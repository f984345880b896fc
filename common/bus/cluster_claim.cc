#include "common/bus/cluster_claim.h"

#include <charconv>

namespace syncbus {
namespace {

// The positive decimal `text` holds; 0 when it holds anything else.
int64_t PositiveNumber(const std::string& text) {
  int64_t number = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  return error == std::errc() && end == text.data() + text.size() && number > 0 ? number : 0;
}

}  // namespace

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
  claim.duration_seconds = PositiveNumber(text(kClaimDurationAnnotation));
  claim.epoch = PositiveNumber(text(kEpochAnnotation));
  // A sticky claim without a valid epoch binds to no liveness: it is read as a claim that
  // lapses after its duration.
  claim.sticky = text(kClaimKindAnnotation) == kStickyClaim && claim.epoch > 0;
  return claim;
}

}  // namespace syncbus
