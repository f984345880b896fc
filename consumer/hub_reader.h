// HubReader: how a sync reads its cluster's state from the hub (cluster_state.h).
// - DirectHubReader reads it from the hub: GET ClusterDeployment, LIST the namespace's SyncSets,
//   LIST every SelectorSyncSet, GET ClusterSync, at once. Costly for the hub: the fallback.
// - MirrorHubReader serves it from the consumer's HubMirror, once the mirror is at least as new as
//   what the publisher saw when it decided (the request's `seen`). It waits for that up to a bound,
//   then reads directly; so does a request without `seen` (older publishers, replays of old
//   messages), and a mirror that is relisting. Never older state than the publisher decided on.
// Implementations are thread-safe.
#pragma once

#include <chrono>
#include <optional>

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "common/bus/sync_message.h"
#include "common/kube/client.h"
#include "common/status.h"
#include "consumer/cluster_state.h"
#include "consumer/hub_mirror.h"

namespace syncbus::consumer {

class HubReader {
 public:
  virtual ~HubReader() = default;
  virtual Result<ClusterState> Read(const SyncRequest& request) = 0;
  // Asked once the sync has claimed its cluster: whether another sync stored the cluster's status
  // since `state` was read, from newer state (a set at a newer generation than `state` has, or a
  // set `state` does not have). Applying `state` then would undo that sync's work.
  virtual bool Overtaken(const ClusterState& state) const {
    (void)state;
    return false;
  }
  // Reads the cluster's state from the hub itself.
  virtual Result<ClusterState> ReadAfresh(const SyncRequest& request) { return Read(request); }
  // The cluster's state as this reader knows it now, with no version to wait for (a preview's):
  // by default as a request that saw nothing reads it.
  virtual Result<ClusterState> ReadCurrent(const std::string& ns, const std::string& name) {
    SyncRequest request;
    request.cluster_namespace = ns;
    request.cluster_name = name;
    return Read(request);
  }
  // The ClusterSync this process just stored, so the next Read sees it even before its watch
  // event arrives.
  virtual void NoteStatusWritten(const Json& cluster_sync) {
    (void)cluster_sync;
  }  // The cluster's state from a local copy that is already at least as new as the request's
  // `seen`, without waiting and without a hub request; nullopt when there is no such copy.
  virtual std::optional<ClusterState> ReadIfFresh(const SyncRequest& request) {
    (void)request;
    return std::nullopt;
  }
};

class DirectHubReader final : public HubReader {
 public:
  explicit DirectHubReader(kube::Client& hub) : hub_(hub) {}
  Result<ClusterState> Read(const SyncRequest& request) override;

 private:
  kube::Client& hub_;
};

class MirrorHubReader final : public HubReader {
 public:
  // `mirror` and `direct` must outlive the reader. `max_wait`: how long a sync waits for the
  // mirror to catch up before reading directly.
  MirrorHubReader(HubMirror& mirror, HubReader& direct, std::chrono::milliseconds max_wait,
                  prometheus::Registry& registry);
  Result<ClusterState> Read(const SyncRequest& request) override;
  bool Overtaken(const ClusterState& state) const override;
  Result<ClusterState> ReadAfresh(const SyncRequest& request) override;
  // The mirror's state once it has listed, without a hub request; the hub's before.
  Result<ClusterState> ReadCurrent(const std::string& ns, const std::string& name) override;
  void NoteStatusWritten(const Json& cluster_sync) override {
    mirror_.NoteWritten(HubCollection::kClusterSyncs, cluster_sync);
  }
  std::optional<ClusterState> ReadIfFresh(const SyncRequest& request) override;

 private:
  HubMirror& mirror_;
  HubReader& direct_;
  const std::chrono::milliseconds max_wait_;
  prometheus::Family<prometheus::Counter>& reads_;
  prometheus::Counter& fresh_;      // served at once
  prometheus::Counter& waited_;     // served after waiting for the mirror
  prometheus::Counter& behind_;     // direct: the mirror did not catch up in time
  prometheus::Counter& unknown_;    // direct: the request says nothing of what the publisher saw
  prometheus::Counter& overtaken_;  // direct: another sync stored newer state after the mirror read
};

}  // namespace syncbus::consumer
