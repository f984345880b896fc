// PendingWatchSink: hold, then forward in order.
#include "tests/kubesim/sim_watch_sink.h"

namespace syncbus::kubesim {

bool PendingWatchSink::Send(std::string line) {
  {
    std::lock_guard lock(mu_);
    if (state_ == State::kClosed) return false;
    if (state_ != State::kOpen) {
      held_.push_back(std::move(line));
      return true;
    }
  }
  // kOpen: target_ no longer changes.
  if (target_.send(std::move(line))) return true;
  std::lock_guard lock(mu_);
  state_ = State::kClosed;
  return false;
}

void PendingWatchSink::End() {
  {
    std::lock_guard lock(mu_);
    if (state_ == State::kClosed) return;
    if (state_ != State::kOpen) {
      ended_ = true;
      return;
    }
    state_ = State::kClosed;
  }
  target_.end();
}

void PendingWatchSink::Open(Target target) {
  {
    std::lock_guard lock(mu_);
    if (state_ != State::kHolding) return;
    target_ = std::move(target);
    state_ = State::kFlushing;
  }
  // Lines sent meanwhile are held behind the ones being flushed, so order is kept.
  while (true) {
    std::vector<std::string> lines;
    bool end = false;
    {
      std::lock_guard lock(mu_);
      if (held_.empty()) {
        end = ended_;
        state_ = end ? State::kClosed : State::kOpen;
      } else {
        lines.swap(held_);
      }
    }
    if (lines.empty()) {
      if (end) target_.end();
      return;
    }
    for (std::string& line : lines) {
      if (!target_.send(std::move(line))) {
        std::lock_guard lock(mu_);
        held_.clear();
        state_ = State::kClosed;
        return;
      }
    }
  }
}

void PendingWatchSink::Discard() {
  std::lock_guard lock(mu_);
  held_.clear();
  state_ = State::kClosed;
}

}  // namespace syncbus::kubesim
