// WaitFor: polls a condition until it holds or a time limit passes, for tests that wait on other
// threads or processes. Stateless and thread-safe; `done` runs on the calling thread.
#pragma once

#include <chrono>
#include <functional>

namespace syncbus::testing {

// True as soon as `done()` is, checking every `poll`; at `timeout`, one last check decides.
bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout,
             std::chrono::milliseconds poll = std::chrono::milliseconds(50));

}  // namespace syncbus::testing
