#include "common/hive/desired_state.h"

#include <algorithm>

#include "common/digest.h"

namespace syncbus::hive {

bool AppliesTo(const hive::SyncSet& ss, const hive::ClusterDeployment& cd) {
  if (ss.meta.ns != cd.meta.ns) return false;
  return std::find(ss.cluster_deployment_refs.begin(), ss.cluster_deployment_refs.end(),
                   cd.meta.name) != ss.cluster_deployment_refs.end();
}

bool AppliesTo(const hive::SelectorSyncSet& sss, const hive::ClusterDeployment& cd) {
  return sss.selector.Matches(cd.meta.labels);
}

DesiredState ComputeDesired(const hive::ClusterDeployment& cd,
                            const std::vector<const hive::SyncSet*>& syncsets,
                            const std::vector<const hive::SelectorSyncSet*>& selector_syncsets,
                            const SecretVersions& secrets, std::vector<DesiredSet> held) {
  DesiredState d;
  d.cluster_key = cd.meta.Key();
  d.skip_reason = cd.SkipReason();
  d.installed = !cd.installed_timestamp.empty();
  std::vector<DesiredSet> ss, sss;
  for (const auto* s : syncsets) {
    if (AppliesTo(*s, cd)) ss.push_back({SetKind::kSyncSet, s->meta.name, s->meta.generation});
  }
  for (const auto* s : selector_syncsets) {
    if (AppliesTo(*s, cd)) {
      sss.push_back({SetKind::kSelectorSyncSet, s->meta.name, s->meta.generation});
    }
  }
  auto by_name = [](const DesiredSet& a, const DesiredSet& b) { return a.name < b.name; };
  std::sort(ss.begin(), ss.end(), by_name);
  std::sort(sss.begin(), sss.end(), by_name);
  d.sets = std::move(ss);
  d.sets.insert(d.sets.end(), sss.begin(), sss.end());
  d.held = std::move(held);

  // Canonical text: the cluster's identity (uid changes when a cluster is re-created), its labels
  // (they feed templates), then each set. Field separators cannot occur in names.
  std::string canon = "v1|" + d.cluster_key + "|" + cd.meta.uid + "|";
  for (const auto& [k, v] : cd.meta.labels) canon += k + "=" + v + ",";
  for (const auto& s : d.sets) {
    canon += (s.kind == SetKind::kSyncSet ? "|ss:" : "|sss:") + s.name + "@" +
             std::to_string(s.generation);
  }
  for (const auto& s : d.held) {
    canon += (s.kind == SetKind::kSyncSet ? "|held-ss:" : "|held-sss:") + s.name;
  }
  SecretVersions sorted = secrets;
  std::sort(sorted.begin(), sorted.end());
  for (const auto& [key, rv] : sorted) canon += "|secret:" + key + "@" + rv;
  d.revision = Sha256Hex(canon).substr(0, 32);
  return d;
}

}  // namespace syncbus::hive
