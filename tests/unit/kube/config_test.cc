#include "common/kube/config.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <stdlib.h>

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
  Result<ClusterConfig> config = ParseKubeconfig(yaml, "", dir.path(), KubeconfigSource::kOperator);
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
)",
                                               "", "", KubeconfigSource::kOperator);
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
)",
                                                     "", "", KubeconfigSource::kOperator);
  CHECK(unreadable.status().code() == Code::kInvalidArgument);
  CHECK(unreadable.status().message().starts_with(
      "kubeconfig: users[0].user.tokenFile: cannot read /nonexistent/token"));
}

TEST_CASE("kubeconfig from a Secret: every file path is refused, the same data inline is read") {
  TempDir dir;
  dir.Write("token", "the-consumer's-own-token\n");
  const std::string head = R"(
current-context: a
contexts:
- name: a
  context: {cluster: c, user: u}
clusters:
- name: c
  cluster:
    server: "https://c:6443"
)";
  struct Case {
    std::string cluster_extra, user, key;
  };
  const std::vector<Case> cases = {
      {"    certificate-authority: " + dir.path() + "/token\n", "  user: {token: t}\n",
       "clusters[0].cluster.certificate-authority"},
      {"", "  user: {tokenFile: " + dir.path() + "/token}\n", "users[0].user.tokenFile"},
      {"", "  user: {client-certificate: /c.crt, client-key-data: a2V5Cg==}\n",
       "users[0].user.client-certificate"},
      {"", "  user: {client-certificate-data: Y2VydAo=, client-key: /c.key}\n",
       "users[0].user.client-key"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.key);
    std::string yaml = head + c.cluster_extra + "users:\n- name: u\n" + c.user;
    Result<ClusterConfig> from_secret = ParseKubeconfig(yaml, "", dir.path());
    CHECK(from_secret.status().code() == Code::kUnsupported);
    CHECK(from_secret.status().message().starts_with("kubeconfig: " + c.key +
                                                     ": file paths are refused"));
    CHECK(ParseKubeconfig(yaml, "", dir.path(), KubeconfigSource::kOperator).ok());
  }
  Result<ClusterConfig> inline_data =
      ParseKubeconfig(head +
                      "    certificate-authority-data: Y2EK\nusers:\n- name: u\n  user: "
                      "{client-certificate-data: Y2VydAo=, client-key-data: a2V5Cg==}\n");
  REQUIRE(inline_data.ok());
  CHECK(inline_data->tls->ca_pem == "ca\n");
  CHECK(inline_data->tls->client_key_pem == "key\n");
}

// A kubeconfig whose one context uses user `u` with the given fields (indented by 4).
Result<ClusterConfig> WithUser(const std::string& user,
                               KubeconfigSource source = KubeconfigSource::kSecret,
                               const std::string& cluster = {}) {
  return ParseKubeconfig(R"(
current-context: a
contexts:
- name: a
  context: {cluster: c, user: u}
clusters:
- name: c
  cluster:
    server: "https://c:6443"
)" + cluster + R"(
users:
- name: u
  user:
)" + user,
                         "", "/kube", source);
}

TEST_CASE("kubeconfig: exec plugins are refused unless allowed, auth-provider is unsupported") {
  Result<ClusterConfig> exec = WithUser(
      "    exec: {command: aws, apiVersion: client.authentication.k8s.io/v1, "
      "interactiveMode: Never}\n");
  CHECK(exec.status().code() == Code::kUnsupported);
  CHECK(exec.status().message() ==
        "kubeconfig: users[0].user.exec: exec credential plugins are refused in this kubeconfig "
        "(it comes from a Secret, and running its command would run a program on this host)");

  Result<ClusterConfig> provider =
      WithUser("    auth-provider: {name: gcp}\n", KubeconfigSource::kOperator);
  CHECK(provider.status().code() == Code::kUnsupported);
  CHECK(provider.status().message().find("users[0].user.auth-provider") != std::string::npos);
}

TEST_CASE("kubeconfig: basic authentication, and not together with a token") {
  Result<ClusterConfig> basic = WithUser("    username: admin\n    password: pw\n");
  REQUIRE(basic.ok());
  CHECK(basic->username == "admin");
  CHECK(basic->password == "pw");
  CHECK(basic->bearer_token.empty());

  Result<ClusterConfig> both = WithUser("    username: admin\n    password: pw\n    token: t\n");
  CHECK(both.status().code() == Code::kInvalidArgument);
  CHECK(both.status().message() ==
        "kubeconfig: users[0].user: more than one authentication method found for u; found token "
        "and basic auth, only one is allowed");
}

TEST_CASE("kubeconfig: impersonation (as, as-uid, as-groups, as-user-extra)") {
  Result<ClusterConfig> config = WithUser(R"(    token: t
    as: alice
    as-uid: "1234"
    as-groups: [admins, "system:authenticated"]
    as-user-extra:
      scopes.example.com/team: [a, b]
)");
  REQUIRE(config.ok());
  CHECK(config->impersonate.user == "alice");
  CHECK(config->impersonate.uid == "1234");
  CHECK(config->impersonate.groups == std::vector<std::string>{"admins", "system:authenticated"});
  CHECK(config->impersonate.extra.at("scopes.example.com/team") ==
        std::vector<std::string>{"a", "b"});

  Result<ClusterConfig> groups_only = WithUser("    token: t\n    as-groups: [admins]\n");
  CHECK(groups_only.status().code() == Code::kInvalidArgument);
  CHECK(groups_only.status().message().find("without as") != std::string::npos);
  Result<ClusterConfig> not_a_list = WithUser("    as: bob\n    as-groups: admins\n");
  CHECK(not_a_list.status().message() == "kubeconfig: users[0].user.as-groups: not a list");
}

TEST_CASE("kubeconfig: proxy-url takes http, https and socks5") {
  for (const char* proxy : {"http://proxy:3128", "https://proxy:3129", "socks5://proxy:1080"}) {
    Result<ClusterConfig> config = WithUser("    token: t\n", KubeconfigSource::kSecret,
                                            std::string("    proxy-url: ") + proxy + "\n");
    REQUIRE(config.ok());
    CHECK(config->proxy_url == proxy);
  }
  Result<ClusterConfig> ftp =
      WithUser("    token: t\n", KubeconfigSource::kSecret, "    proxy-url: ftp://proxy:21\n");
  CHECK(ftp.status().message() ==
        "kubeconfig: clusters[0].cluster.proxy-url: \"ftp://proxy:21\": the scheme must be http, "
        "https or socks5");
  Result<ClusterConfig> bare =
      WithUser("    token: t\n", KubeconfigSource::kSecret, "    proxy-url: proxy:3128\n");
  CHECK(bare.status().code() == Code::kInvalidArgument);
}

TEST_CASE("kubeconfig: exec plugin settings") {
  Result<ClusterConfig> v1 = WithUser(R"(    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: bin/get-token
      args: [--cluster, c1]
      env:
      - {name: REGION, value: eu-1}
      - {name: EMPTY}
      interactiveMode: Always
      installHint: install get-token from your platform team
)",
                                      KubeconfigSource::kOperator);
  REQUIRE(v1.ok());
  REQUIRE(v1->exec != nullptr);
  const ExecConfig& exec = *v1->exec;
  CHECK(exec.api_version == "client.authentication.k8s.io/v1");
  CHECK(exec.command == "/kube/bin/get-token");  // a relative path: from the kubeconfig's dir
  CHECK(exec.args == std::vector<std::string>{"--cluster", "c1"});
  CHECK(exec.env ==
        std::vector<std::pair<std::string, std::string>>{{"REGION", "eu-1"}, {"EMPTY", ""}});
  CHECK(exec.interactive == ExecConfig::Interactive::kAlways);
  CHECK(exec.install_hint == "install get-token from your platform team");
  CHECK(exec.cluster.is_null());  // no provideClusterInfo

  // A bare name is looked up in PATH when the plugin runs.
  Result<ClusterConfig> bare =
      WithUser("    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: aws}\n",
               KubeconfigSource::kOperator);
  REQUIRE(bare.ok());
  CHECK(bare->exec->command == "aws");
  // v1beta1 defaults interactiveMode to IfAvailable; v1 has no default.
  CHECK(bare->exec->interactive == ExecConfig::Interactive::kIfAvailable);
  Result<ClusterConfig> no_mode =
      WithUser("    exec: {apiVersion: client.authentication.k8s.io/v1, command: aws}\n",
               KubeconfigSource::kOperator);
  CHECK(no_mode.status().message() ==
        "kubeconfig: users[0].user.exec: interactiveMode must be specified for u to use exec "
        "authentication plugin");
  Result<ClusterConfig> bad_mode = WithUser(
      "    exec: {apiVersion: client.authentication.k8s.io/v1, command: aws, "
      "interactiveMode: Sometimes}\n",
      KubeconfigSource::kOperator);
  CHECK(bad_mode.status().message().find("interactiveMode: \"Sometimes\"") != std::string::npos);
  Result<ClusterConfig> alpha =
      WithUser("    exec: {apiVersion: client.authentication.k8s.io/v1alpha1, command: aws}\n",
               KubeconfigSource::kOperator);
  CHECK(alpha.status().message().find("v1alpha1\": exec plugins speak") != std::string::npos);
  Result<ClusterConfig> no_command =
      WithUser("    exec: {apiVersion: client.authentication.k8s.io/v1beta1}\n",
               KubeconfigSource::kOperator);
  CHECK(no_command.status().message() == "kubeconfig: users[0].user.exec.command: missing");

  // Credentials written in the kubeconfig win: the plugin is not run.
  Result<ClusterConfig> with_token = WithUser(
      "    token: t\n    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: aws}\n",
      KubeconfigSource::kOperator);
  REQUIRE(with_token.ok());
  CHECK(with_token->exec == nullptr);
  CHECK(with_token->bearer_token == "t");
}

TEST_CASE("kubeconfig: provideClusterInfo hands the plugin the cluster, its CA as data") {
  TempDir dir;
  dir.Write("ca.crt", "ca-pem\n");
  dir.Write("config", R"(
current-context: a
contexts:
- name: a
  context: {cluster: c, user: u}
clusters:
- name: c
  cluster:
    server: https://c:6443
    certificate-authority: ca.crt
    tls-server-name: api.c
    proxy-url: http://proxy:3128
    extensions:
    - name: client.authentication.k8s.io/exec
      extension: {audience: "hub", retries: 3, verbose: true}
    - name: other
      extension: {ignored: 1}
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: get-token
      interactiveMode: Never
      provideClusterInfo: true
)");
  Result<ClusterConfig> config = LoadKubeconfigFile(dir.path() + "/config");
  REQUIRE(config.ok());
  REQUIRE(config->exec != nullptr);
  CHECK(config->exec->cluster ==
        Json{{"server", "https://c:6443"},
             {"tls-server-name", "api.c"},
             {"certificate-authority-data", "Y2EtcGVtCg=="},
             {"proxy-url", "http://proxy:3128"},
             {"config", {{"audience", "hub"}, {"retries", 3}, {"verbose", true}}}});
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
)",
                                                           "", "", KubeconfigSource::kOperator);
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

// A kubeconfig file with one cluster `cluster` at `server`, one token user `user` and one
// context `context` joining them; current-context `current` when not empty.
std::string OneContext(const std::string& context, const std::string& cluster,
                       const std::string& server, const std::string& user, const std::string& token,
                       const std::string& current = {}) {
  std::string out = current.empty() ? "" : "current-context: " + current + "\n";
  out += "clusters:\n- name: " + cluster + "\n  cluster: {server: \"" + server +
         "\", certificate-authority: ca.crt}\n";
  out += "users:\n- name: " + user + "\n  user: {token: " + token + "}\n";
  out += "contexts:\n- name: " + context + "\n  context: {cluster: " + cluster + ", user: " + user +
         "}\n";
  return out;
}

// Rules for a test: no $KUBECONFIG, no home, no in-cluster environment unless set.
LoadingRules Rules() {
  LoadingRules rules;
  rules.in_cluster_root = "/nonexistent";
  return rules;
}

TEST_CASE(
    "kubeconfig lookup: --kubeconfig, then $KUBECONFIG, then ~/.kube/config, then in-cluster") {
  ScopedEnv no_host("KUBERNETES_SERVICE_HOST", nullptr);
  TempDir dir;
  fs::create_directories(dir.path() + "/home/.kube");
  dir.Write("home/.kube/config",
            OneContext("home", "home-c", "https://home:6443", "home-u", "home-t", "home"));
  dir.Write("explicit",
            OneContext("explicit", "ex-c", "https://explicit:6443", "ex-u", "ex-t", "explicit"));
  dir.Write("env", OneContext("env", "env-c", "https://env:6443", "env-u", "env-t", "env"));

  LoadingRules rules = Rules();
  rules.home = dir.path() + "/home";
  rules.kubeconfig_env = dir.path() + "/env";
  rules.explicit_path = dir.path() + "/explicit";
  Result<ClusterConfig> config = LoadClientConfig(rules);
  REQUIRE(config.ok());
  CHECK(config->server == "https://explicit:6443");

  rules.explicit_path.clear();
  config = LoadClientConfig(rules);
  REQUIRE(config.ok());
  CHECK(config->server == "https://env:6443");

  rules.kubeconfig_env.clear();
  config = LoadClientConfig(rules);
  REQUIRE(config.ok());
  CHECK(config->server == "https://home:6443");
  CHECK(config->tls->ca_file == dir.path() + "/home/.kube/ca.crt");

  // $KUBECONFIG replaces ~/.kube/config: when it names no file that exists, the next place is
  // the in-cluster service account, not the home file.
  rules.kubeconfig_env = dir.path() + "/absent:" + dir.path() + "/also-absent";
  Result<ClusterConfig> nothing = LoadClientConfig(rules);
  CHECK(nothing.status().code() == Code::kNotFound);
  CHECK(nothing.status().message().starts_with(
      "no kubeconfig: --kubeconfig not given, $KUBECONFIG ("));
  CHECK(nothing.status().message().find(
            "not running in a cluster (in-cluster: KUBERNETES_SERVICE_HOST") != std::string::npos);

  fs::create_directories(dir.path() + "/sa");
  dir.Write("sa/token", "sa-token\n");
  rules.in_cluster_root = dir.path() + "/sa";
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.0.0.1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  config = LoadClientConfig(rules);
  REQUIRE(config.ok());
  CHECK(config->server == "https://10.0.0.1:443");
  CHECK(config->bearer_token == "sa-token");

  rules.kubeconfig_env.clear();
  rules.home = dir.path() + "/no-such-home";
  config = LoadClientConfig(rules);
  REQUIRE(config.ok());
  CHECK(config->server == "https://10.0.0.1:443");

  // An explicit file must exist.
  rules.explicit_path = dir.path() + "/absent";
  Result<ClusterConfig> missing = LoadClientConfig(rules);
  CHECK(missing.status().code() == Code::kNotFound);
  CHECK(
      missing.status().message().starts_with("kubeconfig: cannot read " + dir.path() + "/absent"));
}

TEST_CASE("kubeconfig lookup: the files of $KUBECONFIG merge as kubectl merges them") {
  TempDir dir;
  fs::create_directories(dir.path() + "/a");
  fs::create_directories(dir.path() + "/b");
  // The first file sets no current-context; both name the cluster `shared` and the user `u`.
  dir.Write("a/config", OneContext("first", "shared", "https://from-a:6443", "u", "token-a"));
  // The second also has a cluster and a context of its own.
  dir.Write("b/config", R"(current-context: second
clusters:
- name: shared
  cluster: {server: "https://from-b:6443", certificate-authority: ca.crt}
- name: b-only
  cluster: {server: "https://b-only:6443", certificate-authority: ca.crt}
users:
- name: u
  user: {token: token-b}
contexts:
- name: second
  context: {cluster: shared, user: u}
- name: only-b
  context: {cluster: b-only, user: u}
)");

  LoadingRules rules = Rules();
  rules.kubeconfig_env = dir.path() + "/a/config::" + dir.path() + "/missing:" + dir.path() +
                         "/b/config:" + dir.path() + "/a/config";
  // current-context from the first file that sets one (b); context "second" names cluster
  // `shared` and user `u`, which the first file (a) wins whole.
  Result<ClusterConfig> config = LoadClientConfig(rules);
  REQUIRE(config.ok());
  CHECK(config->server == "https://from-a:6443");
  CHECK(config->bearer_token == "token-a");
  CHECK(config->tls->ca_file == dir.path() + "/a/ca.crt");
  // An entry only the second file has keeps the second file's directory.
  rules.context = "only-b";
  config = LoadClientConfig(rules);
  REQUIRE(config.ok());
  CHECK(config->server == "https://b-only:6443");
  CHECK(config->tls->ca_file == dir.path() + "/b/ca.crt");
  // A context from the first file.
  rules.context = "first";
  config = LoadClientConfig(rules);
  REQUIRE(config.ok());
  CHECK(config->server == "https://from-a:6443");
  rules.context = "nowhere";
  CHECK(LoadClientConfig(rules).status().message() == "kubeconfig: context \"nowhere\" not found");

  // A file that exists but does not parse fails the whole lookup, naming the file.
  dir.Write("bad", "clusters: [unclosed\n");
  rules.context.clear();
  rules.kubeconfig_env = dir.path() + "/bad:" + dir.path() + "/a/config";
  Result<ClusterConfig> bad = LoadClientConfig(rules);
  CHECK(bad.status().code() == Code::kInvalidArgument);
  CHECK(bad.status().message().starts_with("kubeconfig: " + dir.path() + "/bad: invalid YAML"));
}

TEST_CASE("kubeconfig lookup: exec plugins are allowed in files the user names") {
  TempDir dir;
  dir.Write("config", R"(
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
    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: ./get-token}
)");
  LoadingRules rules = Rules();
  rules.explicit_path = dir.path() + "/config";
  Result<ClusterConfig> config = LoadClientConfig(rules);
  REQUIRE(config.ok());
  REQUIRE(config->exec != nullptr);
  CHECK(config->exec->command == dir.path() + "/./get-token");
  CHECK(LoadKubeconfigFile(dir.path() + "/config").ok());
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
