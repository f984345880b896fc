// Set preview: what one set's plan (set_plan.h) would do on one target cluster, found out
// without changing anything there: every write of the plan is sent as a server-side dry run
// (dryRun=All) and its answer compared with the object as it is now. The outcome of each object
// follows the sync's rules exactly as SetRun (set_applier.h) would meet them: the steps in order,
// the first refused write stopping the set's applies (the rest not reached), every deletion
// looked at whatever happened before. Blocking; thread-compatible (one call per cluster at a
// time on a client it does not share).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "common/bus/preview_message.h"
#include "common/kube/client.h"
#include "consumer/rest_mapper.h"
#include "consumer/set_plan.h"

namespace syncbus::consumer {

struct PreviewOptions {
  std::string field_manager = "syncbus";
  // As SyncerOptions::take_over_managers: the fields of these client-side appliers would be taken
  // over by the sync, so the preview shows them gone where the set no longer holds them.
  std::set<std::string> take_over_managers = {"hive6-clustersync", "Go-http-client",
                                              "kubectl-client-side-apply"};
};

// `mapper`: the cluster's (a kind not mapped when planned is mapped here, as SetRun does);
// `target`: the cluster's client. Only reads and dry-run writes reach the cluster.
std::vector<ObjectPreview> PreviewSetPlan(const SetPlan& plan, kube::Client& target,
                                          RestMapper& mapper, const PreviewOptions& options);

}  // namespace syncbus::consumer
