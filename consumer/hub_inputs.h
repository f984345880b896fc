// HubInputs: what a sync, or a preview of one, reads of the hub besides the cluster's state: the
// cluster's client, built from its admin kubeconfig Secret (read by name, and only when no trusted
// client is kept: target_clients.h), and what the plan's steps need (sync_plan.h's PlanReads):
// the source Secrets of the sets' secretMappings, read fresh, with the cluster's discovery side
// by side. Each kubeconfig read counts in `kubeconfig_reads` (null: not counted). Thread-safe (as
// the hub client and TargetClients it is given, which outlive it, as the counter does).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <prometheus/counter.h>

#include "common/hive/types.h"
#include "common/kube/client.h"
#include "common/status.h"
#include "consumer/set_plan.h"
#include "consumer/sync_plan.h"
#include "consumer/target_clients.h"

namespace syncbus::consumer {

class HubInputs {
 public:
  // `request_timeout`: of the target clients built.
  HubInputs(kube::Client& hub, TargetClients& targets, std::chrono::milliseconds request_timeout,
            prometheus::Counter* kubeconfig_reads = nullptr)
      : hub_(hub),
        targets_(targets),
        request_timeout_(request_timeout),
        kubeconfig_reads_(kubeconfig_reads) {}

  // The cluster's client: the kept one, unless `reread` or the Secret is newer than the kept
  // client's (`kubeconfig_version`, "" = unknown), or one built from the Secret, read now.
  Result<Target> OpenTarget(const hive::ClusterDeployment& cd,
                            const std::string& kubeconfig_version, bool reread);
  // Reads the source Secrets `reads` names into `secrets` (16 at a time) while `target`'s
  // discovery (none for a fake cluster) fetches its group-versions. A source Secret that is
  // absent is kept as NotFound (its set fails); any other error is returned.
  Status Read(const PlanReads& reads, const std::optional<Target>& target, SecretSources& secrets);

 private:
  Result<Target> ReadTarget(const hive::ClusterDeployment& cd);
  Status ReadSourceSecrets(const std::vector<std::pair<std::string, std::string>>& sources,
                           SecretSources& secrets);

  kube::Client& hub_;
  TargetClients& targets_;
  const std::chrono::milliseconds request_timeout_;
  prometheus::Counter* const kubeconfig_reads_;
};

}  // namespace syncbus::consumer
