// Go's fmt for template values: Sprint, Sprintln and Sprintf with every verb, flag, width,
// precision and argument index (and Go's %!verb(type=value), %!(EXTRA ...), (MISSING),
// (BADWIDTH), (BADPREC), (BADINDEX), (NOVERB) markers), byte for byte. A nil Value is Go's nil
// interface ("<nil>"). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "consumer/gotemplate/value.h"

namespace syncbus::consumer::gotemplate {

// Nullopt when the result would be longer than `limit` bytes (formatting stops early).
std::optional<std::string> Sprint(const std::vector<Value>& args, size_t limit = SIZE_MAX);
std::optional<std::string> Sprintln(const std::vector<Value>& args, size_t limit = SIZE_MAX);
std::optional<std::string> Sprintf(std::string_view format, const std::vector<Value>& args,
                                   size_t limit = SIZE_MAX);

}  // namespace syncbus::consumer::gotemplate
