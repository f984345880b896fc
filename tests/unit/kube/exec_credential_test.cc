// ExecCredentialPlugin against real plugin programs: small shell scripts written by each test
// that record how they were run and print an ExecCredential.
#include "common/kube/exec_credential.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "common/time_format.h"
#include "tests/fakes/common/fake_clock.h"

namespace syncbus::kube {
namespace {

namespace fs = std::filesystem;
constexpr char kV1[] = "client.authentication.k8s.io/v1";

class PluginDir {
 public:
  PluginDir() {
    std::string pattern = (fs::temp_directory_path() / "exec-plugin-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~PluginDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

  // An executable script `name` running `body` under /bin/sh; returns its path.
  std::string Script(const std::string& name, const std::string& body) const {
    std::string file = path_ + "/" + name;
    std::ofstream(file) << "#!/bin/sh\n" << body;
    chmod(file.c_str(), 0755);
    return file;
  }
  std::string Read(const std::string& name) const {
    std::ifstream in(path_ + "/" + name);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return text;
  }
  int Runs() const {
    std::ifstream in(path_ + "/runs");
    int lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    return lines;
  }

 private:
  std::string path_;
};

// A plugin that records its arguments, environment and stdin, counts its runs, and prints a
// token "token-<run>" expiring at `expires` (none when empty).
std::string TokenPlugin(const PluginDir& dir, const std::string& expires,
                        const std::string& api_version = kV1) {
  std::string status = "\"token\": \"token-$n\"";
  if (!expires.empty()) status += ", \"expirationTimestamp\": \"" + expires + "\"";
  return dir.Script("plugin", "d='" + dir.path() + "'\n" +
                                  "echo run >> \"$d/runs\"\n"
                                  "n=$(wc -l < \"$d/runs\" | tr -d ' ')\n"
                                  "printf '%s\\n' \"$*\" > \"$d/args\"\n"
                                  "printf '%s\\n' \"$KUBERNETES_EXEC_INFO\" > \"$d/info\"\n"
                                  "printf '%s\\n' \"$REGION\" > \"$d/region\"\n"
                                  "readlink /proc/$$/fd/0 > \"$d/stdin\"\n"
                                  "cat <<EOF\n"
                                  "{\"kind\": \"ExecCredential\", \"apiVersion\": \"" +
                                  api_version + "\", \"status\": {" + status + "}}\nEOF\n");
}

std::shared_ptr<ExecConfig> ExecConfigFor(const std::string& command) {
  auto config = std::make_shared<ExecConfig>();
  config->api_version = kV1;
  config->command = command;
  config->interactive = ExecConfig::Interactive::kNever;
  return config;
}

ExecCredentialPlugin Plugin(std::shared_ptr<ExecConfig> config, const Clock& clock,
                            bool terminal = false) {
  auto tls = std::make_shared<http::TlsOptions>();
  tls->ca_pem = "cluster-ca";
  return ExecCredentialPlugin(std::move(config), tls, clock, {terminal});
}

TEST_CASE(
    "exec plugin: args, env and the ExecCredential input, and the token is kept until it expires") {
  PluginDir dir;
  FakeClock clock;
  std::string expires = FormatRfc3339(clock.WallNow() + std::chrono::minutes(10));
  auto config = ExecConfigFor(TokenPlugin(dir, expires));
  config->args = {"--cluster", "c 1"};
  config->env = {{"REGION", "eu-1"}};
  config->cluster = Json{{"server", "https://c:6443"}, {"config", {{"audience", "hub"}}}};
  ExecCredentialPlugin plugin = Plugin(config, clock);

  auto first = plugin.Get();
  REQUIRE_MESSAGE(first.ok(), first.status().ToString());
  CHECK((*first)->token == "token-1");
  CHECK((*first)->tls == nullptr);
  REQUIRE((*first)->expires.has_value());
  CHECK(*(*first)->expires == *ParseRfc3339(expires));
  CHECK(dir.Read("args") == "--cluster c 1");
  CHECK(dir.Read("region") == "eu-1");
  CHECK(dir.Read("stdin") == "/dev/null");  // not interactive
  CHECK(Json::parse(dir.Read("info")) ==
        Json{{"kind", "ExecCredential"},
             {"apiVersion", kV1},
             {"spec",
              {{"interactive", false},
               {"cluster", {{"server", "https://c:6443"}, {"config", {{"audience", "hub"}}}}}}}});

  clock.Advance(std::chrono::minutes(10));
  auto cached = plugin.Get();
  REQUIRE(cached.ok());
  CHECK((*cached)->token == "token-1");
  CHECK(dir.Runs() == 1);

  clock.Advance(std::chrono::seconds(1));  // past expirationTimestamp
  auto renewed = plugin.Get();
  REQUIRE(renewed.ok());
  CHECK((*renewed)->token == "token-2");
  CHECK(dir.Runs() == 2);
}

TEST_CASE("exec plugin: a token without expiry is kept until the server refuses it") {
  PluginDir dir;
  FakeClock clock;
  ExecCredentialPlugin plugin = Plugin(ExecConfigFor(TokenPlugin(dir, "")), clock);
  auto first = plugin.Get();
  REQUIRE(first.ok());
  clock.Advance(std::chrono::hours(24 * 365));
  auto still = plugin.Get();
  REQUIRE(still.ok());
  CHECK((*still)->token == "token-1");

  plugin.Rejected(*first);
  auto second = plugin.Get();
  REQUIRE(second.ok());
  CHECK((*second)->token == "token-2");
  // A refusal of the old token after the plugin ran again changes nothing.
  plugin.Rejected(*first);
  auto kept = plugin.Get();
  REQUIRE(kept.ok());
  CHECK((*kept)->token == "token-2");
  CHECK(dir.Runs() == 2);
}

TEST_CASE("exec plugin: interactiveMode decides whether the plugin gets stdin") {
  PluginDir dir;
  FakeClock clock;
  auto config = ExecConfigFor(TokenPlugin(dir, ""));
  config->interactive = ExecConfig::Interactive::kAlways;
  auto refused = Plugin(config, clock, /*terminal=*/false).Get();
  CHECK(refused.status().code() == Code::kUnauthorized);
  CHECK(refused.status().message() ==
        "exec plugin: cannot support interactive mode: standard input is not a terminal "
        "(interactiveMode: Always)");
  CHECK(dir.Runs() == 0);

  config->interactive = ExecConfig::Interactive::kIfAvailable;
  REQUIRE(Plugin(config, clock, /*terminal=*/false).Get().ok());
  CHECK(Json::parse(dir.Read("info"))["spec"]["interactive"] == false);
  REQUIRE(Plugin(config, clock, /*terminal=*/true).Get().ok());
  CHECK(Json::parse(dir.Read("info"))["spec"]["interactive"] == true);
  CHECK(
      ExecCredentialInput(*config, true) ==
      R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"interactive":true}})");
}

TEST_CASE("exec plugin: a client certificate and key join the cluster's TLS options") {
  PluginDir dir;
  FakeClock clock;
  std::string script = dir.Script("plugin", R"(cat <<'EOF'
{"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1beta1",
 "status": {"clientCertificateData": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
            "clientKeyData": "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"}}
EOF
)");
  auto config = ExecConfigFor(script);
  config->api_version = "client.authentication.k8s.io/v1beta1";
  auto credential = Plugin(config, clock).Get();
  REQUIRE_MESSAGE(credential.ok(), credential.status().ToString());
  CHECK((*credential)->token.empty());
  REQUIRE((*credential)->tls != nullptr);
  CHECK((*credential)->tls->ca_pem == "cluster-ca");
  CHECK((*credential)->tls->client_cert_pem.starts_with("-----BEGIN CERTIFICATE-----\nMIIB"));
  CHECK((*credential)->tls->client_key_pem.starts_with("-----BEGIN PRIVATE KEY-----\nMIIE"));
}

TEST_CASE("exec plugin: clear errors when the plugin is missing, fails or prints nonsense") {
  PluginDir dir;
  FakeClock clock;
  auto error_of = [&](std::shared_ptr<ExecConfig> config) {
    auto result = Plugin(std::move(config), clock).Get();
    REQUIRE_FALSE(result.ok());
    CHECK(result.status().code() == Code::kUnauthorized);
    return result.status().message();
  };

  auto missing = ExecConfigFor(dir.path() + "/no-such-plugin");
  missing->install_hint = "Install it with: apt-get install no-such-plugin";
  CHECK(error_of(missing) == "exec plugin: executable \"" + dir.path() +
                                 "/no-such-plugin\" not found\n\nInstall it with: apt-get "
                                 "install no-such-plugin");
  CHECK(error_of(ExecConfigFor("syncbus-no-such-plugin-in-path")) ==
        "exec plugin: executable \"syncbus-no-such-plugin-in-path\" not found");

  std::string failing = dir.Script("failing", "echo 'login expired' >&2\nexit 3\n");
  CHECK(error_of(ExecConfigFor(failing)) ==
        "exec plugin: executable \"" + failing + "\" failed with exit code 3");

  auto printing = [&](const std::string& name, const std::string& output) {
    return ExecConfigFor(dir.Script(name, "cat <<'EOF'\n" + output + "\nEOF\n"));
  };
  CHECK(error_of(printing("text", "hello")).ends_with(": not an ExecCredential object"));
  CHECK(
      error_of(printing(
          "beta",
          R"({"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1beta1", "status": {"token": "t"}})")) ==
      "exec plugin: it is configured to use API version client.authentication.k8s.io/v1, the "
      "plugin returned version client.authentication.k8s.io/v1beta1");
  CHECK(error_of(
            printing(
                "nostatus",
                R"({"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1"})"))
            .ends_with(" did not return a status field"));
  CHECK(
      error_of(
          printing(
              "empty",
              R"({"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1", "status": {}})"))
          .ends_with(" did not return a token or a certificate/key pair"));
  CHECK(
      error_of(
          printing(
              "certonly",
              R"({"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1", "status": {"clientCertificateData": "x"}})"))
          .ends_with(" returned only a certificate or a key, not both"));
  CHECK(
      error_of(
          printing(
              "badtime",
              R"({"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1", "status": {"token": "t", "expirationTimestamp": "tomorrow"}})"))
          .ends_with(" returned an invalid expirationTimestamp \"tomorrow\""));
}

}  // namespace
}  // namespace syncbus::kube
