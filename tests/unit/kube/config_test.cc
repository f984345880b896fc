#include "common/kube/config.h"

#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace syncbus::kube {
namespace {

namespace fs = std::filesystem;

// A fresh directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "kube-config-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }
  void Write(const std::string& name, const std::string& content) const {
    std::ofstream(path_ + "/" + name) << content;
  }

 private:
  std::string path_;
};

// Sets an environment variable for one test and restores the old value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value == nullptr) {
      unsetenv(name);
    } else {
      setenv(name, value, 1);
    }
  }
  ~ScopedEnv() {
    if (old_.has_value()) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

constexpr char kTwoContexts[] = R"(
apiVersion: v1
kind: Config
current-context: hub
clusters:
- name: hub-cluster
  cluster:
    server: https://hub.example:6443/k8s/clusters/c-1
    certificate-authority-data: Y2EtcGVtCg==
- name: other-cluster
  cluster:
    server: https://other.example:443
    insecure-skip-tls-verify: true
    tls-server-name: api.other.example
contexts:
- name: hub
  context:
    cluster: hub-cluster
    user: token-user
    namespace: hive
- name: other
  context:
    cluster: other-cluster
    user: cert-user
users:
- name: token-user
  user:
    token: secret-token
- name: cert-user
  user:
    client-certificate-data: Y2VydC1wZW0K
    client-key-data: a2V5LXBlbQo=
)";

TEST_CASE("kubeconfig: current-context with a bearer token and CA data") {
  Result<ClusterConfig> config = ParseKubeconfig(kTwoContexts);
  REQUIRE(config.ok());
  CHECK(config->server == "https://hub.example:6443/k8s/clusters/c-1");
  CHECK(config->bearer_token == "secret-token");
  CHECK(config->token_file.empty());
  CHECK(config->tls->ca_pem == "ca-pem\n");
  CHECK(config->tls->ca_file.empty());
  CHECK_FALSE(config->tls->insecure_skip_verify);
  CHECK(config->tls->client_cert_pem.empty());
}

TEST_CASE("kubeconfig: an explicit context with client certificate data") {
  Result<ClusterConfig> config = ParseKubeconfig(kTwoContexts, "other");
  REQUIRE(config.ok());
  CHECK(config->server == "https://other.example:443");
  CHECK(config->bearer_token.empty());
  CHECK(config->tls->client_cert_pem == "cert-pem\n");
  CHECK(config->tls->client_key_pem == "key-pem\n");
  CHECK(config->tls->insecure_skip_verify);
  CHECK(config->tls->server_name == "api.other.example");
  CHECK(config->tls->ca_pem.empty());
}

TEST_CASE("kubeconfig: unknown context, cluster or user is named in the error") {
  Result<ClusterConfig> missing_context = ParseKubeconfig(kTwoContexts, "x");
  CHECK(missing_context.status().code() == Code::kInvalidArgument);
  CHECK(missing_context.status().message() == "kubeconfig: context \"x\" not found");

  Result<ClusterConfig> missing_cluster = ParseKubeconfig(R"(
current-context: a
contexts:
- name: a
  context: {cluster: nowhere, user: u}
)");
  CHECK(missing_cluster.status().message() == "kubeconfig: cluster \"nowhere\" not found");

  Result<ClusterConfig> missing_user = ParseKubeconfig(R"(
current-context: a
contexts:
- name: a
  context: {cluster: c, user: ghost}
clusters:
- name: c
  cluster: {server: "https://c:6443"}
)");
  CHECK(missing_user.status().message() == "kubeconfig: user \"ghost\" not found");
}

TEST_CASE("kubeconfig: missing keys are named with their position") {
  Result<ClusterConfig> no_server = ParseKubeconfig(R"(
current-context: a
contexts:
- name: a
  context: {cluster: c}
clusters:
- name: c
  cluster: {certificate-authority: /ca.crt}
)");
  CHECK(no_server.status().code() == Code::kInvalidArgument);
  CHECK(no_server.status().message() == "kubeconfig: clusters[0].cluster.server: missing");

  Result<ClusterConfig> no_cluster_ref = ParseKubeconfig(R"(
current-context: a
contexts:
- name: b
  context: {cluster: c}
- name: a
  context: {user: u}
)");
  CHECK(no_cluster_ref.status().message() == "kubeconfig: contexts[1].context.cluster: missing");

  Result<ClusterConfig> no_current = ParseKubeconfig("clusters: []\n");
  CHECK(no_current.status().message() == "kubeconfig: no current-context set and no context given");
}

TEST_CASE("kubeconfig: invalid base64 names the key") {
  Result<ClusterConfig> config = ParseKubeconfig(R"(
current-context: a
contexts:
- name: a
  context: {cluster: c, user: u}
clusters:
- name: c
  cluster: {server: "https://c:6443"}
users:
- name: u
  user:
    client-certificate-data: Y2VydC1wZW0K
    client-key-data: "not*base64"
)");
  CHECK(config.status().code() == Code::kInvalidArgument);
  CHECK(config.status().message() == "kubeconfig: users[0].user.client-key-data: invalid base64");

  Result<ClusterConfig> truncated = ParseKubeconfig(R"(
current-context: a
contexts:
- name: a
  context: {cluster: c}
clusters:
- name: c
  cluster: {server: "https://c:6443", certificate-authority-data: "Y2EtcGVtC"}
)");
  CHECK(truncated.status().message() ==
        "kubeconfig: clusters[0].cluster.certificate-authority-data: invalid base64");
}

TEST_CASE("kubeconfig: relative file paths resolve against the base directory") {
  TempDir dir;
  dir.Write("token", "file-token\n");
  std::string yaml = R"(
current-context: a
contexts:
- name: a
  context: {cluster: c, user: u}
clusters:
- name: c
  cluster: {server: "https://c:6443", certificate-authority: certs/ca.crt}
users:
- name: u
  user:
    tokenFile: token
    client-certificate: /etc/abs/client.crt
    client-key: keys/client.key
)";
  Result<ClusterConfig> config = ParseKubeconfig(yaml, "", dir.path());
  REQUIRE(config.ok());
  CHECK(config->tls->ca_file == dir.path() + "/certs/ca.crt");
  CHECK(config->tls->client_cert_file == "/etc/abs/client.crt");
  CHECK(config->tls->client_key_file == dir.path() + "/keys/client.key");
  CHECK(config->token_file == dir.path() + "/token");
  CHECK(config->bearer_token == "file-token");
}

TEST_CASE("kubeconfig: a token wins over tokenFile, an unreadable tokenFile is an error") {
  Result<ClusterConfig> both = ParseKubeconfig(R"(
current-context: a
contexts:
- name: a
  context: {cluster: c, user: u}
clusters:
- name: c
  cluster: {server: "https://c:6443"}
users:
- name: u
  user: {token: inline, tokenFile: /nonexistent/token}
)");
  REQUIRE(both.ok());
  CHECK(both->bearer_token == "inline");
  CHECK(both->token_file.empty());

  Result<ClusterConfig> unreadable = ParseKubeconfig(R"(
current-context: a
contexts:
- name: a
  context: {cluster: c, user: u}
clusters:
- name: c
  cluster: {server: "https://c:6443"}
users:
- name: u
  user: {tokenFile: /nonexistent/token}
)");
  CHECK(unreadable.status().code() == Code::kInvalidArgument);
  CHECK(unreadable.status().message().starts_with(
      "kubeconfig: users[0].user.tokenFile: cannot read /nonexistent/token"));
}

TEST_CASE("kubeconfig: credential plugins and basic auth are unsupported") {
  auto with_user = [](const std::string& user) {
    return ParseKubeconfig(R"(
current-context: a
contexts:
- name: a
  context: {cluster: c, user: u}
clusters:
- name: c
  cluster: {server: "https://c:6443"}
users:
- name: u
  user:
)" + user);
  };
  Result<ClusterConfig> exec =
      with_user("    exec: {command: aws, apiVersion: client.authentication.k8s.io/v1}\n");
  CHECK(exec.status().code() == Code::kUnsupported);
  CHECK(exec.status().message() ==
        "kubeconfig: users[0].user.exec: credential plugins are not supported");

  Result<ClusterConfig> provider = with_user("    auth-provider: {name: gcp}\n");
  CHECK(provider.status().code() == Code::kUnsupported);
  CHECK(provider.status().message().find("users[0].user.auth-provider") != std::string::npos);

  Result<ClusterConfig> basic = with_user("    username: admin\n    password: pw\n");
  CHECK(basic.status().code() == Code::kUnsupported);
}

TEST_CASE("kubeconfig: malformed values") {
  Result<ClusterConfig> bad_bool = ParseKubeconfig(R"(
current-context: a
contexts:
- name: a
  context: {cluster: c}
clusters:
- name: c
  cluster: {server: "https://c:6443", insecure-skip-tls-verify: perhaps}
)");
  CHECK(bad_bool.status().message() ==
        "kubeconfig: clusters[0].cluster.insecure-skip-tls-verify: not a boolean");

  Result<ClusterConfig> cert_without_key = ParseKubeconfig(R"(
current-context: a
contexts:
- name: a
  context: {cluster: c, user: u}
clusters:
- name: c
  cluster: {server: "https://c:6443"}
users:
- name: u
  user: {client-certificate: /tmp/c.crt}
)");
  CHECK(cert_without_key.status().code() == Code::kInvalidArgument);
  CHECK(cert_without_key.status().message().find("users[0].user") != std::string::npos);

  Result<ClusterConfig> not_yaml = ParseKubeconfig("clusters: [unclosed\n");
  CHECK(not_yaml.status().code() == Code::kInvalidArgument);
  CHECK(not_yaml.status().message().starts_with("kubeconfig: invalid YAML"));

  Result<ClusterConfig> scalar = ParseKubeconfig("just a string");
  CHECK(scalar.status().code() == Code::kInvalidArgument);
}

TEST_CASE("kubeconfig: a context without a user is anonymous") {
  Result<ClusterConfig> config = ParseKubeconfig(R"(
current-context: a
contexts:
- name: a
  context: {cluster: c}
clusters:
- name: c
  cluster: {server: "http://127.0.0.1:8080/"}
)");
  REQUIRE(config.ok());
  CHECK(config->server == "http://127.0.0.1:8080/");
  CHECK(config->bearer_token.empty());
}

TEST_CASE(
    "kubeconfig file: paths resolve against the file's directory, a missing file is NotFound") {
  TempDir dir;
  dir.Write("config", R"(
current-context: a
contexts:
- name: a
  context: {cluster: c, user: u}
clusters:
- name: c
  cluster: {server: "https://c:6443", certificate-authority: ca.crt}
users:
- name: u
  user: {client-certificate: u.crt, client-key: u.key}
)");
  Result<ClusterConfig> config = LoadKubeconfigFile(dir.path() + "/config");
  REQUIRE(config.ok());
  CHECK(config->tls->ca_file == dir.path() + "/ca.crt");
  CHECK(config->tls->client_cert_file == dir.path() + "/u.crt");
  CHECK(config->tls->client_key_file == dir.path() + "/u.key");

  Result<ClusterConfig> missing = LoadKubeconfigFile(dir.path() + "/absent");
  CHECK(missing.status().code() == Code::kNotFound);
  CHECK(missing.status().message().starts_with("kubeconfig: cannot read "));
}

TEST_CASE("in-cluster: service host, token and CA from the service-account directory") {
  TempDir dir;
  dir.Write("token", "sa-token\n");
  dir.Write("ca.crt", "ca");
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  Result<ClusterConfig> config = InClusterConfig(dir.path());
  REQUIRE(config.ok());
  CHECK(config->server == "https://10.96.0.1:443");
  CHECK(config->bearer_token == "sa-token");
  CHECK(config->token_file == dir.path() + "/token");
  CHECK(config->tls->ca_file == dir.path() + "/ca.crt");
}

TEST_CASE("in-cluster: IPv6 service host gets brackets, no CA file means the system store") {
  TempDir dir;
  dir.Write("token", "t");
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "fd00::1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "6443");
  Result<ClusterConfig> config = InClusterConfig(dir.path());
  REQUIRE(config.ok());
  CHECK(config->server == "https://[fd00::1]:6443");
  CHECK(config->tls->ca_file.empty());
}

TEST_CASE("in-cluster: missing environment or token") {
  TempDir dir;
  {
    ScopedEnv host("KUBERNETES_SERVICE_HOST", nullptr);
    ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
    CHECK(InClusterConfig(dir.path()).status().code() == Code::kNotFound);
  }
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  Result<ClusterConfig> no_token = InClusterConfig(dir.path());
  CHECK(no_token.status().code() == Code::kNotFound);
  CHECK(no_token.status().message().find("/token") != std::string::npos);
}

}  // namespace
}  // namespace syncbus::kube
