// Tests for per-cluster credentials: the generated tokens, keys and certificates, each target
// accepting its own token only, and admin kubeconfigs that the project's client accepts (also
// with a host per cluster and over HTTPS, on a real socket).
#include "tests/kubesim/credentials.h"

#include <memory>
#include <set>
#include <string>

#include <doctest/doctest.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "common/base64.h"
#include "common/http/curl_transport.h"
#include "common/kube/client_impl.h"
#include "common/kube/config.h"
#include "tests/kubesim/sim_server.h"
#include "tests/kubesim/sim_simulation.h"
#include "tests/support/self_signed_cert.h"

namespace syncbus::kubesim {
namespace {

template <typename T, auto Free>
struct Deleter {
  void operator()(T* handle) const { Free(handle); }
};
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using Certificate = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;

Certificate ReadCertificate(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Certificate(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

Key ReadKey(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

// The certificate is well formed, names `common_name`, is signed by `key_pem`'s key and
// carries its public key.
void CheckPair(const std::string& cert_pem, const std::string& key_pem,
               const std::string& common_name) {
  auto cert = ReadCertificate(cert_pem);
  auto key = ReadKey(key_pem);
  REQUIRE(cert);
  REQUIRE(key);
  CHECK(EVP_PKEY_is_a(key.get(), "EC"));
  char curve[32] = "";
  CHECK(EVP_PKEY_get_group_name(key.get(), curve, sizeof(curve), nullptr) == 1);
  CHECK(std::string(curve) == "prime256v1");
  CHECK(X509_check_private_key(cert.get(), key.get()) == 1);
  CHECK(X509_verify(cert.get(), key.get()) == 1);  // self-signed
  char subject[256] = "";
  X509_NAME_oneline(X509_get_subject_name(cert.get()), subject, sizeof(subject));
  CHECK(std::string(subject) == "/O=system:masters/CN=" + common_name);
  CHECK(X509_cmp_current_time(X509_get0_notBefore(cert.get())) < 0);
  CHECK(X509_cmp_current_time(X509_get0_notAfter(cert.get())) > 0);
}

std::string AdminKubeconfig(ApiServer& hub, const std::string& cluster) {
  ApiResponse secret = hub.Call(
      "GET", "/api/v1/namespaces/" + cluster + "/secrets/" + cluster + "-admin-kubeconfig");
  REQUIRE(secret.status == 200);
  auto kubeconfig = DecodeBase64(Json::parse(secret.body)["data"]["kubeconfig"].get<std::string>());
  REQUIRE(kubeconfig.has_value());
  return *kubeconfig;
}

// The bearer token of `cluster`'s admin kubeconfig, as the consumer reads it.
std::string AdminToken(ApiServer& hub, const std::string& cluster) {
  auto config = kube::ParseKubeconfig(AdminKubeconfig(hub, cluster));
  REQUIRE_MESSAGE(config.ok(), config.status().ToString());
  return config->bearer_token;
}

http::ServerRequest AuthorizedGet(const std::string& path, const std::string& token) {
  http::ServerRequest request;
  request.method = "GET";
  request.path = path;
  if (!token.empty()) request.headers = {{"Authorization", "Bearer " + token}};
  return request;
}

std::unique_ptr<Simulation> CredentialedFleet(int clusters, std::string hub_token) {
  Simulation::Options options;
  options.fleet = {.clusters = clusters};
  options.token = std::move(hub_token);
  options.cluster_credentials = true;
  auto sim = Simulation::Create(options);
  REQUIRE_MESSAGE(sim.ok(), sim.status().ToString());
  auto fleet = (*sim)->GenerateFleet("http://sim.test:1234");
  REQUIRE_MESSAGE(fleet.ok(), fleet.status().ToString());
  return std::move(sim).value();
}

TEST_CASE("NewBearerToken draws 32 random bytes as 64 hex characters") {
  std::set<std::string> tokens;
  for (int i = 0; i < 100; ++i) {
    auto token = NewBearerToken();
    REQUIRE(token.ok());
    CHECK(token->size() == 64);
    CHECK(token->find_first_not_of("0123456789abcdef") == std::string::npos);
    tokens.insert(*token);
  }
  CHECK(tokens.size() == 100);
}

TEST_CASE("NewClientCertificate makes a P-256 key and a self-signed certificate for it") {
  auto first = NewClientCertificate("cluster-0001-admin");
  REQUIRE_MESSAGE(first.ok(), first.status().ToString());
  CHECK(first->cert_pem.rfind("-----BEGIN CERTIFICATE-----\n", 0) == 0);
  CHECK(first->key_pem.rfind("-----BEGIN EC PRIVATE KEY-----\n", 0) == 0);
  CheckPair(first->cert_pem, first->key_pem, "cluster-0001-admin");

  auto second = NewClientCertificate("cluster-0001-admin");
  REQUIRE(second.ok());
  CHECK(second->key_pem != first->key_pem);
  // Another key does not match the first certificate.
  auto cert = ReadCertificate(first->cert_pem);
  auto other_key = ReadKey(second->key_pem);
  REQUIRE(cert);
  REQUIRE(other_key);
  CHECK(X509_check_private_key(cert.get(), other_key.get()) != 1);
}

TEST_CASE("With cluster credentials each target accepts its own token only") {
  auto sim = CredentialedFleet(2, "hub-token");
  std::string token0 = AdminToken(sim->hub(), "cluster-0000");
  std::string token1 = AdminToken(sim->hub(), "cluster-0001");
  CHECK(token0.size() == 64);
  CHECK(token1.size() == 64);
  CHECK(token0 != token1);

  const std::string path0 = "/clusters/cluster-0000/api/v1/namespaces";
  CHECK(sim->Dispatch(AuthorizedGet(path0, token0)).kind == Plan::Kind::kApi);
  for (const std::string& wrong : {token1, std::string("hub-token"), std::string()}) {
    CAPTURE(wrong);
    Plan refused = sim->Dispatch(AuthorizedGet(path0, wrong));
    CHECK(refused.kind == Plan::Kind::kRespond);
    CHECK(refused.response.status == 401);
    CHECK(Json::parse(refused.response.body)["reason"] == "Unauthorized");
  }
  // A token that only starts with the right one is refused too.
  CHECK(sim->Dispatch(AuthorizedGet(path0, token0 + "0")).response.status == 401);
  CHECK(sim->Dispatch(AuthorizedGet("/clusters/cluster-0001/api/v1/namespaces", token1)).kind ==
        Plan::Kind::kApi);

  // The hub keeps its own token.
  CHECK(sim->Dispatch(AuthorizedGet("/api/v1/namespaces", "hub-token")).kind == Plan::Kind::kApi);
  CHECK(sim->Dispatch(AuthorizedGet("/api/v1/namespaces", token0)).response.status == 401);
}

TEST_CASE("With cluster credentials and no hub token only the targets require one") {
  auto sim = CredentialedFleet(1, "");
  CHECK(sim->Dispatch(AuthorizedGet("/api/v1/namespaces", "")).kind == Plan::Kind::kApi);
  CHECK(sim->Dispatch(AuthorizedGet("/clusters/cluster-0000/api/v1/namespaces", ""))
            .response.status == 401);
  std::string token = AdminToken(sim->hub(), "cluster-0000");
  CHECK(sim->Dispatch(AuthorizedGet("/clusters/cluster-0000/api/v1/namespaces", token)).kind ==
        Plan::Kind::kApi);
}

TEST_CASE("Admin kubeconfigs carry the cluster's token, client key and certificate") {
  auto sim = CredentialedFleet(2, "hub-token");
  std::set<std::string> keys;
  for (const std::string& name : sim->cluster_names()) {
    CAPTURE(name);
    std::string kubeconfig = AdminKubeconfig(sim->hub(), name);
    auto config = kube::ParseKubeconfig(kubeconfig);
    REQUIRE_MESSAGE(config.ok(), config.status().ToString());
    CHECK(config->server == "http://sim.test:1234/clusters/" + name);
    CHECK(config->bearer_token.size() == 64);
    CHECK(kubeconfig.find("hub-token") == std::string::npos);
    REQUIRE(config->tls);
    CheckPair(config->tls->client_cert_pem, config->tls->client_key_pem, name + "-admin");
    keys.insert(config->tls->client_key_pem);
  }
  CHECK(keys.size() == 2);  // a key of its own per cluster

  // Without the option the kubeconfigs carry the shared token and no client certificate.
  Simulation::Options options;
  options.fleet = {.clusters = 1};
  options.token = "shared";
  auto plain = Simulation::Create(options);
  REQUIRE(plain.ok());
  REQUIRE((*plain)->GenerateFleet("http://sim.test").ok());
  auto config = kube::ParseKubeconfig(AdminKubeconfig((*plain)->hub(), "cluster-0000"));
  REQUIRE(config.ok());
  CHECK(config->bearer_token == "shared");
  CHECK(config->tls->client_cert_pem.empty());
  CHECK(config->tls->client_key_pem.empty());
}

// Starts `options` with two clusters and cluster credentials; the project's client reaches
// cluster-0001 with its admin kubeconfig, and is refused with cluster-0000's token.
void CheckServedThroughKubeconfigs(SimServer::Options options, const std::string& scheme) {
  options.simulation.fleet.clusters = 2;
  options.simulation.token = "hub-token";
  options.simulation.cluster_credentials = true;
  auto started = SimServer::Start(options);
  REQUIRE_MESSAGE(started.ok(), started.status().ToString());
  SimServer& sim = **started;
  std::string host =
      options.simulation.fleet.host_per_cluster ? "cluster-0001.localhost" : "127.0.0.1";

  auto curl = http::CurlTransport::Create({});
  REQUIRE(curl.ok());
  std::shared_ptr<http::Transport> transport = std::move(*curl);
  auto hub_config = kube::ParseKubeconfig(sim.HubKubeconfig());
  REQUIRE(hub_config.ok());
  kube::ClientImpl hub(*hub_config, transport);
  auto kubeconfig_of = [&](const std::string& cluster) {
    auto secret =
        hub.Get(kube::Object(kube::resources::kSecrets, cluster, cluster + "-admin-kubeconfig"));
    REQUIRE_MESSAGE(secret.ok(), secret.status().ToString());
    auto kubeconfig = DecodeBase64((*secret)["data"]["kubeconfig"].get<std::string>());
    REQUIRE(kubeconfig.has_value());
    auto config = kube::ParseKubeconfig(*kubeconfig);
    REQUIRE_MESSAGE(config.ok(), config.status().ToString());
    return *config;
  };
  kube::ClusterConfig config0 = kubeconfig_of("cluster-0000");
  kube::ClusterConfig config1 = kubeconfig_of("cluster-0001");
  CHECK(config1.server ==
        scheme + "://" + host + ":" + std::to_string(sim.port()) + "/clusters/cluster-0001");
  CHECK_FALSE(config1.tls->client_key_pem.empty());

  kube::ClientImpl target1(config1, transport);
  auto namespaces = target1.List(kube::Collection(kube::resources::kNamespaces), {});
  REQUIRE_MESSAGE(namespaces.ok(), namespaces.status().ToString());
  CHECK_FALSE(namespaces->items.empty());

  // cluster-0000's kubeconfig (its token) aimed at cluster-0001 is refused.
  kube::ClusterConfig wrong = config0;
  wrong.server = config1.server;
  kube::ClientImpl intruder(wrong, transport);
  auto refused = intruder.List(kube::Collection(kube::resources::kNamespaces), {});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().http_status() == 401);
}

TEST_CASE("SimServer with hosts per cluster serves kubeconfigs with credentials [concurrent]") {
  SimServer::Options options;
  options.simulation.fleet.host_per_cluster = true;
  CheckServedThroughKubeconfigs(options, "http");
}

TEST_CASE("SimServer over HTTPS serves kubeconfigs with credentials [concurrent]") {
  syncbus::testing::SelfSignedCert cert("kubesim");
  REQUIRE(cert.ok);
  SimServer::Options options;
  options.tls_cert_file = cert.cert;
  options.tls_key_file = cert.key;
  CheckServedThroughKubeconfigs(options, "https");
}

}  // namespace
}  // namespace syncbus::kubesim
