// SyncReason: why the publisher enqueued a sync request, typed. On the wire (the body's
// "reason", trace events, the enqueued metric's label) it travels as the text SyncReasonName
// gives, the one place where a reason becomes text. Pure; thread-compatible.
#pragma once

#include <string_view>

namespace syncbus {

enum class SyncReason {
  kStartup,            // "startup": out of sync at the first round after start or leadership
  kMissingStatus,      // "missing-status": no ClusterSync, or no entry for an applicable set
  kGenerationChanged,  // "generation-changed": a set's entry at another generation
  kSetRemoved,         // "set-removed": an entry for a set that no longer applies
  kStatusOutdated,     // "status-outdated": the condition or firstSuccessTime lag the entries
  kSecretChanged,      // "secret-changed": a source Secret of a secretMapping changed
  kFailed,             // "failed": a set failed and the consumer's retries had their chance
  kReapplyDue,         // "reapply-due": the periodic full reapply is due
  kResend,             // "resend": the request stayed outstanding longer than the timeout
};

std::string_view SyncReasonName(SyncReason reason);

}  // namespace syncbus
