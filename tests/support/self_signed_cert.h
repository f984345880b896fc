// A throw-away self-signed certificate for IP 127.0.0.1 and DNS localhost, made with the openssl
// command line tool in a fresh temporary directory that the destructor removes. Not thread-safe.
#pragma once

#include <string>

namespace syncbus::testing {

struct SelfSignedCert {
  explicit SelfSignedCert(const std::string& common_name = "localhost");
  ~SelfSignedCert();
  SelfSignedCert(const SelfSignedCert&) = delete;
  SelfSignedCert& operator=(const SelfSignedCert&) = delete;

  std::string dir, cert, key;  // PEM files
  bool ok = false;             // openssl made them
};

}  // namespace syncbus::testing
