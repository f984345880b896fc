// FakeLiveness: the pool's liveness Leases as a test sets them (who lives, in which epoch, as the
// hub has it and as the watches have it), and FakeLivenessView, one consumer's view of them,
// counting the fresh reads its takeovers make. Thread-safe.
#pragma once

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "consumer/liveness_view.h"

namespace syncbus::testing {

class FakeLiveness {
 public:
  // Consumer `identity` lives in `epoch`, on the hub and in every watch.
  void Live(const std::string& identity, int64_t epoch) {
    std::lock_guard lock(mu_);
    watched_[identity] = epoch;
    hub_[identity] = epoch;
    stalled_.erase(identity);
  }
  // Consumer `identity` is gone.
  void Dead(const std::string& identity) {
    std::lock_guard lock(mu_);
    watched_.erase(identity);
    hub_.erase(identity);
  }
  // The watches have `identity` gone while it still lives on the hub (they lag or lost events).
  void WatchLost(const std::string& identity) {
    std::lock_guard lock(mu_);
    watched_.erase(identity);
  }
  // `identity` lives on, but has stopped renewing (paused, or cut off from the hub).
  void Stalled(const std::string& identity) {
    std::lock_guard lock(mu_);
    stalled_.insert(identity);
  }
  // Fresh reads fail with `status` (OK: they work again).
  void FailFreshReads(Status status) {
    std::lock_guard lock(mu_);
    fresh_error_ = std::move(status);
  }
  int fresh_reads() const {
    std::lock_guard lock(mu_);
    return fresh_reads_;
  }

 private:
  friend class FakeLivenessView;
  mutable std::mutex mu_;
  std::map<std::string, int64_t> watched_, hub_;  // identity -> epoch
  std::set<std::string> stalled_;
  Status fresh_error_;
  int fresh_reads_ = 0;
};

class FakeLivenessView final : public consumer::LivenessView {
 public:
  // `world` must outlive the view.
  FakeLivenessView(FakeLiveness& world, std::string identity)
      : world_(world), identity_(std::move(identity)) {}

  consumer::LivenessCheck Own() const override {
    std::lock_guard lock(world_.mu_);
    auto it = world_.watched_.find(identity_);
    return it == world_.watched_.end() ? consumer::LivenessCheck{false, 0}
                                       : consumer::LivenessCheck{true, it->second};
  }
  bool Alive(const std::string& identity, int64_t epoch) const override {
    std::lock_guard lock(world_.mu_);
    auto it = world_.watched_.find(identity);
    return it != world_.watched_.end() && it->second == epoch;
  }
  bool Renewing(const std::string& identity, int64_t epoch) const override {
    if (!Alive(identity, epoch)) return false;
    std::lock_guard lock(world_.mu_);
    return world_.stalled_.count(identity) == 0;
  }
  Result<bool> AliveFresh(const std::string& identity, int64_t epoch) override {
    std::lock_guard lock(world_.mu_);
    ++world_.fresh_reads_;
    if (!world_.fresh_error_.ok()) return world_.fresh_error_;
    auto it = world_.hub_.find(identity);
    return it != world_.hub_.end() && it->second == epoch;
  }
  size_t LiveCount() const override {
    std::lock_guard lock(world_.mu_);
    return std::max<size_t>(1, world_.watched_.size());
  }

 private:
  FakeLiveness& world_;
  const std::string identity_;
};

}  // namespace syncbus::testing
