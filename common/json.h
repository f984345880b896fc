// Json: the project's JSON value type (nlohmann::json, from Debian's nlohmann-json3-dev).
#pragma once

#include <nlohmann/json.hpp>

namespace syncbus {
using Json = nlohmann::json;
}  // namespace syncbus
