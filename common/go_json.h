// Go's encoding/json output for a JSON value, byte for byte as Kubernetes clients write it:
// object keys sorted, no spaces, <, > and & escaped as \u003c \u003e \u0026, U+2028 and U+2029
// escaped, control characters other than \n \r \t as \u00XX, floats as Go formats them. Used
// where another program compares the bytes (kubectl's last-applied-configuration annotation).
// Pure function; thread-safe.
#pragma once

#include <string>

#include "common/json.h"

namespace syncbus {

std::string GoJsonEncode(const Json& value);

}  // namespace syncbus
