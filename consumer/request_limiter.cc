#include "consumer/request_limiter.h"

#include <algorithm>
#include <chrono>

namespace syncbus::consumer {

RequestLimiter::RequestLimiter(Options options, Clock& clock) : options_(options), clock_(clock) {
  if (options_.per_cluster_qps > 0 && options_.pacing_thread)
    pacer_ = std::thread([this] { PaceLoop(); });
}

RequestLimiter::~RequestLimiter() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  pace_cv_.notify_all();
  if (pacer_.joinable()) pacer_.join();
}

void RequestLimiter::PumpLocked(const std::string& cluster, ClusterState& state, Runnable& out) {
  const double qps = options_.per_cluster_qps;
  while (!state.queue.empty() && state.in_flight < std::max(1, options_.per_cluster_in_flight)) {
    if (in_flight_ >= std::max(1, options_.max_in_flight)) {
      if (!state.waiting_global) {
        state.waiting_global = true;
        global_waiters_.push_back(cluster);
      }
      return;
    }
    if (qps > 0) {
      SteadyTime now = clock_.Now();
      double burst = std::max(1.0, qps);
      if (!state.bucket_started) {
        state.bucket_started = true;
        state.tokens = burst;
      } else {
        double elapsed = std::chrono::duration<double>(now - state.refilled).count();
        state.tokens = std::min(burst, state.tokens + elapsed * qps);
      }
      state.refilled = now;
      if (state.tokens < 1) {
        if (!state.paced) {
          auto wait = std::chrono::duration<double>((1 - state.tokens) / qps);
          state.paced = true;
          pace_queue_.emplace(now + std::chrono::duration_cast<Duration>(wait), cluster);
          pace_cv_.notify_one();
        }
        return;
      }
      state.tokens -= 1;
    }
    ++state.in_flight;
    ++in_flight_;
    ++started_;
    --queued_;
    peak_in_flight_ = std::max(peak_in_flight_, in_flight_);
    out.push_back(std::move(state.queue.front()));
    state.queue.pop_front();
  }
}

void RequestLimiter::PumpGlobalLocked(Runnable& out) {
  while (in_flight_ < std::max(1, options_.max_in_flight) && !global_waiters_.empty()) {
    std::string cluster = std::move(global_waiters_.front());
    global_waiters_.pop_front();
    ClusterState& state = clusters_[cluster];
    state.waiting_global = false;
    PumpLocked(cluster, state, out);
  }
}

void RequestLimiter::Submit(const std::string& cluster, std::function<void()> start) {
  Runnable run;
  {
    std::lock_guard lock(mu_);
    ClusterState& state = clusters_[cluster];
    state.queue.push_back(std::move(start));
    ++queued_;
    if (!state.waiting_global && !state.paced) PumpLocked(cluster, state, run);
  }
  for (auto& f : run) f();
}

void RequestLimiter::Release(const std::string& cluster) {
  Runnable run;
  {
    std::lock_guard lock(mu_);
    ClusterState& state = clusters_[cluster];
    --state.in_flight;
    --in_flight_;
    PumpGlobalLocked(run);
    if (!state.waiting_global && !state.paced) PumpLocked(cluster, state, run);
  }
  for (auto& f : run) f();
}

void RequestLimiter::PaceLoop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (pace_queue_.empty()) {
      pace_cv_.wait(lock);
      continue;
    }
    SteadyTime due = pace_queue_.begin()->first;
    SteadyTime now = clock_.Now();
    if (due > now) {
      pace_cv_.wait_for(lock, due - now);
      continue;
    }
    lock.unlock();
    PaceDue();
    lock.lock();
  }
}

void RequestLimiter::PaceDue() {
  Runnable run;
  {
    std::lock_guard lock(mu_);
    SteadyTime now = clock_.Now();
    while (!pace_queue_.empty() && pace_queue_.begin()->first <= now) {
      std::string cluster = pace_queue_.begin()->second;
      pace_queue_.erase(pace_queue_.begin());
      ClusterState& state = clusters_[cluster];
      state.paced = false;
      if (!state.waiting_global) PumpLocked(cluster, state, run);
    }
  }
  for (auto& f : run) f();
}

RequestLimiter::Stats RequestLimiter::stats() const {
  std::lock_guard lock(mu_);
  return {started_, in_flight_, peak_in_flight_, queued_};
}

}  // namespace syncbus::consumer
