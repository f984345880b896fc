// RequestLimiter: admission control for requests to target clusters — a global in-flight cap, a
// per-cluster in-flight cap and a per-cluster request rate (token bucket, one second of burst).
// Waiting requests queue FIFO per cluster; clusters blocked only by the global cap queue FIFO for
// it, so one busy cluster cannot starve the others. Thread-safe; `start` callbacks run on the
// thread that submitted, released or paced them (the pacing thread) and must not block.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "common/clock.h"

namespace syncbus::consumer {

class RequestLimiter {
 public:
  struct Options {
    int max_in_flight = 2000;  // across all clusters
    int per_cluster_in_flight = 20;
    double per_cluster_qps = 50;  // 0 = no rate limit
    // Whether a thread of its own starts paced requests when their token is due. Off, the owner
    // calls PaceDue() (tests that drive a FakeClock).
    bool pacing_thread = true;
  };
  struct Stats {
    uint64_t started = 0;
    int in_flight = 0;
    int peak_in_flight = 0;
    size_t queued = 0;
  };

  RequestLimiter(Options options, Clock& clock);
  // Requests still queued are dropped without running.
  ~RequestLimiter();
  RequestLimiter(const RequestLimiter&) = delete;
  RequestLimiter& operator=(const RequestLimiter&) = delete;

  // Runs `start` once a request to `cluster` may go. `start` sends it and makes sure Release()
  // is called exactly once when it completes.
  void Submit(const std::string& cluster, std::function<void()> start);
  void Release(const std::string& cluster);
  // Starts the paced requests whose token is due at the clock's now.
  void PaceDue();

  Stats stats() const;

 private:
  struct ClusterState {
    int in_flight = 0;
    std::deque<std::function<void()>> queue;
    bool bucket_started = false;  // the bucket starts full
    double tokens = 0;
    SteadyTime refilled{};
    bool waiting_global = false;
    bool paced = false;  // in pace_queue_
  };
  using Runnable = std::vector<std::function<void()>>;

  // Starts what `cluster` may start now; the rest waits for a slot or a token.
  void PumpLocked(const std::string& cluster, ClusterState& state, Runnable& out);
  void PumpGlobalLocked(Runnable& out);
  void PaceLoop();

  const Options options_;
  Clock& clock_;
  mutable std::mutex mu_;
  std::condition_variable pace_cv_;
  std::map<std::string, ClusterState> clusters_;
  std::deque<std::string> global_waiters_;
  std::set<std::pair<SteadyTime, std::string>> pace_queue_;  // (when a token is due, cluster)
  int in_flight_ = 0;
  int peak_in_flight_ = 0;
  uint64_t started_ = 0;
  size_t queued_ = 0;
  bool stopping_ = false;
  std::thread pacer_;
};

}  // namespace syncbus::consumer
