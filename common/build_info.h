// What this build is: CMake's project VERSION and the git revision the build tree was configured
// at ("unknown" when the sources are not a git work tree, e.g. the image's build stage), for
// `--version` and the `syncbus_build_info` metric. Immutable; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include <prometheus/registry.h>

namespace syncbus {

struct BuildInfo {
  std::string_view version;     // "0.1.0"
  std::string_view revision;    // git short hash, or "unknown"
  std::string_view compiler;    // "GNU 12.2.0"
  std::string_view build_type;  // "RelWithDebInfo"
};

const BuildInfo& GetBuildInfo();

// The `--version` text of `program`: "syncbus-consumer 0.1.0 (revision 1a2b3c4d5e6f, GNU 12.2.0,
// RelWithDebInfo)".
std::string VersionText(std::string_view program);

// Adds the gauge syncbus_build_info{version,revision,compiler,build_type} = 1 to `registry`.
void RegisterBuildInfo(prometheus::Registry& registry);

}  // namespace syncbus
