#include "tests/support/child_process.h"

#include <cstdlib>
#include <cstring>
#include <thread>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/files.h"

extern char** environ;

namespace syncbus::testing {

Result<ChildProcess> ChildProcess::Start(const std::vector<std::string>& argv,
                                         const std::string& log_file) {
  if (argv.empty()) return InvalidArgument("empty argv");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return Internal("cannot start " + argv[0] + ": " + std::strerror(rc));
  return ChildProcess(pid, log_file);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_), log_file_(std::move(other.log_file_)), exit_code_(other.exit_code_) {
  other.pid_ = -1;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && running()) Stop(SIGKILL, std::chrono::seconds(10));
}

bool ChildProcess::running() {
  if (pid_ <= 0 || exit_code_) return false;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == 0) return true;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return false;
}

std::optional<int> ChildProcess::Stop(int signal, std::chrono::milliseconds timeout) {
  if (!running()) return exit_code_;
  kill(pid_, signal);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!running()) return exit_code_;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

std::string ChildProcess::Log() const {
  return ReadFile(log_file_);
}

std::string BinaryDir() {
  const char* dir = std::getenv("SYNCBUS_BINARY_DIR");
  return dir && *dir ? dir : SYNCBUS_BINARY_DIR_DEFAULT;
}

std::string SourceDir() {
  const char* dir = std::getenv("SYNCBUS_SOURCE_DIR");
  return dir && *dir ? dir : SYNCBUS_SOURCE_DIR_DEFAULT;
}

}  // namespace syncbus::testing
