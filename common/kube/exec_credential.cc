#include "common/kube/exec_credential.h"

#include <cerrno>
#include <system_error>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/time_format.h"
#include "common/unique_fd.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX, not in <unistd.h>

namespace syncbus::kube {
namespace {

constexpr char kExecInfoEnv[] = "KUBERNETES_EXEC_INFO";
// An ExecCredential is a few kilobytes; more means the plugin prints something else.
constexpr size_t kMaxOutput = 1 << 20;

Status PluginError(const std::string& what) {
  return Status(Code::kUnauthorized, "exec plugin: " + what);
}

// posix_spawn_file_actions_t, destroyed with its owner.
class FileActions {
 public:
  FileActions() { posix_spawn_file_actions_init(&actions_); }
  ~FileActions() { posix_spawn_file_actions_destroy(&actions_); }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_{};
};

// This process's environment with `extra` set on top (a later value replaces an earlier one).
std::vector<std::string> Environment(
    const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry)
    env.emplace_back(*entry);
  for (const auto& [name, value] : extra) {
    std::string prefix = name + "=";
    std::erase_if(env, [&](const std::string& e) { return e.starts_with(prefix); });
    env.push_back(prefix + value);
  }
  return env;
}

struct RunResult {
  int wait_status = 0;
  std::string output;
  bool truncated = false;
};

// Runs `argv` with `env`, stdout captured, stdin this process's when `interactive` else
// /dev/null, stderr this process's. errno-style error number when it could not start.
Result<RunResult> Run(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                      bool interactive, int& spawn_errno) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return Internal(std::string("pipe2: ") + std::generic_category().message(errno));
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  FileActions actions;
  posix_spawn_file_actions_adddup2(actions.get(), write_end.get(), STDOUT_FILENO);
  if (!interactive) {
    posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  }
  std::vector<char*> c_argv, c_env;
  for (const std::string& arg : argv) c_argv.push_back(const_cast<char*>(arg.c_str()));
  c_argv.push_back(nullptr);
  for (const std::string& entry : env) c_env.push_back(const_cast<char*>(entry.c_str()));
  c_env.push_back(nullptr);
  pid_t pid = 0;
  spawn_errno =
      posix_spawnp(&pid, argv[0].c_str(), actions.get(), nullptr, c_argv.data(), c_env.data());
  write_end.Reset();
  if (spawn_errno != 0)
    return Status(Code::kUnavailable, std::generic_category().message(spawn_errno));
  RunResult result;
  char buffer[8192];
  while (true) {
    ssize_t n = read(read_end.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (result.output.size() + static_cast<size_t>(n) > kMaxOutput) {
      result.truncated = true;  // keep reading: the plugin must not block on a full pipe
      continue;
    }
    result.output.append(buffer, static_cast<size_t>(n));
  }
  while (waitpid(pid, &result.wait_status, 0) < 0) {
    if (errno != EINTR)
      return Internal(std::string("waitpid: ") + std::generic_category().message(errno));
  }
  return result;
}

}  // namespace

std::string ExecCredentialInput(const ExecConfig& config, bool interactive) {
  Json spec = {{"interactive", interactive}};
  if (!config.cluster.is_null()) spec["cluster"] = config.cluster;
  return Json{{"kind", "ExecCredential"}, {"apiVersion", config.api_version}, {"spec", spec}}
      .dump();
}

ExecCredentialPlugin::Terminal ExecCredentialPlugin::ThisProcessTerminal() {
  return {isatty(STDIN_FILENO) == 1};
}

ExecCredentialPlugin::ExecCredentialPlugin(std::shared_ptr<const ExecConfig> config,
                                           std::shared_ptr<const http::TlsOptions> base_tls,
                                           const Clock& clock, Terminal terminal)
    : config_(std::move(config)),
      base_tls_(std::move(base_tls)),
      clock_(clock),
      terminal_(terminal) {}

Result<std::shared_ptr<const ExecCredentialPlugin::Credential>> ExecCredentialPlugin::Get() {
  std::lock_guard lock(mu_);
  if (cached_ != nullptr && (!cached_->expires || clock_.WallNow() <= *cached_->expires)) {
    return cached_;
  }
  return RunLocked();
}

void ExecCredentialPlugin::Rejected(const std::shared_ptr<const Credential>& credential) {
  std::lock_guard lock(mu_);
  if (cached_ == credential) cached_.reset();
}

Result<std::shared_ptr<const ExecCredentialPlugin::Credential>> ExecCredentialPlugin::RunLocked() {
  const ExecConfig& config = *config_;
  bool interactive = false;
  switch (config.interactive) {
    case ExecConfig::Interactive::kNever: break;
    case ExecConfig::Interactive::kIfAvailable: interactive = terminal_.stdin_is_terminal; break;
    case ExecConfig::Interactive::kAlways:
      if (!terminal_.stdin_is_terminal) {
        return PluginError(
            "cannot support interactive mode: standard input is not a terminal "
            "(interactiveMode: Always)");
      }
      interactive = true;
      break;
  }
  std::vector<std::pair<std::string, std::string>> extra = config.env;
  extra.emplace_back(kExecInfoEnv, ExecCredentialInput(config, interactive));
  std::vector<std::string> argv{config.command};
  argv.insert(argv.end(), config.args.begin(), config.args.end());
  int spawn_errno = 0;
  Result<RunResult> run = Run(argv, Environment(extra), interactive, spawn_errno);
  const std::string name = "\"" + config.command + "\"";
  if (!run.ok()) {
    if (spawn_errno == ENOENT) {
      std::string message = "executable " + name + " not found";
      if (!config.install_hint.empty()) message += "\n\n" + config.install_hint;
      return PluginError(message);
    }
    return PluginError("cannot run " + name + ": " + run.status().message());
  }
  if (WIFSIGNALED(run->wait_status)) {
    return PluginError("executable " + name + " was killed by signal " +
                       std::to_string(WTERMSIG(run->wait_status)));
  }
  if (WEXITSTATUS(run->wait_status) != 0) {
    return PluginError("executable " + name + " failed with exit code " +
                       std::to_string(WEXITSTATUS(run->wait_status)));
  }
  if (run->truncated) {
    return PluginError(name + " printed more than " + std::to_string(kMaxOutput) +
                       " bytes: not an ExecCredential");
  }
  Json out = Json::parse(run->output, nullptr, /*allow_exceptions=*/false);
  if (!out.is_object() || out.value("kind", "") != "ExecCredential") {
    return PluginError("decoding the output of " + name + ": not an ExecCredential object");
  }
  std::string version = out.value("apiVersion", "");
  if (version != config.api_version) {
    return PluginError("it is configured to use API version " + config.api_version +
                       ", the plugin returned version " + (version.empty() ? "(none)" : version));
  }
  const Json& status = out.contains("status") ? out["status"] : Json();
  if (!status.is_object()) return PluginError(name + " did not return a status field");
  auto text = [&status](const char* key) {
    return status.contains(key) && status[key].is_string() ? status[key].get<std::string>()
                                                           : std::string();
  };
  auto credential = std::make_shared<Credential>();
  credential->token = text("token");
  std::string cert = text("clientCertificateData"), key = text("clientKeyData");
  if (credential->token.empty() && cert.empty() && key.empty()) {
    return PluginError(name + " did not return a token or a certificate/key pair");
  }
  if (cert.empty() != key.empty()) {
    return PluginError(name + " returned only a certificate or a key, not both");
  }
  if (!cert.empty()) {
    auto tls = std::make_shared<http::TlsOptions>(*base_tls_);
    tls->client_cert_file.clear();
    tls->client_key_file.clear();
    tls->client_cert_pem = std::move(cert);
    tls->client_key_pem = std::move(key);
    credential->tls = std::move(tls);
  }
  if (std::string expiry = text("expirationTimestamp"); !expiry.empty()) {
    Result<WallTime> parsed = ParseRfc3339(expiry);
    if (!parsed.ok()) {
      return PluginError(name + " returned an invalid expirationTimestamp \"" + expiry + "\"");
    }
    credential->expires = *parsed;
  }
  cached_ = credential;
  return std::shared_ptr<const Credential>(credential);
}

}  // namespace syncbus::kube
