// Request routing shared by the simulator's socket server and the in-process transport: the hub
// at the root, target clusters under /clusters/<name>, the control API under /_sim/. Pure
// functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace syncbus::kubesim {

struct Route {
  enum class Kind { kApi, kControl };
  Kind kind = Kind::kApi;
  std::string cluster;  // kApi: the target cluster's name, empty for the hub
  std::string path;     // kApi: the API path ("/api/v1/namespaces"); kControl: after "/_sim"
};

// "/api/v1/pods"                       -> hub, "/api/v1/pods"
// "/clusters/c1/api/v1/pods"           -> cluster c1, "/api/v1/pods"
// "/clusters/c1"                       -> cluster c1, "/"
// "/_sim/stats"                        -> control, "/stats"
Route RouteRequest(std::string_view path);

// The prefix that RouteRequest strips for a target ("/clusters/<name>"), empty for the hub.
std::string ClusterPathPrefix(std::string_view cluster);

}  // namespace syncbus::kubesim
