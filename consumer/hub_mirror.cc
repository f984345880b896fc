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

std::string VersionOf(const Json& object) {
  return Metadata(object).value("resourceVersion", "");
}

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
    case HubCollection::kClusterSyncLeases: return "clustersyncleases";
  }
  return "?";
}

}  // namespace

// Parses each list page as it arrives into staged maps (so a 10,000-cluster fleet's SyncSets are
// never all held as JSON), which replace the collection's when the list completes.
class HubMirror::Feed final : public kube::ReflectorHandler {
 public:
  Feed(HubMirror& mirror, HubCollection collection) : mirror_(mirror), collection_(collection) {}
  void OnListStart() override {
    staged_ = Maps();
    staged_invalid_ = 0;
  }
  void OnListPage(std::vector<Json>& items) override {
    for (const Json& item : items) {
      if (!Store(staged_, collection_, item, false)) ++staged_invalid_;
    }
    items.clear();
  }
  void OnReplace(std::vector<Json> items) override {
    OnListPage(items);
    mirror_.Replace(collection_, staged_, staged_invalid_);
    OnListStart();
  }
  void OnUpsert(Json object) override { mirror_.Upsert(collection_, object, true); }
  void OnDelete(Json object) override { mirror_.Delete(collection_, object); }
  void OnSynced() override {}
  void OnCheckpoint(const std::string& version, bool) override {
    mirror_.Checkpoint(collection_, version);
  }
  void OnStale() override { mirror_.MarkStale(collection_); }

 private:
  HubMirror& mirror_;
  const HubCollection collection_;
  Maps staged_;  // the reflector's thread only
  uint64_t staged_invalid_ = 0;
};

HubMirror::HubMirror() {
  for (int i = 0; i < kHubCollections; ++i)
    feeds_[i] = std::make_unique<Feed>(*this, static_cast<HubCollection>(i));
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
  auto cd = live_.cds.find(key);
  if (cd == live_.cds.end()) return state;
  state.cd = cd->second;
  if (auto in_ns = live_.syncsets.find(ns); in_ns != live_.syncsets.end()) {
    for (const auto& [set_name, set] : in_ns->second) syncsets.push_back(set);
  }
  for (const auto& [set_name, set] : live_.selector_syncsets) selector_syncsets.push_back(set);
  if (auto st = live_.statuses.find(key); st != live_.statuses.end()) state.status = st->second;
  ChooseSets(state, syncsets, selector_syncsets);
  return state;
}

std::optional<Json> HubMirror::ClusterSyncLease(const std::string& ns,
                                                const std::string& name) const {
  std::string text;
  {
    std::lock_guard lock(mu_);
    auto it = live_.leases.find(ns + "/" + name);
    if (it == live_.leases.end()) return std::nullopt;
    text = it->second.json;
  }
  return Json::parse(text);  // its own dump: cannot fail
}

size_t HubMirror::clusters() const {
  std::lock_guard lock(mu_);
  return live_.cds.size();
}

std::string HubMirror::StatusVersion(const std::string& ns, const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = live_.statuses.find(ns + "/" + name);
  return it == live_.statuses.end() ? "" : it->second->meta.resource_version;
}

std::shared_ptr<const hive::ClusterSync> HubMirror::Status(const std::string& ns,
                                                           const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = live_.statuses.find(ns + "/" + name);
  return it == live_.statuses.end() ? nullptr : it->second;
}

void HubMirror::NoteWritten(HubCollection collection, const Json& object) {
  std::lock_guard lock(mu_);
  if (!Store(live_, collection, object, true)) ++invalid_;
}

std::string HubMirror::version(HubCollection collection) const {
  std::lock_guard lock(mu_);
  return progress_[static_cast<int>(collection)].version;
}

uint64_t HubMirror::invalid_objects() const {
  std::lock_guard lock(mu_);
  return invalid_;
}

void HubMirror::Replace(HubCollection c, Maps& staged, uint64_t invalid) {
  std::lock_guard lock(mu_);
  invalid_ += invalid;
  switch (c) {
    case HubCollection::kClusterDeployments: live_.cds.swap(staged.cds); break;
    case HubCollection::kSyncSets: live_.syncsets.swap(staged.syncsets); break;
    case HubCollection::kSelectorSyncSets:
      live_.selector_syncsets.swap(staged.selector_syncsets);
      break;
    case HubCollection::kClusterSyncs: live_.statuses.swap(staged.statuses); break;
    case HubCollection::kClusterSyncLeases: live_.leases.swap(staged.leases); break;
  }
}

void HubMirror::Upsert(HubCollection c, const Json& object, bool only_if_newer) {
  {
    std::lock_guard lock(mu_);
    if (!Store(live_, c, object, only_if_newer)) ++invalid_;
    Progress& p = progress_[static_cast<int>(c)];
    if (p.listed && !p.stale) p.version = VersionOf(object);
  }
  progress_cv_.notify_all();
}

bool HubMirror::Store(Maps& maps, HubCollection c, const Json& object, bool only_if_newer) {
  const std::string key = KeyOf(object);
  const std::string version = VersionOf(object);
  // Parses with T::FromJson into `map[k]`, unless the held entry is as new (only_if_newer).
  auto store = [&](auto& map, const std::string& k, auto parse) {
    auto held = map.find(k);
    if (only_if_newer && held != map.end() && !Newer(version, held->second->meta.resource_version))
      return true;
    auto parsed = parse(object);
    if (!parsed.ok()) {
      log::Warn(
          "ignoring an invalid hub object",
          {{"collection", CollectionName(c)}, {"object", k}, {"error", parsed.status().message()}});
      map.erase(k);  // its older version is no longer what the hub holds
      return false;
    }
    map[k] = std::make_shared<std::remove_reference_t<decltype(*parsed)>>(std::move(*parsed));
    return true;
  };
  switch (c) {
    case HubCollection::kClusterDeployments:
      return store(maps.cds, key, hive::ClusterDeployment::FromJson);
    case HubCollection::kSyncSets: {
      const std::string ns = Metadata(object).value("namespace", "");
      auto& in_ns = maps.syncsets[ns];
      bool valid = store(in_ns, Metadata(object).value("name", ""),
                         [](const Json& o) { return hive::SyncSet::FromJson(o); });
      if (in_ns.empty()) maps.syncsets.erase(ns);
      return valid;
    }
    case HubCollection::kSelectorSyncSets:
      return store(maps.selector_syncsets, Metadata(object).value("name", ""),
                   [](const Json& o) { return hive::SelectorSyncSet::FromJson(o); });
    case HubCollection::kClusterSyncs:
      return store(maps.statuses, key, hive::ClusterSync::FromJson);
    case HubCollection::kClusterSyncLeases: {
      auto held = maps.leases.find(key);
      if (only_if_newer && held != maps.leases.end() &&
          !Newer(version, held->second.resource_version))
        return true;
      maps.leases[key] = {version, object.dump()};
      return true;
    }
  }
  return true;
}

void HubMirror::Delete(HubCollection c, const Json& object) {
  {
    std::lock_guard lock(mu_);
    const std::string key = KeyOf(object);
    const std::string name = Metadata(object).value("name", "");
    switch (c) {
      case HubCollection::kClusterDeployments: live_.cds.erase(key); break;
      case HubCollection::kSyncSets: {
        auto in_ns = live_.syncsets.find(Metadata(object).value("namespace", ""));
        if (in_ns != live_.syncsets.end()) {
          in_ns->second.erase(name);
          if (in_ns->second.empty()) live_.syncsets.erase(in_ns);
        }
        break;
      }
      case HubCollection::kSelectorSyncSets: live_.selector_syncsets.erase(name); break;
      case HubCollection::kClusterSyncs: live_.statuses.erase(key); break;
      case HubCollection::kClusterSyncLeases: live_.leases.erase(key); break;
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
