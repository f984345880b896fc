// ClusterPreviewer: what a changed SyncSet or SelectorSyncSet would do on one cluster, planned as
// the sync plans it (sync_plan.h) and run as server-side dry runs (set_preview.h). The cluster's
// state is read as the consumer knows it now (its hub mirror), the changed set put in place of
// the one of the same name (or beside the others, when new), and only that set's work is
// planned: its applies, and in Sync mode the deletion of what it no longer lists (objects another
// applicable set lists are kept, as the sync keeps them); a set that no longer applies to the
// cluster deletes what its ClusterSync entry tracks. Hub reads are those the sync of the same
// change would make: the kubeconfig Secret unless a trusted client is kept, and the set's source
// Secrets. Nothing is written to the hub or the cluster. Thread-safe: Preview() may run for
// several clusters at once.
#pragma once

#include <chrono>
#include <string>

#include "common/bus/preview_message.h"
#include "common/json.h"
#include "common/kube/client.h"
#include "consumer/hub_inputs.h"
#include "consumer/hub_reader.h"
#include "consumer/set_preview.h"
#include "consumer/target_clients.h"

namespace syncbus::consumer {

struct ClusterPreviewerOptions {
  std::chrono::milliseconds request_timeout{30000};  // of target clients built
  PreviewOptions preview;
  prometheus::Counter* kubeconfig_reads =
      nullptr;  // counts the kubeconfig Secrets read (null: none)
};

class ClusterPreviewer {
 public:
  // `hub`, `reader` and `targets` outlive the previewer.
  ClusterPreviewer(ClusterPreviewerOptions options, kube::Client& hub, HubReader& reader,
                   TargetClients& targets)
      : options_(std::move(options)),
        reader_(reader),
        inputs_(hub, targets, options_.request_timeout, options_.kubeconfig_reads) {}

  // The reply for `cluster`: its objects' outcomes, or why it could not be previewed (no
  // ClusterDeployment, skipped by Hive's rules, a fake cluster, the set not for this cluster,
  // its kubeconfig unreadable, the cluster answering nothing, a set that does not parse).
  PreviewReply Preview(const std::string& preview_id, const Json& set,
                       const PreviewCluster& cluster);

 private:
  ClusterPreviewerOptions options_;
  HubReader& reader_;
  HubInputs inputs_;
};

}  // namespace syncbus::consumer
