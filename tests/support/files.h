// Files for tests: reading one whole, and fresh temporary directories. Stateless; thread-safe.
#pragma once

#include <string>

namespace syncbus::testing {

// The file's content; empty when it cannot be read (yet).
std::string ReadFile(const std::string& path);

// A fresh temporary directory (not removed: kept for post-mortem of failed runs).
std::string MakeTempDir(const std::string& prefix);

}  // namespace syncbus::testing
