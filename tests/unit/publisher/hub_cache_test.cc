#include "publisher/hub_cache.h"

#include <doctest/doctest.h>

#include "common/bus/config.h"

using namespace syncbus;
using namespace syncbus::publisher;
using namespace std::chrono_literals;

// Its own namespace: the unit tests of an area compile as one unity batch.
namespace hub_cache_test {

Json Cd(const std::string& name) {
  return {{"metadata", {{"name", name}, {"namespace", name}, {"labels", {{"fleet", "a"}}}}},
          {"spec", {{"installed", true}}}};
}

HubCache MakeCache() {
  return HubCache(static_cast<size_t>(PublisherConfig{}.bulk_edit_clusters));
}

TEST_CASE("hub cache: a list's pages are parsed as they arrive, and replace the kind at its end") {
  HubCache cache = MakeCache();
  cache.Replace(HubKind::kClusterDeployment, {Cd("old")});
  CHECK(cache.TakeDirty(0ms) == std::vector<std::string>{"old/old"});

  HubCache::Listing listing(HubKind::kClusterDeployment);
  std::vector<Json> page1 = {Cd("a"), Cd("b")};
  listing.AddPage(page1);
  CHECK(page1.empty());  // taken: the page's JSON is not kept
  std::vector<Json> page2 = {Cd("c")};
  listing.AddPage(page2);
  CHECK(page2.empty());
  // Until the list completes, the cache holds what it had.
  CHECK(cache.AllClusterKeys() == std::vector<std::string>{"old/old"});
  CHECK(cache.TakeDirty(0ms).empty());

  cache.Replace(std::move(listing));
  CHECK(cache.AllClusterKeys() == std::vector<std::string>{"a/a", "b/b", "c/c"});
  // A relist makes every cluster dirty; one gone from the list is gone.
  CHECK(cache.TakeDirty(0ms) == std::vector<std::string>{"a/a", "b/b", "c/c"});
}

TEST_CASE("hub cache: an invalid object of a page is left out and counted") {
  HubCache cache = MakeCache();
  HubCache::Listing listing(HubKind::kClusterDeployment);
  Json bad = Cd("bad");
  bad["metadata"]["labels"] = "not a map";
  std::vector<Json> page = {Cd("a"), bad};
  listing.AddPage(page);
  cache.Replace(std::move(listing));
  CHECK(cache.AllClusterKeys() == std::vector<std::string>{"a/a"});
  CHECK(cache.invalid_objects() == 1);
}

}  // namespace hub_cache_test
