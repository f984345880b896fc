#include "publisher/hub_snapshot.h"

#include <set>

#include "common/bus/rollout_release.h"

namespace syncbus::publisher {

std::string SourceSecretKey(const hive::SecretMapping& mapping, const std::string& set_ns) {
  return (mapping.source.ns.empty() ? set_ns : mapping.source.ns) + "/" + mapping.source.name;
}

ClusterView HubSnapshot::View(const ClusterInputs& cluster) const {
  ClusterView view;
  view.seen = seen;
  view.status = cluster.status ? &*cluster.status : nullptr;
  view.lease_renewal = cluster.lease_renewal;
  if (!cluster.cd) return view;
  const hive::ClusterDeployment& cd = *cluster.cd;
  view.cd = &cd;
  std::vector<const hive::SyncSet*> ns_sets;
  ns_sets.reserve(cluster.sync_sets.size());
  for (const auto& ss : cluster.sync_sets) ns_sets.push_back(ss.get());
  std::vector<const hive::SelectorSyncSet*> all_sss;
  all_sss.reserve(selector_sync_sets.size());
  for (const auto& sss : selector_sync_sets) all_sss.push_back(sss.get());
  std::vector<hive::DesiredSet> held = rollout::TakeHeld(cd, ns_sets, all_sss);

  // The Secrets the applicable sets read, each once, sorted.
  std::map<std::string, const SecretMeta*> read;
  auto reads = [&](const hive::SecretMapping& m, const std::string& set_ns,
                   const SecretMetas& known) {
    std::string key = SourceSecretKey(m, set_ns);
    auto secret = known.find(key);
    const SecretMeta* meta = secret == known.end() ? nullptr : &secret->second;
    // Both maps come from the same cache state: a Secret read by two sets is found in both or in
    // neither.
    read.emplace(std::move(key), meta);
  };
  for (const auto* ss : ns_sets) {
    if (!hive::AppliesTo(*ss, cd)) continue;
    for (const auto& m : ss->spec.secret_mappings) reads(m, ss->meta.ns, cluster.sync_set_secrets);
  }
  for (const auto* sss : all_sss) {
    if (!hive::AppliesTo(*sss, cd)) continue;
    for (const auto& m : sss->spec.secret_mappings) reads(m, "", selector_secrets);
  }
  for (const auto& [secret_key, meta] : read) {
    if (meta == nullptr) {
      view.secrets.emplace_back(secret_key, "");
      continue;
    }
    view.secrets.emplace_back(secret_key, meta->resource_version);
    const auto& written = meta->written_at;
    if (written && (!view.secrets_written_at || *written > *view.secrets_written_at)) {
      view.secrets_written_at = written;
    }
  }
  view.desired = hive::ComputeDesired(cd, ns_sets, all_sss, view.secrets, std::move(held));
  view.kubeconfig_version = cluster.kubeconfig_version;
  return view;
}

}  // namespace syncbus::publisher
