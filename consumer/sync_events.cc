#include "consumer/sync_events.h"

#include "common/bus/retry_policy.h"

namespace syncbus::consumer {
namespace {

SyncEvent EventOf(SyncEvent::Kind kind, const SyncRequest& request, const std::string& message) {
  return {kind, request.cluster_namespace, request.cluster_name, SanitizeError(message)};
}

}  // namespace

const char* SyncEventType(SyncEvent::Kind kind) {
  return kind == SyncEvent::Kind::kRecovered ? "Normal" : "Warning";
}

const char* SyncEventReason(SyncEvent::Kind kind) {
  switch (kind) {
    case SyncEvent::Kind::kFailed: return "SyncFailed";
    case SyncEvent::Kind::kParked: return "SyncParked";
    case SyncEvent::Kind::kRecovered: return "SyncRecovered";
  }
  return "Unknown";
}

SyncEvent FailureEvent(const SyncRequest& request, const Result<SyncOutcome>& outcome, bool parked,
                       int attempt) {
  std::string failure;
  if (!outcome.ok()) {
    failure = outcome.status().ToString();
  } else {
    for (const TraceSet& set : outcome->sets) {
      if (set.success) continue;
      failure += (failure.empty() ? "" : "; ") + set.kind + " " + set.name + ": " + set.failure;
    }
    if (failure.empty()) failure = outcome->detail;
  }
  if (!parked) return EventOf(SyncEvent::Kind::kFailed, request, failure);
  return EventOf(SyncEvent::Kind::kParked, request,
                 "parked in the dead-letter queue after attempt " + std::to_string(attempt) +
                     " (syncbusctl dlq replay runs it again): " + failure);
}

SyncEvent PoisonEvent(const SyncRequest& request, const std::string& why) {
  return EventOf(SyncEvent::Kind::kParked, request, "parked in the dead-letter queue: " + why);
}

std::optional<SyncEvent> RecoveryEvent(const SyncRequest& request, const SyncOutcome& outcome,
                                       int attempt) {
  if (outcome.kind != SyncOutcome::Kind::kSynced || !outcome.failed_sets.empty())
    return std::nullopt;
  if (!outcome.recovered && attempt <= 1) return std::nullopt;
  return EventOf(SyncEvent::Kind::kRecovered, request, "every set applied after a failure");
}

}  // namespace syncbus::consumer
