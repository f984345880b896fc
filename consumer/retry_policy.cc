#include "consumer/retry_policy.h"

#include <algorithm>

#include "common/amqp/syncbus_topology.h"
#include "common/sync_message.h"
#include "common/time_format.h"
#include "consumer/status_builder.h"

namespace syncbus::consumer {

int AttemptOf(const amqp::Message& message) {
  auto it = message.headers.find(kAttemptHeader);
  if (it == message.headers.end() || !it->is_number_integer()) return 0;
  return static_cast<int>(std::clamp<int64_t>(it->get<int64_t>(), 0, 1000000));
}

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
  return TruncateMessage(out, kMaxErrorHeaderBytes);
}

namespace {

amqp::Publication Base(const amqp::Delivery& delivery, const std::string& error, WallTime now) {
  amqp::Publication p;
  p.message = delivery.message;
  p.message.persistent = true;
  Json& h = p.message.headers;
  if (!h.is_object()) h = Json::object();
  h.erase("x-death");   // the broker's own history; ours travels in x-syncbus-* headers
  if (!h.contains(kFirstFailureHeader)) h[kFirstFailureHeader] = FormatRfc3339(now);
  h[kLastErrorHeader] = SanitizeError(error);
  // The lane travels as the routing key so that a retry returns to the lane it came from.
  p.routing_key = delivery.routing_key;
  if (h.contains(kLaneHeader) && h[kLaneHeader].is_string()) p.routing_key = h[kLaneHeader].get<std::string>();
  if (p.routing_key != "change" && p.routing_key != "resync") p.routing_key = "change";
  return p;
}

}  // namespace

amqp::Publication NextAttempt(const amqp::Delivery& delivery, const RetryPolicy& policy,
                              const std::string& error, bool permanent, WallTime now) {
  int attempt = AttemptOf(delivery.message) + 1;
  if (attempt >= policy.max_attempts || policy.tiers.empty()) {
    return DeadLetter(delivery, "max-attempts", error, now);
  }
  amqp::Publication p = Base(delivery, error, now);
  p.message.headers[kAttemptHeader] = attempt;
  size_t tier = std::min<size_t>(attempt - 1, policy.tiers.size() - 1);
  if (permanent) tier = policy.tiers.size() - 1;   // slow tier only
  p.exchange = amqp::kRetryExchange;
  p.message.headers[amqp::kRetryTierHeader] = amqp::TierName(policy.tiers[tier]);
  return p;
}

amqp::Publication DeadLetter(const amqp::Delivery& delivery, const std::string& reason,
                             const std::string& error, WallTime now) {
  amqp::Publication p = Base(delivery, error, now);
  p.exchange = amqp::kDeadExchange;
  p.message.headers[kDeadReasonHeader] = reason;
  p.message.headers.erase(amqp::kRetryTierHeader);
  return p;
}

}  // namespace syncbus::consumer
