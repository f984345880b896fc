#include "tests/support/env_file.h"

#include <cstdlib>
#include <sstream>

#include "tests/support/files.h"

namespace syncbus::testing {

Result<EnvFile> ParseEnvFile(const std::string& text, const std::string& what) {
  EnvFile env;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto eq = line.find('=');
    if (eq == std::string::npos) return InvalidArgument(what + ": not KEY=VALUE: " + line);
    std::string value = line.substr(eq + 1);
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    env[line.substr(0, eq)] = value;
  }
  return env;
}

Result<EnvFile> LoadEnvFile(const char* variable, const std::string& what,
                            const std::string& hint) {
  const char* path = std::getenv(variable);
  if (path == nullptr || *path == '\0') {
    return NotFound(std::string(variable) + " is not set (" + hint + ")");
  }
  std::string text = ReadFile(path);
  if (text.empty()) return NotFound("cannot read " + what + " file " + path);
  Result<EnvFile> env = ParseEnvFile(text, what);
  if (!env.ok()) return env.status().Annotate(path);
  return env;
}

Result<std::string> EnvValue(const EnvFile& env, const std::string& key, const std::string& what) {
  auto it = env.find(key);
  if (it == env.end() || it->second.empty()) return InvalidArgument(what + ": missing " + key);
  return it->second;
}

}  // namespace syncbus::testing
