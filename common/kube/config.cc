#include "common/kube/config.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <system_error>

#include "common/base64.h"

namespace syncbus::kube {
namespace {

constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";

Status ConfigError(const std::string& what) {
  return InvalidArgument("kubeconfig: " + what);
}

// *-data fields: standard base64, padding optional but completing the last group when present,
// whitespace ignored, unused trailing bits ignored.
constexpr Base64Decoding kDataBase64{.loose_padding = false, .loose_tail = true};

std::string Resolve(const std::string& path, const std::string& base_dir) {
  if (path.empty() || path.front() == '/' || base_dir.empty()) return path;
  return base_dir + "/" + path;
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    Status error(errno == ENOENT ? Code::kNotFound : Code::kInvalidArgument,
                 "cannot read " + path + ": " + std::generic_category().message(errno));
    return error;
  }
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

std::string TrimTrailingSpace(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

// Reads optional string / bool fields of one map node, naming the node in errors.
class Fields {
 public:
  Fields(const YAML::Node& node, std::string where) : node_(node), where_(std::move(where)) {}

  const std::string& where() const { return where_; }
  bool Has(const char* key) const { return node_[key].IsDefined() && !node_[key].IsNull(); }

  Result<std::string> String(const char* key) const {
    YAML::Node value = node_[key];
    if (!value.IsDefined() || value.IsNull()) return std::string();
    if (!value.IsScalar()) return ConfigError(where_ + "." + key + ": not a string");
    return value.as<std::string>();
  }
  Result<std::string> Required(const char* key) const {
    Result<std::string> value = String(key);
    if (value.ok() && value->empty()) return ConfigError(where_ + "." + key + ": missing");
    return value;
  }
  Result<bool> Bool(const char* key) const {
    YAML::Node value = node_[key];
    if (!value.IsDefined() || value.IsNull()) return false;
    bool result = false;
    if (!value.IsScalar() || !YAML::convert<bool>::decode(value, result)) {
      return ConfigError(where_ + "." + key + ": not a boolean");
    }
    return result;
  }
  // The base64 field `key` decoded.
  Result<std::string> Base64(const char* key) const {
    Result<std::string> encoded = String(key);
    if (!encoded.ok() || encoded->empty()) return encoded;
    std::optional<std::string> decoded = DecodeBase64(*encoded, kDataBase64);
    if (!decoded) return ConfigError(where_ + "." + key + ": invalid base64");
    return *decoded;
  }

 private:
  YAML::Node node_;
  std::string where_;
};

// Finds the entry named `name` in the list `section` ("clusters", "users", "contexts") and
// returns its `inner` map ("cluster", "user", "context") with a path for error messages.
Result<Fields> FindNamed(const YAML::Node& root, const char* section, const char* inner,
                         const std::string& name) {
  // A missing key yields an invalid node: only IsDefined() may be asked of it.
  YAML::Node list = root[section];
  bool present = list.IsDefined() && !list.IsNull();
  if (present && !list.IsSequence()) return ConfigError(std::string(section) + ": not a list");
  for (size_t i = 0; present && i < list.size(); ++i) {
    YAML::Node entry = list[i];
    if (!entry.IsMap()) continue;
    YAML::Node entry_name = entry["name"];
    if (!entry_name.IsDefined() || !entry_name.IsScalar() || entry_name.as<std::string>() != name) {
      continue;
    }
    std::string where = std::string(section) + "[" + std::to_string(i) + "]." + inner;
    YAML::Node body = entry[inner];
    if (!body.IsDefined() || !body.IsMap()) return ConfigError(where + ": missing");
    return Fields(body, where);
  }
  return ConfigError(std::string(inner) + " \"" + name + "\" not found");
}

Status ApplyCluster(const Fields& cluster, const std::string& base_dir, ClusterConfig& config,
                    http::TlsOptions& tls) {
  Result<std::string> server = cluster.Required("server");
  SYNCBUS_RETURN_IF_ERROR(server);
  config.server = *server;
  Result<std::string> ca_data = cluster.Base64("certificate-authority-data");
  SYNCBUS_RETURN_IF_ERROR(ca_data);
  tls.ca_pem = *ca_data;
  Result<std::string> ca_file = cluster.String("certificate-authority");
  SYNCBUS_RETURN_IF_ERROR(ca_file);
  tls.ca_file = Resolve(*ca_file, base_dir);
  Result<bool> insecure = cluster.Bool("insecure-skip-tls-verify");
  SYNCBUS_RETURN_IF_ERROR(insecure);
  tls.insecure_skip_verify = *insecure;
  Result<std::string> server_name = cluster.String("tls-server-name");
  SYNCBUS_RETURN_IF_ERROR(server_name);
  tls.server_name = *server_name;
  if (cluster.Has("proxy-url")) {
    return Status(Code::kUnsupported,
                  "kubeconfig: " + cluster.where() + ".proxy-url: proxies are not supported");
  }
  return Status::Ok();
}

Status ApplyUser(const Fields& user, const std::string& base_dir, ClusterConfig& config,
                 http::TlsOptions& tls) {
  for (const char* plugin : {"exec", "auth-provider"}) {
    if (user.Has(plugin)) {
      return Status(Code::kUnsupported, "kubeconfig: " + user.where() + "." + plugin +
                                            ": credential plugins are not supported");
    }
  }
  if (user.Has("username") || user.Has("password")) {
    return Status(Code::kUnsupported,
                  "kubeconfig: " + user.where() + ": basic authentication is not supported");
  }
  Result<std::string> token = user.String("token");
  SYNCBUS_RETURN_IF_ERROR(token);
  config.bearer_token = *token;
  Result<std::string> token_file = user.String("tokenFile");
  SYNCBUS_RETURN_IF_ERROR(token_file);
  if (config.bearer_token.empty() && !token_file->empty()) {
    config.token_file = Resolve(*token_file, base_dir);
    Result<std::string> content = ReadFile(config.token_file);
    if (!content.ok())
      return ConfigError(user.where() + ".tokenFile: " + content.status().message());
    config.bearer_token = TrimTrailingSpace(*content);
  }
  Result<std::string> cert_data = user.Base64("client-certificate-data");
  SYNCBUS_RETURN_IF_ERROR(cert_data);
  Result<std::string> key_data = user.Base64("client-key-data");
  SYNCBUS_RETURN_IF_ERROR(key_data);
  Result<std::string> cert_file = user.String("client-certificate");
  SYNCBUS_RETURN_IF_ERROR(cert_file);
  Result<std::string> key_file = user.String("client-key");
  SYNCBUS_RETURN_IF_ERROR(key_file);
  tls.client_cert_pem = *cert_data;
  tls.client_key_pem = *key_data;
  tls.client_cert_file = Resolve(*cert_file, base_dir);
  tls.client_key_file = Resolve(*key_file, base_dir);
  bool has_cert = !tls.client_cert_pem.empty() || !tls.client_cert_file.empty();
  bool has_key = !tls.client_key_pem.empty() || !tls.client_key_file.empty();
  if (has_cert != has_key) {
    return ConfigError(user.where() + ": " +
                       (has_cert ? "client certificate without client-key(-data)"
                                 : "client key without client-certificate(-data)"));
  }
  return Status::Ok();
}

Result<ClusterConfig> Parse(const YAML::Node& root, const std::string& context_name,
                            const std::string& base_dir) {
  if (!root.IsMap()) return ConfigError("not a YAML map");
  std::string name = context_name;
  if (name.empty()) {
    YAML::Node current = root["current-context"];
    if (current.IsDefined() && current.IsScalar()) name = current.as<std::string>();
    if (name.empty()) return ConfigError("no current-context set and no context given");
  }
  Result<Fields> context = FindNamed(root, "contexts", "context", name);
  SYNCBUS_RETURN_IF_ERROR(context);
  Result<std::string> cluster_name = context->Required("cluster");
  SYNCBUS_RETURN_IF_ERROR(cluster_name);
  Result<std::string> user_name = context->String("user");
  SYNCBUS_RETURN_IF_ERROR(user_name);

  ClusterConfig config;
  auto tls = std::make_shared<http::TlsOptions>();
  Result<Fields> cluster = FindNamed(root, "clusters", "cluster", *cluster_name);
  SYNCBUS_RETURN_IF_ERROR(cluster);
  SYNCBUS_RETURN_IF_ERROR(ApplyCluster(*cluster, base_dir, config, *tls));
  if (!user_name->empty()) {
    Result<Fields> user = FindNamed(root, "users", "user", *user_name);
    SYNCBUS_RETURN_IF_ERROR(user);
    SYNCBUS_RETURN_IF_ERROR(ApplyUser(*user, base_dir, config, *tls));
  }
  config.tls = std::move(tls);
  return config;
}

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

Result<ClusterConfig> ParseKubeconfig(const std::string& yaml, const std::string& context,
                                      const std::string& base_dir) {
  try {
    return Parse(YAML::Load(yaml), context, base_dir);
  } catch (const YAML::Exception& e) {
    return ConfigError(std::string("invalid YAML: ") + e.what());
  }
}

Result<ClusterConfig> LoadKubeconfigFile(const std::string& path, const std::string& context) {
  Result<std::string> content = ReadFile(path);
  if (!content.ok()) return content.status().Annotate("kubeconfig");
  return ParseKubeconfig(*content, context, DirName(path));
}

Result<ClusterConfig> InClusterConfig(const std::string& root) {
  // Read once at start-up, before any thread could change the environment.
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");  // NOLINT(concurrency-mt-unsafe)
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");  // NOLINT(concurrency-mt-unsafe)
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0') {
    return NotFound("in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set");
  }
  std::string dir = root.empty() ? kServiceAccountDir : root;
  ClusterConfig config;
  std::string h = host;
  if (h.find(':') != std::string::npos && h.front() != '[') h = "[" + h + "]";
  config.server = "https://" + h + ":" + port;
  config.token_file = dir + "/token";
  Result<std::string> token = ReadFile(config.token_file);
  if (!token.ok()) return token.status().Annotate("in-cluster");
  config.bearer_token = TrimTrailingSpace(*token);
  auto tls = std::make_shared<http::TlsOptions>();
  std::string ca = dir + "/ca.crt";
  if (std::ifstream(ca).good()) tls->ca_file = ca;
  config.tls = std::move(tls);
  return config;
}

}  // namespace syncbus::kube
