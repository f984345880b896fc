#include "common/kube/config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>
#include <tuple>

#include <yaml-cpp/yaml.h>

#include "common/base64.h"

namespace syncbus::kube {
namespace {

constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";
constexpr char kExecV1[] = "client.authentication.k8s.io/v1";
constexpr char kExecV1beta1[] = "client.authentication.k8s.io/v1beta1";
// The cluster extension whose content an exec plugin receives as spec.cluster.config.
constexpr char kExecExtension[] = "client.authentication.k8s.io/exec";

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

bool FileExists(const std::string& path) {
  return std::ifstream(path).good();
}

std::string TrimTrailingSpace(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// A YAML value as JSON (the exec extension handed to a plugin): plain scalars that read as
// booleans, integers, floats or null become those; quoted scalars stay strings.
Json YamlToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence: {
      Json out = Json::array();
      for (const auto& item : node) out.push_back(YamlToJson(item));
      return out;
    }
    case YAML::NodeType::Map: {
      Json out = Json::object();
      for (const auto& item : node) out[item.first.as<std::string>()] = YamlToJson(item.second);
      return out;
    }
    case YAML::NodeType::Scalar: {
      const std::string& text = node.Scalar();
      if (node.Tag() != "!") {
        bool b = false;
        long long i = 0;
        double d = 0;
        if (text == "~" || text == "null") return nullptr;
        if (YAML::convert<bool>::decode(node, b)) return b;
        if (YAML::convert<long long>::decode(node, i)) return i;
        if (YAML::convert<double>::decode(node, d)) return d;
      }
      return text;
    }
    default: return nullptr;
  }
}

// Reads optional fields of one map node, naming the node in errors.
class Fields {
 public:
  Fields(const YAML::Node& node, std::string where) : node_(node), where_(std::move(where)) {}

  const std::string& where() const { return where_; }
  const YAML::Node& node() const { return node_; }
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
  Result<std::vector<std::string>> Strings(const char* key) const {
    YAML::Node value = node_[key];
    std::vector<std::string> out;
    if (!value.IsDefined() || value.IsNull()) return out;
    if (!value.IsSequence()) return ConfigError(where_ + "." + key + ": not a list");
    for (const auto& item : value) {
      if (!item.IsScalar()) return ConfigError(where_ + "." + key + ": not a list of strings");
      out.push_back(item.as<std::string>());
    }
    return out;
  }

 private:
  YAML::Node node_;
  std::string where_;
};

// One named entry of a clusters/users/contexts list and the directory its relative paths
// resolve against (its file's).
struct Entry {
  YAML::Node body;    // the entry's cluster/user/context map (undefined when missing)
  std::string where;  // for errors: "[FILE: ]clusters[0].cluster"
  std::string base_dir;
};

// The kubeconfig files merged by kubectl's rules: the first file that names an entry wins it
// whole; current-context comes from the first file that sets one.
struct Merged {
  std::map<std::string, Entry> clusters, users, contexts;
  std::string current_context;
  size_t files = 0;
};

Status MergeSection(const YAML::Node& root, const char* section, const char* inner,
                    const std::string& prefix, const std::string& base_dir,
                    std::map<std::string, Entry>& into) {
  // A missing key yields an invalid node: only IsDefined() may be asked of it.
  YAML::Node list = root[section];
  if (!list.IsDefined() || list.IsNull()) return Status::Ok();
  if (!list.IsSequence()) return ConfigError(prefix + section + ": not a list");
  for (size_t i = 0; i < list.size(); ++i) {
    YAML::Node entry = list[i];
    if (!entry.IsMap()) continue;
    YAML::Node name = entry["name"];
    if (!name.IsDefined() || !name.IsScalar()) continue;
    std::string where = prefix + section + "[" + std::to_string(i) + "]." + inner;
    into.try_emplace(name.as<std::string>(), Entry{entry[inner], where, base_dir});
  }
  return Status::Ok();
}

// Adds one parsed file; `file` (empty for a lone document) prefixes error locations.
Status MergeFile(const YAML::Node& root, const std::string& file, const std::string& base_dir,
                 Merged& merged) {
  std::string prefix = file.empty() ? "" : file + ": ";
  if (root.IsNull()) return Status::Ok();  // an empty file
  if (!root.IsMap()) return ConfigError(prefix + "not a YAML map");
  for (auto [section, inner, into] : {std::tuple{"clusters", "cluster", &merged.clusters},
                                      std::tuple{"users", "user", &merged.users},
                                      std::tuple{"contexts", "context", &merged.contexts}}) {
    SYNCBUS_RETURN_IF_ERROR(MergeSection(root, section, inner, prefix, base_dir, *into));
  }
  YAML::Node current = root["current-context"];
  if (merged.current_context.empty() && current.IsDefined() && current.IsScalar()) {
    merged.current_context = current.as<std::string>();
  }
  ++merged.files;
  return Status::Ok();
}

Result<Fields> Find(const std::map<std::string, Entry>& entries, const char* inner,
                    const std::string& name) {
  auto it = entries.find(name);
  if (it == entries.end()) return ConfigError(std::string(inner) + " \"" + name + "\" not found");
  const Entry& entry = it->second;
  if (!entry.body.IsDefined() || !entry.body.IsMap()) return ConfigError(entry.where + ": missing");
  return Fields(entry.body, entry.where);
}

// A file path in a kubeconfig from a Secret would make this process read its own files (the
// ServiceAccount token, the broker's key) and send them to the server the Secret names.
Status RefuseFileFromSecret(const Fields& fields, const char* key, const std::string& path,
                            KubeconfigSource source) {
  if (path.empty() || source == KubeconfigSource::kOperator) return Status::Ok();
  return Status(Code::kUnsupported,
                "kubeconfig: " + fields.where() + "." + key +
                    ": file paths are refused in this kubeconfig (it comes from a Secret, and "
                    "reading it would read this host's files): embed the contents instead "
                    "(token, certificate-authority-data, client-certificate-data, "
                    "client-key-data)");
}

Status ApplyCluster(const Fields& cluster, const std::string& base_dir, KubeconfigSource source,
                    ClusterConfig& config, http::TlsOptions& tls) {
  Result<std::string> server = cluster.Required("server");
  SYNCBUS_RETURN_IF_ERROR(server);
  config.server = *server;
  Result<std::string> ca_data = cluster.Base64("certificate-authority-data");
  SYNCBUS_RETURN_IF_ERROR(ca_data);
  tls.ca_pem = *ca_data;
  Result<std::string> ca_file = cluster.String("certificate-authority");
  SYNCBUS_RETURN_IF_ERROR(ca_file);
  SYNCBUS_RETURN_IF_ERROR(RefuseFileFromSecret(cluster, "certificate-authority", *ca_file, source));
  tls.ca_file = Resolve(*ca_file, base_dir);
  Result<bool> insecure = cluster.Bool("insecure-skip-tls-verify");
  SYNCBUS_RETURN_IF_ERROR(insecure);
  tls.insecure_skip_verify = *insecure;
  Result<std::string> server_name = cluster.String("tls-server-name");
  SYNCBUS_RETURN_IF_ERROR(server_name);
  tls.server_name = *server_name;
  Result<std::string> proxy = cluster.String("proxy-url");
  SYNCBUS_RETURN_IF_ERROR(proxy);
  if (!proxy->empty()) {
    std::string scheme = proxy->substr(0, proxy->find("://"));
    if (proxy->find("://") == std::string::npos ||
        (scheme != "http" && scheme != "https" && scheme != "socks5")) {
      return ConfigError(cluster.where() + ".proxy-url: \"" + *proxy +
                         "\": the scheme must be http, https or socks5");
    }
  }
  config.proxy_url = *proxy;
  return Status::Ok();
}

// spec.cluster of the ExecCredential a plugin with provideClusterInfo gets (client-go's
// clientauthentication Cluster): the cluster as the client sees it, the CA as data.
Result<Json> ExecClusterInfo(const Fields& cluster, const ClusterConfig& config,
                             const http::TlsOptions& tls) {
  Json info = {{"server", config.server}};
  if (!tls.server_name.empty()) info["tls-server-name"] = tls.server_name;
  if (tls.insecure_skip_verify) info["insecure-skip-tls-verify"] = true;
  std::string ca = tls.ca_pem;
  if (ca.empty() && !tls.ca_file.empty()) {
    Result<std::string> read = ReadFile(tls.ca_file);
    if (!read.ok()) {
      return ConfigError(cluster.where() + ".certificate-authority: " + read.status().message());
    }
    ca = *read;
  }
  if (!ca.empty()) info["certificate-authority-data"] = EncodeBase64(ca);
  if (!config.proxy_url.empty()) info["proxy-url"] = config.proxy_url;
  Result<bool> no_compression = cluster.Bool("disable-compression");
  SYNCBUS_RETURN_IF_ERROR(no_compression);
  if (*no_compression) info["disable-compression"] = true;
  YAML::Node extensions = cluster.node()["extensions"];
  if (extensions.IsDefined() && extensions.IsSequence()) {
    for (const auto& extension : extensions) {
      if (!extension.IsMap() || !extension["name"].IsDefined() || !extension["name"].IsScalar() ||
          extension["name"].Scalar() != kExecExtension) {
        continue;
      }
      if (extension["extension"].IsDefined()) info["config"] = YamlToJson(extension["extension"]);
    }
  }
  return info;
}

Result<std::shared_ptr<ExecConfig>> ParseExec(const Fields& user, const std::string& user_name,
                                              const std::string& base_dir) {
  YAML::Node node = user.node()["exec"];
  std::string where = user.where() + ".exec";
  if (!node.IsMap()) return ConfigError(where + ": not a map");
  Fields exec(node, where);
  auto config = std::make_shared<ExecConfig>();
  Result<std::string> api_version = exec.Required("apiVersion");
  SYNCBUS_RETURN_IF_ERROR(api_version);
  if (*api_version != kExecV1 && *api_version != kExecV1beta1) {
    return ConfigError(where + ".apiVersion: \"" + *api_version + "\": exec plugins speak " +
                       kExecV1 + " or " + kExecV1beta1);
  }
  config->api_version = *api_version;
  Result<std::string> command = exec.Required("command");
  SYNCBUS_RETURN_IF_ERROR(command);
  // kubectl resolves a command with a path separator against the kubeconfig's directory; a bare
  // name is looked up in PATH when the plugin runs.
  config->command =
      command->find('/') == std::string::npos ? *command : Resolve(*command, base_dir);
  Result<std::vector<std::string>> args = exec.Strings("args");
  SYNCBUS_RETURN_IF_ERROR(args);
  config->args = std::move(*args);
  YAML::Node env = node["env"];
  if (env.IsDefined() && !env.IsNull()) {
    if (!env.IsSequence()) return ConfigError(where + ".env: not a list");
    for (size_t i = 0; i < env.size(); ++i) {
      std::string at = where + ".env[" + std::to_string(i) + "]";
      if (!env[i].IsMap()) return ConfigError(at + ": not a map");
      Fields variable(env[i], at);
      Result<std::string> name = variable.Required("name");
      SYNCBUS_RETURN_IF_ERROR(name);
      Result<std::string> value = variable.String("value");
      SYNCBUS_RETURN_IF_ERROR(value);
      config->env.emplace_back(*name, *value);
    }
  }
  Result<std::string> mode = exec.String("interactiveMode");
  SYNCBUS_RETURN_IF_ERROR(mode);
  if (mode->empty()) {
    // client.authentication.k8s.io/v1 has no default; v1beta1 defaults to IfAvailable.
    if (*api_version == kExecV1) {
      return ConfigError(where + ": interactiveMode must be specified for " + user_name +
                         " to use exec authentication plugin");
    }
    config->interactive = ExecConfig::Interactive::kIfAvailable;
  } else if (*mode == "Never") {
    config->interactive = ExecConfig::Interactive::kNever;
  } else if (*mode == "IfAvailable") {
    config->interactive = ExecConfig::Interactive::kIfAvailable;
  } else if (*mode == "Always") {
    config->interactive = ExecConfig::Interactive::kAlways;
  } else {
    return ConfigError(where + ".interactiveMode: \"" + *mode +
                       "\": expected Never, IfAvailable or Always");
  }
  Result<std::string> hint = exec.String("installHint");
  SYNCBUS_RETURN_IF_ERROR(hint);
  config->install_hint = *hint;
  return config;
}

Status ApplyImpersonation(const Fields& user, ClusterConfig& config) {
  Impersonation& as = config.impersonate;
  Result<std::string> name = user.String("as");
  SYNCBUS_RETURN_IF_ERROR(name);
  as.user = *name;
  Result<std::string> uid = user.String("as-uid");
  SYNCBUS_RETURN_IF_ERROR(uid);
  as.uid = *uid;
  Result<std::vector<std::string>> groups = user.Strings("as-groups");
  SYNCBUS_RETURN_IF_ERROR(groups);
  as.groups = std::move(*groups);
  YAML::Node extra = user.node()["as-user-extra"];
  if (extra.IsDefined() && !extra.IsNull()) {
    if (!extra.IsMap()) return ConfigError(user.where() + ".as-user-extra: not a map");
    Fields values(extra, user.where() + ".as-user-extra");
    for (const auto& item : extra) {
      std::string key = item.first.as<std::string>();
      Result<std::vector<std::string>> list = values.Strings(key.c_str());
      SYNCBUS_RETURN_IF_ERROR(list);
      as.extra[key] = std::move(*list);
    }
  }
  if (as.user.empty() && (!as.uid.empty() || !as.groups.empty() || !as.extra.empty())) {
    return ConfigError(user.where() +
                       ": as-uid, as-groups or as-user-extra without as (the "
                       "user to impersonate)");
  }
  return Status::Ok();
}

// `cluster` (applied to `config` and `tls` already) is what a plugin with provideClusterInfo
// gets to see.
Status ApplyUser(const Fields& user, const std::string& user_name, const std::string& base_dir,
                 KubeconfigSource source, const Fields& cluster, ClusterConfig& config,
                 http::TlsOptions& tls) {
  if (user.Has("auth-provider")) {
    return Status(Code::kUnsupported,
                  "kubeconfig: " + user.where() +
                      ".auth-provider: auth-provider plugins are not supported (kubectl removed "
                      "them too): use an exec credential plugin");
  }
  if (user.Has("exec") && source == KubeconfigSource::kSecret) {
    return Status(Code::kUnsupported,
                  "kubeconfig: " + user.where() +
                      ".exec: exec credential plugins are refused in this kubeconfig (it comes "
                      "from a Secret, and running its command would run a program on this host)");
  }
  Result<std::string> token = user.String("token");
  SYNCBUS_RETURN_IF_ERROR(token);
  config.bearer_token = *token;
  Result<std::string> token_file = user.String("tokenFile");
  SYNCBUS_RETURN_IF_ERROR(token_file);
  Result<std::string> username = user.String("username");
  SYNCBUS_RETURN_IF_ERROR(username);
  Result<std::string> password = user.String("password");
  SYNCBUS_RETURN_IF_ERROR(password);
  bool has_token = !token->empty() || !token_file->empty();
  bool has_basic = !username->empty() || !password->empty();
  if (has_token && has_basic) {
    return ConfigError(user.where() + ": more than one authentication method found for " +
                       user_name + "; found token and basic auth, only one is allowed");
  }
  config.username = *username;
  config.password = *password;
  SYNCBUS_RETURN_IF_ERROR(RefuseFileFromSecret(user, "tokenFile", *token_file, source));
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
  SYNCBUS_RETURN_IF_ERROR(RefuseFileFromSecret(user, "client-certificate", *cert_file, source));
  SYNCBUS_RETURN_IF_ERROR(RefuseFileFromSecret(user, "client-key", *key_file, source));
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
  SYNCBUS_RETURN_IF_ERROR(ApplyImpersonation(user, config));
  if (user.Has("exec")) {
    Result<std::shared_ptr<ExecConfig>> exec = ParseExec(user, user_name, base_dir);
    SYNCBUS_RETURN_IF_ERROR(exec);
    Result<bool> provide =
        Fields(user.node()["exec"], user.where() + ".exec").Bool("provideClusterInfo");
    SYNCBUS_RETURN_IF_ERROR(provide);
    if (*provide) {
      Result<Json> info = ExecClusterInfo(cluster, config, tls);
      SYNCBUS_RETURN_IF_ERROR(info);
      (*exec)->cluster = std::move(*info);
    }
    // As client-go: credentials written in the kubeconfig win, the plugin is not run.
    if (!has_token && !has_basic && !has_cert) config.exec = std::move(*exec);
  }
  return Status::Ok();
}

Result<ClusterConfig> Build(const Merged& merged, const std::string& context_name,
                            KubeconfigSource source) {
  std::string name = context_name.empty() ? merged.current_context : context_name;
  if (name.empty()) return ConfigError("no current-context set and no context given");
  Result<Fields> context = Find(merged.contexts, "context", name);
  SYNCBUS_RETURN_IF_ERROR(context);
  Result<std::string> cluster_name = context->Required("cluster");
  SYNCBUS_RETURN_IF_ERROR(cluster_name);
  Result<std::string> user_name = context->String("user");
  SYNCBUS_RETURN_IF_ERROR(user_name);

  ClusterConfig config;
  auto tls = std::make_shared<http::TlsOptions>();
  Result<Fields> cluster = Find(merged.clusters, "cluster", *cluster_name);
  SYNCBUS_RETURN_IF_ERROR(cluster);
  const std::string& cluster_dir = merged.clusters.at(*cluster_name).base_dir;
  SYNCBUS_RETURN_IF_ERROR(ApplyCluster(*cluster, cluster_dir, source, config, *tls));
  if (!user_name->empty()) {
    Result<Fields> user = Find(merged.users, "user", *user_name);
    SYNCBUS_RETURN_IF_ERROR(user);
    const std::string& user_dir = merged.users.at(*user_name).base_dir;
    SYNCBUS_RETURN_IF_ERROR(ApplyUser(*user, *user_name, user_dir, source, *cluster, config, *tls));
  }
  config.tls = std::move(tls);
  return config;
}

Result<YAML::Node> LoadYaml(const std::string& yaml, const std::string& file) {
  try {
    return YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return ConfigError((file.empty() ? "" : file + ": ") + "invalid YAML: " + e.what());
  }
}

// "a:b::a" -> {"a", "b"}: empty entries dropped, repeats kept once (kubectl's deduplication).
std::vector<std::string> SplitPathList(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream stream(list);
  std::string item;
  while (std::getline(stream, item, ':')) {
    if (!item.empty() && std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
  }
  return out;
}

}  // namespace

Result<ClusterConfig> ParseKubeconfig(const std::string& yaml, const std::string& context,
                                      const std::string& base_dir, KubeconfigSource source) {
  Result<YAML::Node> root = LoadYaml(yaml, "");
  SYNCBUS_RETURN_IF_ERROR(root);
  if (!root->IsMap()) return ConfigError("not a YAML map");
  Merged merged;
  SYNCBUS_RETURN_IF_ERROR(MergeFile(*root, "", base_dir, merged));
  return Build(merged, context, source);
}

Result<ClusterConfig> LoadKubeconfigFile(const std::string& path, const std::string& context) {
  Result<std::string> content = ReadFile(path);
  if (!content.ok()) return content.status().Annotate("kubeconfig");
  return ParseKubeconfig(*content, context, DirName(path), KubeconfigSource::kOperator);
}

LoadingRules LoadingRulesFromEnvironment(std::string explicit_path, std::string context) {
  LoadingRules rules;
  rules.explicit_path = std::move(explicit_path);
  rules.context = std::move(context);
  // Read once at start-up, before any thread could change the environment.
  const char* list = std::getenv("KUBECONFIG");
  const char* home = std::getenv("HOME");
  if (list != nullptr) rules.kubeconfig_env = list;
  if (home != nullptr) rules.home = home;
  return rules;
}

Result<ClusterConfig> LoadClientConfig(const LoadingRules& rules) {
  std::vector<std::string> files;
  std::string tried;
  if (!rules.explicit_path.empty()) {
    files.push_back(rules.explicit_path);  // must exist: a read error below is the answer
  } else if (!rules.kubeconfig_env.empty()) {
    for (const std::string& file : SplitPathList(rules.kubeconfig_env)) {
      if (FileExists(file)) files.push_back(file);
    }
    tried = "$KUBECONFIG (" + rules.kubeconfig_env + ") names no file that exists";
  } else {
    std::string home_config = rules.home.empty() ? "" : rules.home + "/.kube/config";
    if (!home_config.empty() && FileExists(home_config)) files.push_back(home_config);
    tried = "$KUBECONFIG is not set and " + (home_config.empty() ? std::string("$HOME is not set")
                                                                 : home_config + " does not exist");
  }
  if (files.empty()) {
    Result<ClusterConfig> in_cluster = InClusterConfig(rules.in_cluster_root);
    if (in_cluster.ok() || in_cluster.status().code() != Code::kNotFound) return in_cluster;
    return Status(Code::kNotFound, "no kubeconfig: --kubeconfig not given, " + tried +
                                       ", and not running in a cluster (" +
                                       in_cluster.status().message() + ")");
  }
  Merged merged;
  for (const std::string& file : files) {
    Result<std::string> content = ReadFile(file);
    if (!content.ok()) return content.status().Annotate("kubeconfig");
    Result<YAML::Node> root = LoadYaml(*content, file);
    SYNCBUS_RETURN_IF_ERROR(root);
    SYNCBUS_RETURN_IF_ERROR(MergeFile(*root, files.size() > 1 ? file : "", DirName(file), merged));
  }
  Result<ClusterConfig> config = Build(merged, rules.context, KubeconfigSource::kOperator);
  const std::string prefix = "kubeconfig: ";
  if (!config.ok() && files.size() == 1 && config.status().message().starts_with(prefix)) {
    // "kubeconfig FILE: what", naming the one file read.
    return Status(config.status().code(), "kubeconfig " + files.front() + ": " +
                                              config.status().message().substr(prefix.size()));
  }
  return config;
}

Result<ClusterConfig> InClusterConfig(const std::string& root) {
  // Read once at start-up, before any thread could change the environment.
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
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
