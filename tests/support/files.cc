#include "tests/support/files.h"

#include <fstream>
#include <sstream>

#include <stdlib.h>

namespace syncbus::testing {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

std::string MakeTempDir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  char* made = mkdtemp(tmpl.data());
  return made ? std::string(made) : std::string("/tmp");
}

}  // namespace syncbus::testing
