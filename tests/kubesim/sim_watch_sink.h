// PendingWatchSink: the WatchSink a transport hands to ApiServer::StartWatch. It holds events
// until the transport knows the watch started (and has sent its 200 headers), then forwards them
// in order; if the watch failed to start it drops them. Thread-safe; the target's functions are
// called without any lock held (Send and End calls are expected one at a time, as a watch's
// events are).
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "tests/kubesim/api_server.h"

namespace syncbus::kubesim {

class PendingWatchSink final : public WatchSink {
 public:
  struct Target {
    std::function<bool(std::string)> send;  // false once the client is gone
    std::function<void()> end;
  };

  bool Send(std::string line) override;
  void End() override;

  // Flushes what was held to `target` and forwards everything after it.
  void Open(Target target);
  // The watch never started: drop what was held and refuse the rest.
  void Discard();

 private:
  std::mutex mu_;
  enum class State { kHolding, kFlushing, kOpen, kClosed } state_ = State::kHolding;
  std::vector<std::string> held_;
  bool ended_ = false;
  Target target_;
};

}  // namespace syncbus::kubesim
