#include "common/bus/sync_reason.h"

#include <set>
#include <string>

#include <doctest/doctest.h>

using namespace syncbus;

TEST_CASE("sync reasons travel as the texts publishers have always written") {
  // The body's "reason", trace events and the enqueued metric's label: operators' queries and
  // older readers know these words.
  CHECK(SyncReasonName(SyncReason::kStartup) == "startup");
  CHECK(SyncReasonName(SyncReason::kMissingStatus) == "missing-status");
  CHECK(SyncReasonName(SyncReason::kGenerationChanged) == "generation-changed");
  CHECK(SyncReasonName(SyncReason::kSetRemoved) == "set-removed");
  CHECK(SyncReasonName(SyncReason::kStatusOutdated) == "status-outdated");
  CHECK(SyncReasonName(SyncReason::kSecretChanged) == "secret-changed");
  CHECK(SyncReasonName(SyncReason::kFailed) == "failed");
  CHECK(SyncReasonName(SyncReason::kReapplyDue) == "reapply-due");
  CHECK(SyncReasonName(SyncReason::kResend) == "resend");
  std::set<std::string> names;
  for (int r = 0; r <= static_cast<int>(SyncReason::kResend); ++r)
    names.emplace(SyncReasonName(static_cast<SyncReason>(r)));
  CHECK(names.size() == 9);
  CHECK(names.count("unknown") == 0);
}
