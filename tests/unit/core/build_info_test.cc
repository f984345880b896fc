#include "common/build_info.h"

#include <regex>
#include <string>

#include <doctest/doctest.h>
#include <prometheus/text_serializer.h>

namespace syncbus {
namespace {

TEST_CASE("build info: the --version text and the syncbus_build_info gauge") {
  const BuildInfo& info = GetBuildInfo();
  CHECK(std::regex_match(std::string(info.version), std::regex("[0-9]+\\.[0-9]+\\.[0-9]+")));
  // A git short hash in a work tree; "unknown" (or what SYNCBUS_REVISION said) outside one.
  CHECK_FALSE(info.revision.empty());
  CHECK_FALSE(info.compiler.empty());
  CHECK(VersionText("syncbus-consumer") == "syncbus-consumer " + std::string(info.version) +
                                               " (revision " + std::string(info.revision) + ", " +
                                               std::string(info.compiler) + ", " +
                                               std::string(info.build_type) + ")");

  prometheus::Registry registry;
  RegisterBuildInfo(registry);
  std::string page = prometheus::TextSerializer().Serialize(registry.Collect());
  CHECK(page.find("syncbus_build_info{build_type=\"" + std::string(info.build_type) +
                  "\",compiler=\"" + std::string(info.compiler) + "\",revision=\"" +
                  std::string(info.revision) + "\",version=\"" + std::string(info.version) +
                  "\"} 1") != std::string::npos);
}

}  // namespace
}  // namespace syncbus
