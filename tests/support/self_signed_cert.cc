#include "tests/support/self_signed_cert.h"

#include <cstdlib>
#include <filesystem>

namespace syncbus::testing {

SelfSignedCert::SelfSignedCert(const std::string& common_name) {
  char pattern[] = "/tmp/syncbus-tls-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return;
  dir = pattern;
  cert = dir + "/cert.pem";
  key = dir + "/key.pem";
  std::string command =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
      "-nodes -days 1 -subj /CN=" +
      common_name + " -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " + key + " -out " +
      cert + " >/dev/null 2>&1";
  ok = std::system(command.c_str()) == 0;
}

SelfSignedCert::~SelfSignedCert() {
  std::error_code ignored;
  if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
}

}  // namespace syncbus::testing
