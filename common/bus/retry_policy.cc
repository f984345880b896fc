#include "common/bus/retry_policy.h"

#include <algorithm>

#include "common/bus/sync_message.h"
#include "common/bus/topology.h"
#include "common/hive/status_rules.h"
#include "common/time_format.h"

namespace syncbus {

std::string SanitizeError(const std::string& error) {
  std::string out;
  out.reserve(std::min(error.size(), kMaxErrorHeaderBytes));
  for (char c : error) out += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  // Never echo credentials that an error text might quote.
  for (const char* marker : {"Bearer ", "bearer "}) {
    for (size_t pos = out.find(marker); pos != std::string::npos; pos = out.find(marker, pos)) {
      size_t start = pos + 7, end = out.find_first_of(" \"',", start);
      out.replace(start, (end == std::string::npos ? out.size() : end) - start, "<redacted>");
      pos = start;
    }
  }
  return hive::TruncateMessage(out, kMaxErrorHeaderBytes);
}

namespace {

amqp::Publication Base(const amqp::Delivery& delivery, const std::string& error, WallTime now) {
  amqp::Publication p;
  p.message = delivery.message;
  p.message.persistent = true;
  Json& h = p.message.headers;
  if (!h.is_object()) h = Json::object();
  h.erase(kDeathHeader);  // the broker's own history; ours travels in x-syncbus-* headers
  h.erase(kDeliveryCountHeader);
  h.erase(kUnsettledHeader);  // a consumer settled this copy: it is not crashing consumers
  h.erase(kReturnedHeader);
  h.erase(kQuarantinedHeader);
  if (!h.contains(kFirstFailureHeader)) h[kFirstFailureHeader] = FormatRfc3339(now);
  h[kLastErrorHeader] = SanitizeError(error);
  // The lane travels as the routing key so that a retry returns to the lane it came from.
  p.routing_key = delivery.routing_key;
  if (h.contains(kLaneHeader) && h[kLaneHeader].is_string())
    p.routing_key = h[kLaneHeader].get<std::string>();
  if (p.routing_key != "change" && p.routing_key != "resync") p.routing_key = "change";
  return p;
}

}  // namespace

amqp::Publication NextAttempt(const amqp::Delivery& delivery, const RetryPolicy& policy,
                              const std::string& error, bool permanent, WallTime now,
                              std::chrono::milliseconds at_least) {
  int attempt = AttemptOf(delivery.message) + 1;
  if (attempt >= policy.max_attempts || policy.tiers.empty()) {
    amqp::Publication dead = ParkedCopy(delivery, "max-attempts", error, now);
    dead.message.headers[kAttemptHeader] = attempt;
    return dead;
  }
  amqp::Publication p = Base(delivery, error, now);
  p.message.headers[kAttemptHeader] = attempt;
  size_t last = policy.tiers.size() - 1;
  size_t tier = std::min<size_t>(attempt - 1, last);
  if (permanent) tier = last;  // slow tier only
  while (tier < last && policy.tiers[tier] < at_least) ++tier;
  p.exchange = amqp::kRetryExchange;
  p.message.headers[kRetryTierHeader] = amqp::TierName(policy.tiers[tier]);
  return p;
}

namespace {

// `delivery` as it travels on without an attempt counted: on its lane, its unsettled deliveries
// carried (the broker's count starts again in the next queue), its history untouched.
amqp::Publication CarriedOn(const amqp::Delivery& delivery) {
  amqp::Publication p;
  p.message = delivery.message;
  p.message.persistent = true;
  if (!p.message.headers.is_object()) p.message.headers = Json::object();
  p.message.headers.erase(kDeathHeader);
  p.message.headers[kUnsettledHeader] = UnsettledDeliveries(delivery.message);
  p.message.headers[kReturnedHeader] = ReturnsFromConsumers(delivery.message);
  p.message.headers.erase(kDeliveryCountHeader);
  p.routing_key = Base(delivery, "", WallTime{}).routing_key;
  return p;
}

}  // namespace

amqp::Publication Defer(const amqp::Delivery& delivery, const RetryPolicy& policy) {
  amqp::Publication p = CarriedOn(delivery);
  if (policy.tiers.empty()) {  // no delay queues: straight back to the work queue
    p.exchange = amqp::kWorkExchange;
    return p;
  }
  p.exchange = amqp::kRetryExchange;
  p.message.headers[kRetryTierHeader] =
      amqp::TierName(*std::min_element(policy.tiers.begin(), policy.tiers.end()));
  return p;
}

amqp::Publication Forwarded(const amqp::Delivery& delivery, const std::string& holder) {
  amqp::Publication p = CarriedOn(delivery);
  p.exchange = amqp::kForwardExchange;
  p.mandatory = true;  // no queue of `holder`: returned, and Publish fails with kNotFound
  p.message.headers[kForwardToHeader] = holder;
  // The forward exchange routes on the lane too (the holder's queue of that lane): spelt as the
  // routing key that takes the request back to its lane.
  p.message.headers[kLaneHeader] = p.routing_key;
  p.message.headers[kHopsHeader] = HopsOf(delivery.message) + 1;
  return p;
}

bool NeedsQuarantine(const amqp::Message& message) {
  int unsettled = UnsettledDeliveries(message);
  return unsettled > 0 && QuarantinedFor(message) < unsettled;
}

bool RunsAlone(int unsettled, int delivery_limit) {
  if (unsettled <= 0) return false;
  return unsettled >= 2 || (delivery_limit > 0 && unsettled + 1 > delivery_limit);
}

amqp::Publication Quarantine(const amqp::Delivery& delivery, const RetryPolicy& policy) {
  amqp::Publication p = Defer(delivery, policy);
  int unsettled = UnsettledDeliveries(delivery.message);
  p.message.headers[kQuarantinedHeader] = unsettled;
  if (!policy.tiers.empty()) {
    std::vector<std::chrono::seconds> tiers = policy.tiers;
    std::sort(tiers.begin(), tiers.end());
    size_t tier = std::min<size_t>(static_cast<size_t>(unsettled) - 1, tiers.size() - 1);
    p.message.headers[kRetryTierHeader] = amqp::TierName(tiers[tier]);
  }
  return p;
}

amqp::Publication ParkedCopy(const amqp::Delivery& delivery, const std::string& reason,
                             const std::string& error, WallTime now) {
  amqp::Publication p = Base(delivery, error, now);
  p.exchange = amqp::kDeadExchange;
  p.message.headers[kDeadReasonHeader] = reason;
  p.message.headers[kDeadAtHeader] = FormatRfc3339(now);
  p.message.headers.erase(kRetryTierHeader);
  return p;
}

}  // namespace syncbus
