// ChildProcess: a program started by a test (a daemon binary), its stdout+stderr in a log file.
// The destructor SIGKILLs it if it still runs, so a failing test never leaves processes behind.
// Thread-compatible: one owner.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "common/status.h"

namespace syncbus::testing {

class ChildProcess {
 public:
  static Result<ChildProcess> Start(const std::vector<std::string>& argv,
                                    const std::string& log_file);
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  bool running();
  // Sends `signal` and waits up to `timeout` for the exit; returns the exit code (128+signal when
  // killed by one), nullopt on timeout.
  std::optional<int> Stop(int signal, std::chrono::milliseconds timeout);
  // The log file's content (for failure messages).
  std::string Log() const;

 private:
  ChildProcess(pid_t pid, std::string log_file) : pid_(pid), log_file_(std::move(log_file)) {}
  pid_t pid_ = -1;
  std::string log_file_;
  std::optional<int> exit_code_;
};

// The build tree ($SYNCBUS_BINARY_DIR, else the tree these tests were built in).
std::string BinaryDir();
// The repository ($SYNCBUS_SOURCE_DIR, else the one these tests were built from).
std::string SourceDir();

}  // namespace syncbus::testing
