#include "publisher/hub_cache.h"

#include <algorithm>
#include <utility>

#include "common/log.h"
#include "common/time_format.h"

namespace syncbus::publisher {
namespace {

std::string VersionOf(const Json& object) {
  return object.contains("metadata") ? object["metadata"].value("resourceVersion", "") : "";
}

std::string KeyOf(const Json& object) {
  const Json& m = object.contains("metadata") ? object["metadata"] : Json::object();
  std::string ns = m.value("namespace", "");
  std::string name = m.value("name", "");
  return ns.empty() ? name : ns + "/" + name;
}

bool ReadsSecret(const hive::SyncSetCommonSpec& spec, const std::string& set_ns,
                 const std::string& key) {
  return std::any_of(
      spec.secret_mappings.begin(), spec.secret_mappings.end(),
      [&](const hive::SecretMapping& m) { return SourceSecretKey(m, set_ns) == key; });
}

// When the Secret was last written, as far as its metadata tells (creationTimestamp and the
// managedFields times); the hub's clock.
std::optional<WallTime> WrittenAt(const Json& metadata) {
  std::optional<WallTime> latest;
  auto consider = [&](const Json& t) {
    if (!t.is_string()) return;
    auto parsed = ParseRfc3339(t.get<std::string>());
    if (parsed.ok() && (!latest || *parsed > *latest)) latest = *parsed;
  };
  if (metadata.contains("creationTimestamp")) consider(metadata["creationTimestamp"]);
  if (metadata.contains("managedFields") && metadata["managedFields"].is_array()) {
    for (const auto& f : metadata["managedFields"]) {
      if (f.is_object() && f.contains("time")) consider(f["time"]);
    }
  }
  return latest;
}

}  // namespace

const char* HubKindName(HubKind kind) {
  switch (kind) {
    case HubKind::kClusterDeployment: return "ClusterDeployment";
    case HubKind::kSyncSet: return "SyncSet";
    case HubKind::kSelectorSyncSet: return "SelectorSyncSet";
    case HubKind::kClusterSync: return "ClusterSync";
    case HubKind::kClusterSyncLease: return "ClusterSyncLease";
    case HubKind::kSecret: return "Secret";
  }
  return "?";
}

void HubCache::MarkDirtyLocked(const std::string& key) {
  dirty_.insert(key);
  dirty_cv_.notify_all();
}

void HubCache::MarkAllDirtyLocked() {
  for (const auto& [key, cd] : cds_) dirty_.insert(key);
  dirty_cv_.notify_all();
}

void HubCache::MarkEditedLocked(const std::set<std::string>& keys) {
  if (keys.empty()) return;
  dirty_.insert(keys.begin(), keys.end());
  // A relist marks every cluster, and says nothing of edits.
  if (!replacing_)
    (keys.size() > bulk_edit_clusters_ ? edits_.bulk : edits_.single)
        .insert(keys.begin(), keys.end());
  dirty_cv_.notify_all();
}

void HubCache::DirtyForSyncSet(const hive::SyncSet& ss, std::set<std::string>& out) const {
  for (const auto& ref : ss.cluster_deployment_refs) out.insert(ss.meta.ns + "/" + ref);
}

void HubCache::DirtyForSelectorSyncSet(const hive::SelectorSyncSet& sss,
                                       std::set<std::string>& out) const {
  for (const auto& [key, cd] : cds_) {
    if (sss.selector.Matches(cd->meta.labels)) out.insert(key);
  }
}

void HubCache::DirtyForSecret(const std::string& secret_key, std::set<std::string>& out) const {
  if (replacing_) return;  // a relist marks every cluster anyway
  for (const auto& [key, ss] : syncsets_) {
    if (ReadsSecret(ss->spec, ss->meta.ns, secret_key)) DirtyForSyncSet(*ss, out);
  }
  for (const auto& [key, sss] : selector_syncsets_) {
    if (ReadsSecret(sss->spec, "", secret_key)) DirtyForSelectorSyncSet(*sss, out);
  }
}

Status HubCache::ApplyUpsertLocked(HubKind kind, const Json& object) {
  std::string key = KeyOf(object);
  switch (kind) {
    case HubKind::kClusterDeployment: {
      auto cd = hive::ClusterDeployment::FromJson(object);
      if (!cd.ok()) return cd.status();
      // A label change can start or stop SelectorSyncSet matches: the desired-state revision
      // covers it, so marking this cluster is enough.
      cds_[key] = std::make_shared<const hive::ClusterDeployment>(std::move(*cd));
      MarkEditedLocked({key});
      return Status::Ok();
    }
    case HubKind::kSyncSet: {
      auto ss = hive::SyncSet::FromJson(object);
      if (!ss.ok()) return ss.status();
      std::set<std::string> dirty;
      if (auto old = syncsets_.find(key); old != syncsets_.end())
        DirtyForSyncSet(*old->second, dirty);
      DirtyForSyncSet(*ss, dirty);
      syncsets_[key] = std::make_shared<const hive::SyncSet>(std::move(*ss));
      MarkEditedLocked(dirty);
      return Status::Ok();
    }
    case HubKind::kSelectorSyncSet: {
      auto sss = hive::SelectorSyncSet::FromJson(object);
      if (!sss.ok()) return sss.status();
      std::set<std::string> dirty;
      if (auto old = selector_syncsets_.find(key); old != selector_syncsets_.end()) {
        DirtyForSelectorSyncSet(*old->second, dirty);
      }
      DirtyForSelectorSyncSet(*sss, dirty);
      selector_syncsets_[key] = std::make_shared<const hive::SelectorSyncSet>(std::move(*sss));
      MarkEditedLocked(dirty);
      return Status::Ok();
    }
    case HubKind::kClusterSync: {
      auto cs = hive::ClusterSync::FromJson(object);
      if (!cs.ok()) return cs.status();
      statuses_[key] = std::make_shared<const hive::ClusterSync>(std::move(*cs));
      MarkDirtyLocked(key);
      return Status::Ok();
    }
    case HubKind::kClusterSyncLease: {
      auto lease = hive::ClusterSyncLease::FromJson(object);
      if (!lease.ok()) return lease.status();
      leases_[key] = std::make_shared<const hive::ClusterSyncLease>(std::move(*lease));
      MarkDirtyLocked(key);
      return Status::Ok();
    }
    case HubKind::kSecret: {
      if (!object.contains("metadata") || !object["metadata"].is_object()) {
        return InvalidArgument("metadata: missing");
      }
      const Json& meta = object["metadata"];
      SecretMeta info{meta.value("resourceVersion", ""), WrittenAt(meta)};
      auto old = secrets_.find(key);
      bool changed = old == secrets_.end() || old->second.resource_version != info.resource_version;
      secrets_[key] = std::move(info);
      if (changed) {
        std::set<std::string> dirty;
        DirtyForSecret(key, dirty);
        MarkEditedLocked(dirty);
      }
      return Status::Ok();
    }
  }
  return Internal("unknown kind");
}

void HubCache::ApplyDeleteLocked(HubKind kind, const Json& object) {
  std::string key = KeyOf(object);
  std::set<std::string> dirty;
  switch (kind) {
    case HubKind::kClusterDeployment:
      cds_.erase(key);
      MarkEditedLocked({key});
      break;
    case HubKind::kSyncSet:
      if (auto it = syncsets_.find(key); it != syncsets_.end()) {
        DirtyForSyncSet(*it->second, dirty);
        syncsets_.erase(it);
        MarkEditedLocked(dirty);
      }
      break;
    case HubKind::kSelectorSyncSet:
      if (auto it = selector_syncsets_.find(key); it != selector_syncsets_.end()) {
        DirtyForSelectorSyncSet(*it->second, dirty);
        selector_syncsets_.erase(it);
        MarkEditedLocked(dirty);
      }
      break;
    case HubKind::kClusterSync:
      statuses_.erase(key);
      MarkDirtyLocked(key);
      break;
    case HubKind::kClusterSyncLease:
      leases_.erase(key);
      MarkDirtyLocked(key);
      break;
    case HubKind::kSecret:
      if (secrets_.erase(key) > 0) {
        DirtyForSecret(key, dirty);
        MarkEditedLocked(dirty);
      }
      break;
  }
}

void HubCache::Replace(HubKind kind, const std::vector<Json>& items) {
  std::lock_guard lock(mu_);
  switch (kind) {
    case HubKind::kClusterDeployment: cds_.clear(); break;
    case HubKind::kSyncSet: syncsets_.clear(); break;
    case HubKind::kSelectorSyncSet: selector_syncsets_.clear(); break;
    case HubKind::kClusterSync: statuses_.clear(); break;
    case HubKind::kClusterSyncLease: leases_.clear(); break;
    case HubKind::kSecret: secrets_.clear(); break;
  }
  replacing_ = true;
  for (const auto& item : items) {
    Status s = ApplyUpsertLocked(kind, item);
    if (!s.ok()) {
      ++invalid_;
      log::Warn("ignoring invalid object",
                {{"kind", HubKindName(kind)}, {"object", KeyOf(item)}, {"error", s.message()}});
    }
  }
  replacing_ = false;
  listed_[static_cast<int>(kind)] = true;
  // After a relist anything may have changed (including deletions we never saw).
  MarkAllDirtyLocked();
}

void HubCache::Listed(HubKind kind, const std::string& resource_version) {
  std::lock_guard lock(mu_);
  versions_[static_cast<int>(kind)] = resource_version;
}

void HubCache::Upsert(HubKind kind, const Json& object) {
  std::lock_guard lock(mu_);
  versions_[static_cast<int>(kind)] = VersionOf(object);
  Status s = ApplyUpsertLocked(kind, object);
  if (!s.ok()) {
    ++invalid_;
    log::Warn("ignoring invalid object",
              {{"kind", HubKindName(kind)}, {"object", KeyOf(object)}, {"error", s.message()}});
  }
}

void HubCache::Delete(HubKind kind, const Json& object) {
  std::lock_guard lock(mu_);
  versions_[static_cast<int>(kind)] = VersionOf(object);
  ApplyDeleteLocked(kind, object);
}

bool HubCache::synced() const {
  std::lock_guard lock(mu_);
  for (bool listed : listed_) {
    if (!listed) return false;
  }
  return true;
}

std::vector<std::string> HubCache::TakeDirty(std::chrono::milliseconds timeout, DirtyEdits* edits) {
  std::unique_lock lock(mu_);
  dirty_cv_.wait_for(lock, timeout, [&] { return !dirty_.empty() || woken_; });
  woken_ = false;
  std::vector<std::string> out(dirty_.begin(), dirty_.end());
  dirty_.clear();
  DirtyEdits taken = std::exchange(edits_, {});
  if (edits != nullptr) {
    for (const auto& key : taken.single) taken.bulk.erase(key);
    *edits = std::move(taken);
  }
  return out;
}

void HubCache::MarkDirty(const std::string& cluster_key) {
  std::lock_guard lock(mu_);
  MarkDirtyLocked(cluster_key);
}

void HubCache::MarkAllDirty() {
  std::lock_guard lock(mu_);
  MarkAllDirtyLocked();
}

void HubCache::Wake() {
  std::lock_guard lock(mu_);
  woken_ = true;
  dirty_cv_.notify_all();
}

void HubCache::FindSecretsLocked(const std::vector<hive::SecretMapping>& mappings,
                                 const std::string& set_ns, SecretMetas& out) const {
  for (const auto& m : mappings) {
    std::string key = SourceSecretKey(m, set_ns);
    if (auto secret = secrets_.find(key); secret != secrets_.end())
      out.emplace(key, secret->second);
  }
}

HubSnapshot HubCache::Snapshot(const std::vector<std::string>& cluster_keys) const {
  HubSnapshot snapshot;
  snapshot.clusters.reserve(cluster_keys.size());
  std::lock_guard lock(mu_);
  snapshot.seen.cluster_deployments = versions_[static_cast<int>(HubKind::kClusterDeployment)];
  snapshot.seen.sync_sets = versions_[static_cast<int>(HubKind::kSyncSet)];
  snapshot.seen.selector_sync_sets = versions_[static_cast<int>(HubKind::kSelectorSyncSet)];
  snapshot.selector_sync_sets.reserve(selector_syncsets_.size());
  for (const auto& [name, sss] : selector_syncsets_) {
    snapshot.selector_sync_sets.push_back(sss);
    FindSecretsLocked(sss->spec.secret_mappings, "", snapshot.selector_secrets);
  }
  for (const auto& key : cluster_keys) {
    ClusterInputs& cluster = snapshot.clusters.emplace_back();
    cluster.key = key;
    if (auto cd = cds_.find(key); cd != cds_.end()) {
      cluster.cd = cd->second;
      const std::string prefix = cd->second->meta.ns + "/";
      for (auto it = syncsets_.lower_bound(prefix);
           it != syncsets_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
        cluster.sync_sets.push_back(it->second);
        FindSecretsLocked(it->second->spec.secret_mappings, it->second->meta.ns,
                          cluster.sync_set_secrets);
      }
      if (!cd->second->admin_kubeconfig_secret.empty()) {
        auto kubeconfig = secrets_.find(prefix + cd->second->admin_kubeconfig_secret);
        if (kubeconfig != secrets_.end())
          cluster.kubeconfig_version = kubeconfig->second.resource_version;
      }
    }
    if (auto s = statuses_.find(key); s != statuses_.end()) cluster.status = s->second;
    if (auto l = leases_.find(key); l != leases_.end()) cluster.lease = l->second;
  }
  return snapshot;
}

size_t HubCache::cluster_count() const {
  std::lock_guard lock(mu_);
  return cds_.size();
}

uint64_t HubCache::invalid_objects() const {
  std::lock_guard lock(mu_);
  return invalid_;
}

std::vector<std::string> HubCache::AllClusterKeys() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  out.reserve(cds_.size());
  for (const auto& [k, v] : cds_) out.push_back(k);
  return out;
}

}  // namespace syncbus::publisher
