// Cluster credentials with OpenSSL's C API; every handle is owned by a unique_ptr.
#include "tests/kubesim/credentials.h"

#include <memory>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace syncbus::kubesim {
namespace {

template <typename T, auto Free>
struct Deleter {
  void operator()(T* handle) const { Free(handle); }
};
template <typename T, auto Free>
using Owned = std::unique_ptr<T, Deleter<T, Free>>;

using Bignum = Owned<BIGNUM, BN_free>;
using Bio = Owned<BIO, BIO_free_all>;
using Certificate = Owned<X509, X509_free>;
using Extension = Owned<X509_EXTENSION, X509_EXTENSION_free>;
using Key = Owned<EVP_PKEY, EVP_PKEY_free>;

void FreeBuffer(unsigned char* data) {
  OPENSSL_free(data);
}
using Buffer = Owned<unsigned char, FreeBuffer>;

constexpr long kValidFromSeconds = -3600;
constexpr long kValidForSeconds = 365L * 24 * 3600;

// OpenSSL's oldest queued error for `what`; the queue is left empty.
Status OpensslError(const std::string& what) {
  char text[256] = "unknown error";
  if (unsigned long code = ERR_get_error(); code != 0) ERR_error_string_n(code, text, sizeof(text));
  ERR_clear_error();
  return Internal(what + ": " + text);
}

// The PEM that `write` puts into a memory BIO.
template <typename Write>
Result<std::string> Pem(const char* what, Write write) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get()) != 1) return OpensslError(std::string("writing the ") + what);
  char* data = nullptr;
  long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

Status SetSerial(X509* cert) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) return OpensslError("drawing a serial number");
  bytes[0] &= 0x7f;  // positive, as RFC 5280 asks
  Bignum serial(BN_bin2bn(bytes, sizeof(bytes), nullptr));
  if (!serial || BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert)) == nullptr) {
    return OpensslError("setting the serial number");
  }
  return Status::Ok();
}

Status SetSubject(X509* cert, const std::string& common_name) {
  X509_NAME* name = X509_get_subject_name(cert);  // owned by `cert`
  auto add = [name](const char* field, const std::string& value) {
    return X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8,
                                      reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1,
                                      0) == 1;
  };
  if (!add("O", "system:masters") || !add("CN", common_name) ||
      X509_set_issuer_name(cert, name) != 1) {
    return OpensslError("naming the certificate");
  }
  return Status::Ok();
}

// Sets the certificate's subjectPublicKeyInfo to `key`'s P-256 point. X509_set_pubkey would do
// the same through OpenSSL 3's encoder and decoder lookups, some 30 times slower.
Status SetPublicKey(X509* cert, EVP_PKEY* key) {
  size_t size = 0;
  if (EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, nullptr, 0, &size) !=
      1) {
    return OpensslError("sizing the public key");
  }
  Buffer point(static_cast<unsigned char*>(OPENSSL_malloc(size)));
  if (!point || EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY,
                                                point.get(), size, &size) != 1) {
    return OpensslError("reading the public key");
  }
  // On success the certificate owns `point`; the objects are OpenSSL's static ones.
  if (X509_PUBKEY_set0_param(X509_get_X509_PUBKEY(cert), OBJ_nid2obj(NID_X9_62_id_ecPublicKey),
                             V_ASN1_OBJECT, OBJ_nid2obj(NID_X9_62_prime256v1), point.get(),
                             static_cast<int>(size)) != 1) {
    return OpensslError("setting the public key");
  }
  point.release();
  return Status::Ok();
}

// A client certificate's extensions: not a CA, signatures only, for TLS client authentication.
Status AddExtensions(X509* cert) {
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, cert, cert, nullptr, nullptr, 0);
  const std::pair<int, const char*> extensions[] = {{NID_basic_constraints, "critical,CA:FALSE"},
                                                    {NID_key_usage, "critical,digitalSignature"},
                                                    {NID_ext_key_usage, "clientAuth"}};
  for (const auto& [nid, value] : extensions) {
    Extension extension(X509V3_EXT_conf_nid(nullptr, &context, nid, value));
    if (!extension || X509_add_ext(cert, extension.get(), -1) != 1) {
      return OpensslError("adding a certificate extension");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> NewBearerToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) return OpensslError("drawing a bearer token");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  token.reserve(2 * sizeof(bytes));
  for (unsigned char byte : bytes) {
    token += kHex[byte >> 4];
    token += kHex[byte & 0xf];
  }
  return token;
}

Result<ClientCertificate> NewClientCertificate(const std::string& common_name) {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return OpensslError("generating a P-256 key");
  Certificate cert(X509_new());
  if (!cert || X509_set_version(cert.get(), X509_VERSION_3) != 1) {
    return OpensslError("creating a certificate");
  }
  SYNCBUS_RETURN_IF_ERROR(SetSerial(cert.get()));
  if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), kValidFromSeconds) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), kValidForSeconds) == nullptr) {
    return OpensslError("setting the validity period");
  }
  SYNCBUS_RETURN_IF_ERROR(SetSubject(cert.get(), common_name));
  SYNCBUS_RETURN_IF_ERROR(SetPublicKey(cert.get(), key.get()));
  SYNCBUS_RETURN_IF_ERROR(AddExtensions(cert.get()));
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) <= 0) {
    return OpensslError("signing the certificate");
  }
  auto cert_pem = Pem("certificate", [&](BIO* bio) { return PEM_write_bio_X509(bio, cert.get()); });
  if (!cert_pem.ok()) return cert_pem.status();
  // SEC 1 ("EC PRIVATE KEY"), as kubeadm writes client keys; also 3 times faster than PKCS#8.
  auto key_pem = Pem("private key", [&](BIO* bio) {
    return PEM_write_bio_PrivateKey_traditional(bio, key.get(), nullptr, nullptr, 0, nullptr,
                                                nullptr);
  });
  if (!key_pem.ok()) return key_pem.status();
  return ClientCertificate{std::move(cert_pem).value(), std::move(key_pem).value()};
}

}  // namespace syncbus::kubesim
