#include "common/bus/sync_reason.h"

namespace syncbus {

std::string_view SyncReasonName(SyncReason reason) {
  switch (reason) {
    case SyncReason::kStartup: return "startup";
    case SyncReason::kMissingStatus: return "missing-status";
    case SyncReason::kGenerationChanged: return "generation-changed";
    case SyncReason::kSetRemoved: return "set-removed";
    case SyncReason::kStatusOutdated: return "status-outdated";
    case SyncReason::kSecretChanged: return "secret-changed";
    case SyncReason::kFailed: return "failed";
    case SyncReason::kReapplyDue: return "reapply-due";
    case SyncReason::kResend: return "resend";
  }
  return "unknown";
}

}  // namespace syncbus
