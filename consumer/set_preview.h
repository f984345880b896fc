// Set preview: what one set's plan (set_plan.h) would do on one target cluster, found out
// without changing anything there: every write of the plan is sent as a server-side dry run
// (dryRun=All) and its answer compared with the object as it is now. The outcome of each object
// follows the sync's rules exactly as SetRun (set_applier.h) would meet them: the steps in order,
// the first refused write stopping the set's applies (the rest not reached), every deletion
// looked at whatever happened before. Blocking; thread-compatible (one call per cluster at a
// time on a client it does not share).
//
// What a dry run cannot show, and how the preview says so:
// - An object last applied client-side (by Hive's kubectl) is, in the sync, first handed to
//   syncbus's field manager and then applied again, which drops the fields the set no longer
//   holds. A dry run cannot chain the second apply to the first one's hand-over, so the diff
//   shows the first apply only; such an object carries kTakeOverNote as its message.
// - A dry run stores nothing, so an object in a namespace, or of a kind (a CRD), that an earlier
//   step of the same set creates cannot be checked by the cluster: it is reported created, with a
//   message saying that it was not checked. (Across sets of a cluster, the caller's concern.)
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

inline constexpr char kTakeOverNote[] =
    "fields a client-side apply set are taken over by the sync, which then drops those the set "
    "no longer holds: not shown";

// `mapper`: the cluster's (a kind not mapped when planned is mapped here, as SetRun does);
// `target`: the cluster's client. Only reads and dry-run writes reach the cluster.
std::vector<ObjectPreview> PreviewSetPlan(const SetPlan& plan, kube::Client& target,
                                          RestMapper& mapper, const PreviewOptions& options);

}  // namespace syncbus::consumer
