#include "consumer/hub_mirror.h"

#include "common/kube/resource_version.h"
#include "common/log.h"

namespace syncbus::consumer {
namespace {

const Json& Metadata(const Json& object) {
  static const Json kEmpty = Json::object();
  auto m = object.find("metadata");
  return m != object.end() && m->is_object() ? *m : kEmpty;
}

std::string VersionOf(const Json& object) { return Metadata(object).value("resourceVersion", ""); }

std::string KeyOf(const Json& object) {
  const Json& m = Metadata(object);
  return m.value("namespace", "") + "/" + m.value("name", "");
}

// True unless `held` is a known version at least as new as `incoming`.
bool Newer(const std::string& incoming, const std::string& held) {
  auto h = kube::ParseResourceVersion(held);
  auto i = kube::ParseResourceVersion(incoming);
  return !h || !i || *i > *h;
}

const char* CollectionName(HubCollection c) {
  switch (c) {
    case HubCollection::kClusterDeployments: return "clusterdeployments";
    case HubCollection::kSyncSets: return "syncsets";
    case HubCollection::kSelectorSyncSets: return "selectorsyncsets";
    case HubCollection::kClusterSyncs: return "clustersyncs";
    case HubCollection::kLeases: return "leases";
  }
  return "?";
}

}  // namespace

class HubMirror::Feed final : public kube::ReflectorHandler {
 public:
  Feed(HubMirror& mirror, HubCollection collection) : mirror_(mirror), collection_(collection) {}
  void OnReplace(std::vector<Json> items) override { mirror_.Replace(collection_, std::move(items)); }
  void OnUpsert(Json object) override { mirror_.Upsert(collection_, object, true); }
  void OnDelete(Json object) override { mirror_.Delete(collection_, object); }
  void OnSynced() override {}
  void OnCheckpoint(const std::string& version, bool) override { mirror_.Checkpoint(collection_, version); }
  void OnStale() override { mirror_.MarkStale(collection_); }

 private:
  HubMirror& mirror_;
  const HubCollection collection_;
};

HubMirror::HubMirror() {
  for (int i = 0; i < kHubCollections; ++i) feeds_[i] = std::make_unique<Feed>(*this, static_cast<HubCollection>(i));
}

HubMirror::~HubMirror() = default;

kube::ReflectorHandler& HubMirror::handler(HubCollection collection) {
  return *feeds_[static_cast<int>(collection)];
}

bool HubMirror::synced() const {
  std::lock_guard lock(mu_);
  for (const Progress& p : progress_) {
    if (!p.listed || p.stale) return false;
  }
  return true;
}

bool HubMirror::FreshAtLocked(const HubVersions& want) const {
  auto fresh = [this](HubCollection c, const std::string& version) {
    const Progress& p = progress_[static_cast<int>(c)];
    return p.listed && !p.stale && kube::ResourceVersionAtLeast(p.version, version);
  };
  return fresh(HubCollection::kClusterDeployments, want.cluster_deployments) &&
         fresh(HubCollection::kSyncSets, want.sync_sets) &&
         fresh(HubCollection::kSelectorSyncSets, want.selector_sync_sets);
}

bool HubMirror::FreshAt(const HubVersions& want) const {
  std::lock_guard lock(mu_);
  return FreshAtLocked(want);
}

bool HubMirror::WaitFresh(const HubVersions& want, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return progress_cv_.wait_for(lock, timeout, [&] { return FreshAtLocked(want); });
}

ClusterState HubMirror::Read(const std::string& ns, const std::string& name) const {
  const std::string key = ns + "/" + name;
  std::vector<std::shared_ptr<const hive::SyncSet>> syncsets;
  std::vector<std::shared_ptr<const hive::SelectorSyncSet>> selector_syncsets;
  ClusterState state;
  std::lock_guard lock(mu_);
  auto cd = cds_.find(key);
  if (cd == cds_.end()) return state;
  state.cd = cd->second;
  if (auto in_ns = syncsets_.find(ns); in_ns != syncsets_.end()) {
    for (const auto& [set_name, set] : in_ns->second) syncsets.push_back(set);
  }
  for (const auto& [set_name, set] : selector_syncsets_) selector_syncsets.push_back(set);
  state.sync_sets = ApplicableSyncSets(*state.cd, syncsets);
  state.selector_sync_sets = ApplicableSelectorSyncSets(*state.cd, selector_syncsets);
  if (auto st = statuses_.find(key); st != statuses_.end()) state.status = st->second;
  return state;
}

std::optional<Json> HubMirror::Lease(const std::string& ns, const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = leases_.find(ns + "/" + name);
  if (it == leases_.end()) return std::nullopt;
  return it->second;
}

std::string HubMirror::StatusVersion(const std::string& ns, const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = statuses_.find(ns + "/" + name);
  return it == statuses_.end() ? "" : it->second->meta.resource_version;
}

void HubMirror::NoteWritten(HubCollection collection, const Json& object) {
  std::lock_guard lock(mu_);
  UpsertLocked(collection, object, true);
}

std::string HubMirror::version(HubCollection collection) const {
  std::lock_guard lock(mu_);
  return progress_[static_cast<int>(collection)].version;
}

uint64_t HubMirror::invalid_objects() const {
  std::lock_guard lock(mu_);
  return invalid_;
}

void HubMirror::ClearLocked(HubCollection c) {
  switch (c) {
    case HubCollection::kClusterDeployments: cds_.clear(); break;
    case HubCollection::kSyncSets: syncsets_.clear(); break;
    case HubCollection::kSelectorSyncSets: selector_syncsets_.clear(); break;
    case HubCollection::kClusterSyncs: statuses_.clear(); break;
    case HubCollection::kLeases: leases_.clear(); break;
  }
}

void HubMirror::Replace(HubCollection c, std::vector<Json> items) {
  std::lock_guard lock(mu_);
  ClearLocked(c);
  for (const Json& item : items) UpsertLocked(c, item, false);
}

void HubMirror::Upsert(HubCollection c, const Json& object, bool only_if_newer) {
  {
    std::lock_guard lock(mu_);
    UpsertLocked(c, object, only_if_newer);
    Progress& p = progress_[static_cast<int>(c)];
    if (p.listed && !p.stale) p.version = VersionOf(object);
  }
  progress_cv_.notify_all();
}

void HubMirror::UpsertLocked(HubCollection c, const Json& object, bool only_if_newer) {
  const std::string key = KeyOf(object);
  const std::string version = VersionOf(object);
  // Parses with T::FromJson into `map[k]`, unless the held entry is as new (only_if_newer).
  auto store = [&](auto& map, const std::string& k, auto parse) {
    auto held = map.find(k);
    if (only_if_newer && held != map.end() && !Newer(version, held->second->meta.resource_version)) return;
    auto parsed = parse(object);
    if (!parsed.ok()) {
      ++invalid_;
      log::Warn("ignoring an invalid hub object", {{"collection", CollectionName(c)}, {"object", k},
                                                   {"error", parsed.status().message()}});
      map.erase(k);   // its older version is no longer what the hub holds
      return;
    }
    map[k] = std::make_shared<std::remove_reference_t<decltype(*parsed)>>(std::move(*parsed));
  };
  switch (c) {
    case HubCollection::kClusterDeployments:
      store(cds_, key, hive::ClusterDeployment::FromJson);
      break;
    case HubCollection::kSyncSets:
      store(syncsets_[Metadata(object).value("namespace", "")], Metadata(object).value("name", ""),
            hive::SyncSet::FromJson);
      break;
    case HubCollection::kSelectorSyncSets:
      store(selector_syncsets_, Metadata(object).value("name", ""), hive::SelectorSyncSet::FromJson);
      break;
    case HubCollection::kClusterSyncs:
      store(statuses_, key, hive::ClusterSync::FromJson);
      break;
    case HubCollection::kLeases: {
      auto held = leases_.find(key);
      if (only_if_newer && held != leases_.end() && !Newer(version, VersionOf(held->second))) return;
      leases_[key] = object;
      break;
    }
  }
}

void HubMirror::Delete(HubCollection c, const Json& object) {
  {
    std::lock_guard lock(mu_);
    const std::string key = KeyOf(object);
    const std::string name = Metadata(object).value("name", "");
    switch (c) {
      case HubCollection::kClusterDeployments: cds_.erase(key); break;
      case HubCollection::kSyncSets: {
        auto in_ns = syncsets_.find(Metadata(object).value("namespace", ""));
        if (in_ns != syncsets_.end()) {
          in_ns->second.erase(name);
          if (in_ns->second.empty()) syncsets_.erase(in_ns);
        }
        break;
      }
      case HubCollection::kSelectorSyncSets: selector_syncsets_.erase(name); break;
      case HubCollection::kClusterSyncs: statuses_.erase(key); break;
      case HubCollection::kLeases: leases_.erase(key); break;
    }
    Progress& p = progress_[static_cast<int>(c)];
    if (p.listed && !p.stale) p.version = VersionOf(object);
  }
  progress_cv_.notify_all();
}

void HubMirror::Checkpoint(HubCollection c, const std::string& version) {
  {
    std::lock_guard lock(mu_);
    Progress& p = progress_[static_cast<int>(c)];
    p.version = version;
    p.listed = true;
    p.stale = false;
  }
  progress_cv_.notify_all();
}

void HubMirror::MarkStale(HubCollection c) {
  std::lock_guard lock(mu_);
  progress_[static_cast<int>(c)].stale = true;
}

}  // namespace syncbus::consumer
