// Request routing for the simulator.
#include "tests/kubesim/sim_router.h"

namespace syncbus::kubesim {
namespace {

constexpr std::string_view kClustersPrefix = "/clusters/";
constexpr std::string_view kControlPrefix = "/_sim";

}  // namespace

Route RouteRequest(std::string_view path) {
  Route route;
  if (path == kControlPrefix ||
      (path.substr(0, kControlPrefix.size()) == kControlPrefix &&
       path.size() > kControlPrefix.size() && path[kControlPrefix.size()] == '/')) {
    route.kind = Route::Kind::kControl;
    route.path = std::string(path.substr(kControlPrefix.size()));
    if (route.path.empty()) route.path = "/";
    return route;
  }
  if (path.substr(0, kClustersPrefix.size()) == kClustersPrefix) {
    std::string_view rest = path.substr(kClustersPrefix.size());
    size_t slash = rest.find('/');
    std::string_view name = rest.substr(0, slash);
    if (!name.empty()) {
      route.cluster = std::string(name);
      route.path = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
      return route;
    }
  }
  route.path = std::string(path.empty() ? "/" : path);
  return route;
}

std::string ClusterPathPrefix(std::string_view cluster) {
  if (cluster.empty()) return {};
  return std::string(kClustersPrefix) + std::string(cluster);
}

}  // namespace syncbus::kubesim
