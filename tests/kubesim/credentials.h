// Per-cluster credentials of a simulated fleet: a random bearer token that only the cluster
// accepts, and an EC P-256 client key with a self-signed certificate for its admin kubeconfig
// (decoys over plain HTTP: whole-system tests look for them where they must never appear).
// Stateless functions over OpenSSL's CSPRNG; thread-safe.
#pragma once

#include <string>

#include "common/status.h"

namespace syncbus::kubesim {

// 32 random bytes, hex-encoded (64 characters).
Result<std::string> NewBearerToken();

struct ClientCertificate {
  std::string cert_pem;  // X.509, self-signed, subject CN=<common name>, O=system:masters
  std::string key_pem;   // the certificate's P-256 private key (SEC 1, unencrypted)
};

// A fresh key and a certificate for it, valid from an hour ago for a year.
Result<ClientCertificate> NewClientCertificate(const std::string& common_name);

}  // namespace syncbus::kubesim
