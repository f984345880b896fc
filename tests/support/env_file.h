// KEY=VALUE env files that the test fixtures' scripts write (scripts/rabbitmq-node's broker.env,
// scripts/envtest's envtest.env) and tests read through a variable naming the file. Stateless;
// thread-safe.
#pragma once

#include <map>
#include <string>

#include "common/status.h"

namespace syncbus::testing {

using EnvFile = std::map<std::string, std::string>;

// Lines of KEY=VALUE (a value may be quoted); blank lines and # comments are skipped. `what`
// prefixes error messages.
Result<EnvFile> ParseEnvFile(const std::string& text, const std::string& what);

// Reads and parses the file named by the environment variable `variable`. kNotFound when the
// variable is unset (its message ends with `hint`) or the file cannot be read.
Result<EnvFile> LoadEnvFile(const char* variable, const std::string& what, const std::string& hint);

// The value of `key`; kInvalidArgument when it is missing or empty.
Result<std::string> EnvValue(const EnvFile& env, const std::string& key, const std::string& what);

}  // namespace syncbus::testing
