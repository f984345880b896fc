#include "publisher/hub_cache.h"

#include <algorithm>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/bus/rollout.h"
#include "common/log.h"
#include "common/time_format.h"

namespace syncbus::publisher {
namespace {

std::string VersionOf(const Json& object) {
  return object.contains("metadata") ? object["metadata"].value("resourceVersion", "") : "";
}

// Reads the metadata in place: a conditional that yields a temporary copies it, managedFields
// and all, once per object listed or watched.
std::string KeyOf(const Json& object) {
  auto m = object.find("metadata");
  if (m == object.end() || !m->is_object()) return "";
  std::string ns = m->value("namespace", "");
  std::string name = m->value("name", "");
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

// The cache keeps of each object what the decision reads (hub_snapshot.h, sync_decision.h,
// common/hive/status_rules.h), so that the bulk of a hub's objects never stays in memory: it
// drops a set's resources, patches, labels and other annotations, a ClusterDeployment's
// conditions but the Unreachable one and its annotations but Hive's pause and relocate ones, of a
// ClusterSync all but its SyncReport (sync_report.h), and of a ClusterSyncLease all but its
// renewTime. What is dropped is freed, capacity too: at 100,000 clusters every byte kept per
// object is 100 kB.

// Drops a vector's elements and its capacity (assigning {} keeps the capacity).
template <typename T>
void Free(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

void Trim(hive::ObjectMeta& meta) {
  meta.creation_timestamp = {};
}
void Trim(hive::SyncSetCommonSpec& spec) {
  Free(spec.patches);  // spec.resources were never kept (hive::SetResources::kCheckOnly)
}
void Trim(hive::ClusterDeployment& cd) {
  Trim(cd.meta);
  std::erase_if(cd.meta.annotations, [](const auto& a) {
    return a.first != hive::kSyncSetPauseAnnotation && a.first != hive::kReconcilePauseAnnotation &&
           a.first != hive::kRelocateAnnotation;
  });
  // New conditions, not the parsed ones emptied: an emptied string keeps its heap block.
  std::vector<hive::Condition> kept;
  for (auto& c : cd.conditions) {
    if (c.type == "Unreachable")
      kept.push_back({std::move(c.type), std::move(c.status), {}, {}, {}, {}});
  }
  cd.conditions = std::move(kept);
}
// Of a set's metadata the decision and the rollout keeper read the name, namespace, generation,
// resourceVersion and the rollout annotations, and a gated set's uid (its Events name it).
void TrimSetMeta(hive::ObjectMeta& meta) {
  Trim(meta);
  meta.labels = {};
  std::erase_if(meta.annotations, [](const auto& a) {
    return a.first != rollout::kSpecAnnotation && a.first != rollout::kStateAnnotation;
  });
  if (!meta.annotations.contains(rollout::kSpecAnnotation)) meta.uid = {};
}
void Trim(hive::SyncSet& ss) {
  TrimSetMeta(ss.meta);
  Trim(ss.spec);
}
void Trim(hive::SelectorSyncSet& sss) {
  TrimSetMeta(sss.meta);
  Trim(sss.spec);
}
// Replaces one object kind of every cluster of `into` (the one `field` selects) with those of
// `from` (a list of that kind only), which it empties; clusters left with no object are erased.
// A cluster new to `into` takes `from`'s map node as it is.
template <typename Clusters, typename Field>
void ReplaceKind(Clusters& into, Clusters& from, Field field) {
  for (auto& [key, cluster] : into) field(cluster) = {};
  for (auto it = from.begin(); it != from.end();) {
    auto next = std::next(it);
    if (auto found = into.find(it->first); found != into.end()) {
      field(found->second) = std::move(field(it->second));
    } else {
      into.insert(from.extract(it));
    }
    it = next;
  }
  from.clear();
  std::erase_if(into, [](const auto& entry) { return entry.second.empty(); });
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
  for (const auto& [key, cluster] : objects_.clusters) {
    if (cluster.cd) dirty_.insert(key);
  }
  dirty_cv_.notify_all();
}

void HubCache::MarkEditedLocked(const std::set<std::string>& keys) {
  if (keys.empty()) return;
  dirty_.insert(keys.begin(), keys.end());
  (keys.size() > bulk_edit_clusters_ ? edits_.bulk : edits_.single)
      .insert(keys.begin(), keys.end());
  dirty_cv_.notify_all();
}

void HubCache::DirtyForSyncSet(const hive::SyncSet& ss, std::set<std::string>& out) const {
  for (const auto& ref : ss.cluster_deployment_refs) out.insert(ss.meta.ns + "/" + ref);
}

void HubCache::DirtyForSelectorSyncSet(const hive::SelectorSyncSet& sss,
                                       std::set<std::string>& out) const {
  for (const auto& [key, cluster] : objects_.clusters) {
    if (cluster.cd && sss.selector.Matches(cluster.cd->meta.labels)) out.insert(key);
  }
}

void HubCache::DirtyForSecret(const std::string& secret_key, std::set<std::string>& out) const {
  for (const auto& [key, ss] : objects_.syncsets) {
    if (ReadsSecret(ss->spec, ss->meta.ns, secret_key)) DirtyForSyncSet(*ss, out);
  }
  for (const auto& [key, sss] : objects_.selector_syncsets) {
    if (ReadsSecret(sss->spec, "", secret_key)) DirtyForSelectorSyncSet(*sss, out);
  }
}

Status HubCache::Parse(HubKind kind, const Json& object, Objects& into) {
  std::string key = KeyOf(object);
  auto store = [&](auto& map, auto parsed) -> Status {
    if (!parsed.ok()) return parsed.status();
    Trim(*parsed);
    using T = std::remove_reference_t<decltype(*parsed)>;
    map[std::move(key)] = std::make_shared<const T>(std::move(*parsed));
    return Status::Ok();
  };
  switch (kind) {
    case HubKind::kClusterDeployment: {
      auto cd = hive::ClusterDeployment::FromJson(object);
      if (!cd.ok()) return cd.status();
      Trim(*cd);
      into.clusters[std::move(key)].cd =
          std::make_shared<const hive::ClusterDeployment>(std::move(*cd));
      return Status::Ok();
    }
    case HubKind::kSyncSet:
      return store(into.syncsets, hive::SyncSet::FromJson(object, hive::SetResources::kCheckOnly));
    case HubKind::kSelectorSyncSet:
      return store(into.selector_syncsets,
                   hive::SelectorSyncSet::FromJson(object, hive::SetResources::kCheckOnly));
    case HubKind::kClusterSync: {
      auto cluster_sync = hive::ClusterSync::FromJson(object);
      if (!cluster_sync.ok()) return cluster_sync.status();
      into.clusters[std::move(key)].status = SyncReport::Of(*cluster_sync);
      return Status::Ok();
    }
    case HubKind::kClusterSyncLease: {
      auto lease = hive::ClusterSyncLease::FromJson(object);
      if (!lease.ok()) return lease.status();
      const std::optional<WallTime> renewed = LeaseRenewal(*lease);
      into.clusters[std::move(key)].lease_renewal = renewed ? RenewTime{*renewed} : RenewTime{};
      return Status::Ok();
    }
    case HubKind::kSecret: {
      if (!object.contains("metadata") || !object["metadata"].is_object()) {
        return InvalidArgument("metadata: missing");
      }
      const Json& meta = object["metadata"];
      into.secrets[std::move(key)] = {meta.value("resourceVersion", ""), WrittenAt(meta)};
      return Status::Ok();
    }
  }
  return Internal("unknown kind");
}

Status HubCache::ApplyUpsertLocked(HubKind kind, const Json& object) {
  const std::string key = KeyOf(object);
  std::set<std::string> dirty;
  // The clusters the object made dirty as it was, before it is replaced.
  std::optional<std::string> old_secret_version;
  switch (kind) {
    case HubKind::kSyncSet:
      if (auto old = objects_.syncsets.find(key); old != objects_.syncsets.end())
        DirtyForSyncSet(*old->second, dirty);
      break;
    case HubKind::kSelectorSyncSet:
      if (auto old = objects_.selector_syncsets.find(key); old != objects_.selector_syncsets.end())
        DirtyForSelectorSyncSet(*old->second, dirty);
      break;
    case HubKind::kSecret:
      if (auto old = objects_.secrets.find(key); old != objects_.secrets.end())
        old_secret_version = old->second.resource_version;
      break;
    default: break;
  }
  SYNCBUS_RETURN_IF_ERROR(Parse(kind, object, objects_));
  switch (kind) {
    // A label change can start or stop SelectorSyncSet matches: the desired-state revision
    // covers it, so marking this cluster is enough.
    case HubKind::kClusterDeployment: MarkEditedLocked({key}); break;
    case HubKind::kSyncSet:
      DirtyForSyncSet(*objects_.syncsets.at(key), dirty);
      MarkEditedLocked(dirty);
      break;
    case HubKind::kSelectorSyncSet:
      DirtyForSelectorSyncSet(*objects_.selector_syncsets.at(key), dirty);
      MarkEditedLocked(dirty);
      break;
    case HubKind::kClusterSync:
    case HubKind::kClusterSyncLease: MarkDirtyLocked(key); break;
    case HubKind::kSecret:
      if (old_secret_version != objects_.secrets.at(key).resource_version) {
        DirtyForSecret(key, dirty);
        MarkEditedLocked(dirty);
      }
      break;
  }
  return Status::Ok();
}

template <typename Field>
void HubCache::EraseFromClusterLocked(const std::string& key, Field field) {
  auto it = objects_.clusters.find(key);
  if (it == objects_.clusters.end()) return;
  field(it->second) = {};
  if (it->second.empty()) objects_.clusters.erase(it);
}

void HubCache::ApplyDeleteLocked(HubKind kind, const Json& object) {
  std::string key = KeyOf(object);
  std::set<std::string> dirty;
  switch (kind) {
    case HubKind::kClusterDeployment:
      EraseFromClusterLocked(
          key, [](ClusterObjects & c) -> auto& { return c.cd; });
      MarkEditedLocked({key});
      break;
    case HubKind::kSyncSet:
      if (auto it = objects_.syncsets.find(key); it != objects_.syncsets.end()) {
        DirtyForSyncSet(*it->second, dirty);
        objects_.syncsets.erase(it);
        MarkEditedLocked(dirty);
      }
      break;
    case HubKind::kSelectorSyncSet:
      if (auto it = objects_.selector_syncsets.find(key); it != objects_.selector_syncsets.end()) {
        DirtyForSelectorSyncSet(*it->second, dirty);
        objects_.selector_syncsets.erase(it);
        MarkEditedLocked(dirty);
      }
      break;
    case HubKind::kClusterSync:
      EraseFromClusterLocked(
          key, [](ClusterObjects & c) -> auto& { return c.status; });
      MarkDirtyLocked(key);
      break;
    case HubKind::kClusterSyncLease:
      EraseFromClusterLocked(
          key, [](ClusterObjects & c) -> auto& { return c.lease_renewal; });
      MarkDirtyLocked(key);
      break;
    case HubKind::kSecret:
      if (objects_.secrets.erase(key) > 0) {
        DirtyForSecret(key, dirty);
        MarkEditedLocked(dirty);
      }
      break;
  }
}

void HubCache::Listing::AddPage(std::vector<Json>& items) {
  for (const auto& item : items) {
    Status s = Parse(kind_, item, objects_);
    if (!s.ok()) {
      ++invalid_;
      log::Warn("ignoring invalid object",
                {{"kind", HubKindName(kind_)}, {"object", KeyOf(item)}, {"error", s.message()}});
    }
  }
  items.clear();
}

void HubCache::Replace(Listing listing) {
  std::lock_guard lock(mu_);
  Objects& from = listing.objects_;
  switch (listing.kind_) {
    case HubKind::kClusterDeployment:
      ReplaceKind(
          objects_.clusters, from.clusters, [](ClusterObjects & c) -> auto& { return c.cd; });
      break;
    case HubKind::kSyncSet: objects_.syncsets.swap(from.syncsets); break;
    case HubKind::kSelectorSyncSet: objects_.selector_syncsets.swap(from.selector_syncsets); break;
    case HubKind::kClusterSync:
      ReplaceKind(
          objects_.clusters, from.clusters, [](ClusterObjects & c) -> auto& { return c.status; });
      break;
    case HubKind::kClusterSyncLease:
      ReplaceKind(
          objects_.clusters, from.clusters,
          [](ClusterObjects & c) -> auto& { return c.lease_renewal; });
      break;
    case HubKind::kSecret: objects_.secrets.swap(from.secrets); break;
  }
  invalid_ += listing.invalid_;
  listed_[static_cast<int>(listing.kind_)] = true;
  // After a relist anything may have changed (including deletions we never saw).
  MarkAllDirtyLocked();
}

void HubCache::Replace(HubKind kind, std::vector<Json> items) {
  Listing listing(kind);
  listing.AddPage(items);
  Replace(std::move(listing));
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
    if (auto secret = objects_.secrets.find(key); secret != objects_.secrets.end())
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
  snapshot.selector_sync_sets.reserve(objects_.selector_syncsets.size());
  for (const auto& [name, sss] : objects_.selector_syncsets) {
    snapshot.selector_sync_sets.push_back(sss);
    FindSecretsLocked(sss->spec.secret_mappings, "", snapshot.selector_secrets);
  }
  for (const auto& key : cluster_keys) {
    ClusterInputs& cluster = snapshot.clusters.emplace_back();
    cluster.key = key;
    auto found = objects_.clusters.find(key);
    if (found == objects_.clusters.end()) continue;
    const ClusterObjects& objects = found->second;
    if (objects.cd) {
      cluster.cd = objects.cd;
      const std::string prefix = objects.cd->meta.ns + "/";
      for (auto it = objects_.syncsets.lower_bound(prefix);
           it != objects_.syncsets.end() && it->first.compare(0, prefix.size(), prefix) == 0;
           ++it) {
        cluster.sync_sets.push_back(it->second);
        FindSecretsLocked(it->second->spec.secret_mappings, it->second->meta.ns,
                          cluster.sync_set_secrets);
      }
      if (!objects.cd->admin_kubeconfig_secret.empty()) {
        auto kubeconfig = objects_.secrets.find(prefix + objects.cd->admin_kubeconfig_secret);
        if (kubeconfig != objects_.secrets.end())
          cluster.kubeconfig_version = kubeconfig->second.resource_version;
      }
    }
    cluster.status = objects.status;
    if (objects.lease_renewal) cluster.lease_renewal = objects.lease_renewal.at;
  }
  return snapshot;
}

std::vector<HubCache::RolloutInputs> HubCache::Rollouts(
    const std::function<bool(const hive::ObjectMeta&)>& with_clusters) const {
  std::vector<RolloutInputs> out;
  std::lock_guard lock(mu_);
  auto add_cluster = [&](RolloutInputs& in, const auto& set, const ClusterObjects& cluster) {
    if (cluster.cd && hive::AppliesTo(set, *cluster.cd))
      in.clusters.emplace_back(cluster.cd, cluster.status);
  };
  for (const auto& [key, ss] : objects_.syncsets) {
    if (!ss->meta.annotations.contains(rollout::kSpecAnnotation)) continue;
    RolloutInputs& in = out.emplace_back();
    in.sync_set = ss;
    if (!with_clusters(ss->meta)) continue;
    // A SyncSet names its clusters: only those of its namespace are candidates, in key order.
    std::set<std::string> named;
    for (const auto& ref : ss->cluster_deployment_refs) named.insert(ss->meta.ns + "/" + ref);
    for (const auto& cluster_key : named) {
      if (auto cluster = objects_.clusters.find(cluster_key); cluster != objects_.clusters.end())
        add_cluster(in, *ss, cluster->second);
    }
  }
  for (const auto& [name, sss] : objects_.selector_syncsets) {
    if (!sss->meta.annotations.contains(rollout::kSpecAnnotation)) continue;
    RolloutInputs& in = out.emplace_back();
    in.selector_sync_set = sss;
    if (!with_clusters(sss->meta)) continue;
    for (const auto& [key, cluster] : objects_.clusters) add_cluster(in, *sss, cluster);
  }
  return out;
}

size_t HubCache::cluster_count() const {
  std::lock_guard lock(mu_);
  return static_cast<size_t>(std::count_if(objects_.clusters.begin(), objects_.clusters.end(),
                                           [](const auto& c) { return c.second.cd != nullptr; }));
}

uint64_t HubCache::invalid_objects() const {
  std::lock_guard lock(mu_);
  return invalid_;
}

std::vector<std::string> HubCache::AllClusterKeys() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  out.reserve(objects_.clusters.size());
  for (const auto& [key, cluster] : objects_.clusters) {
    if (cluster.cd) out.push_back(key);
  }
  return out;
}

}  // namespace syncbus::publisher
