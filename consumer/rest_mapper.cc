#include "consumer/rest_mapper.h"

#include <cctype>
#include <future>
#include <vector>

namespace syncbus::consumer {

bool Answered(const Status& failure) {
  if (failure.http_status() > 0) return true;
  Code code = failure.code();
  return code != Code::kUnavailable && code != Code::kTimeout && code != Code::kCancelled;
}

Result<RestMapper::Kinds> RestMapper::Discover(const std::string& api_version) {
  auto slash = api_version.find('/');
  std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
  std::string version = slash == std::string::npos ? api_version : api_version.substr(slash + 1);
  std::string path = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  auto list = client_.GetPath(path);
  if (!list.ok()) {
    if (list.status().code() == Code::kNotFound) {
      return NotFound("the cluster does not serve " + api_version);
    }
    return list.status().Annotate("discovery of " + api_version);
  }
  Kinds kinds;
  if (!list->contains("resources") || !(*list)["resources"].is_array()) {
    return Unavailable("discovery of " + api_version + ": no resources list in the answer");
  }
  auto lower = [](std::string text) {
    for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return text;
  };
  for (const auto& r : (*list)["resources"]) {
    std::string name = r.value("name", "");
    if (name.empty() || name.find('/') != std::string::npos) continue;  // subresources
    kube::Resource res{group, version, name, r.value("kind", ""), r.value("namespaced", false)};
    std::vector<std::string> aliases = {lower(res.kind), name, lower(r.value("singularName", ""))};
    for (const auto& short_name : r.value("shortNames", Json::array())) {
      if (short_name.is_string()) aliases.push_back(lower(short_name.get<std::string>()));
    }
    for (const std::string& alias : aliases) {
      if (!alias.empty()) kinds.aliases.emplace(alias, res.kind);
    }
    kinds.by_kind.emplace(res.kind, std::move(res));
  }
  return kinds;
}

std::optional<kube::Resource> RestMapper::Find(const std::string& api_version,
                                               const std::string& kind, bool lenient) {
  std::lock_guard lock(mu_);
  auto gv = cache_.find(api_version);
  if (gv == cache_.end()) return std::nullopt;
  auto k = gv->second.by_kind.find(kind);
  if (k != gv->second.by_kind.end()) return k->second;
  if (!lenient) return std::nullopt;
  std::string folded = kind;
  for (char& c : folded) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto alias = gv->second.aliases.find(folded);
  if (alias == gv->second.aliases.end()) return std::nullopt;
  return gv->second.by_kind.at(alias->second);
}

Result<kube::Resource> RestMapper::MapWith(const std::string& api_version, const std::string& kind,
                                           bool lenient) {
  if (auto found = Find(api_version, kind, lenient)) return *found;
  auto kinds = Discover(api_version);  // unknown or uncached: (re)discover once
  if (!kinds.ok()) return kinds.status();
  {
    std::lock_guard lock(mu_);
    cache_[api_version] = std::move(*kinds);
  }
  if (auto found = Find(api_version, kind, lenient)) return *found;
  return NotFound("no resource of kind " + kind + " in " + api_version);
}

Result<kube::Resource> RestMapper::Map(const std::string& api_version, const std::string& kind) {
  return MapWith(api_version, kind, /*lenient=*/false);
}

Result<kube::Resource> RestMapper::MapLeniently(const std::string& api_version,
                                                const std::string& kind_or_resource) {
  return MapWith(api_version, kind_or_resource, /*lenient=*/true);
}

std::optional<bool> RestMapper::Prefetch(const std::set<std::string>& api_versions) {
  std::vector<std::string> missing;
  {
    std::lock_guard lock(mu_);
    for (const auto& gv : api_versions) {
      if (!gv.empty() && cache_.count(gv) == 0) missing.push_back(gv);
    }
  }
  if (missing.empty()) return std::nullopt;
  std::vector<std::future<Result<Kinds>>> answers;
  answers.reserve(missing.size());
  for (const auto& gv : missing) {
    answers.push_back(std::async(std::launch::async, [this, gv] { return Discover(gv); }));
  }
  bool answered = false;
  for (size_t i = 0; i < missing.size(); ++i) {
    auto kinds = answers[i].get();
    if (!kinds.ok()) {
      answered = answered || Answered(kinds.status());
      continue;
    }
    answered = true;
    std::lock_guard lock(mu_);
    cache_.try_emplace(missing[i], std::move(*kinds));
  }
  return answered;
}

}  // namespace syncbus::consumer
