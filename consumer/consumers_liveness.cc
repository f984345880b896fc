#include "consumer/consumers_liveness.h"

namespace syncbus::consumer {
namespace {

std::string LeaseNameOf(const Json& lease) {
  auto metadata = lease.find("metadata");
  return metadata != lease.end() && metadata->is_object() ? metadata->value("name", "") : "";
}

}  // namespace

ConsumersLiveness::ConsumersLiveness(ConsumerLiveness& own, kube::Client& hub, std::string ns,
                                     Clock& clock)
    : own_(own), hub_(hub), ns_(std::move(ns)), clock_(clock) {}

LivenessCheck ConsumersLiveness::Own() const {
  return own_.Check();
}

bool ConsumersLiveness::AliveBy(const LivenessRecord& record, const std::string& identity,
                                int64_t epoch, WallTime now) {
  return record.identity == identity && record.epoch == epoch && record.LiveAt(now);
}

const LivenessRecord* ConsumersLiveness::AliveRecord(const std::string& identity, int64_t epoch,
                                                     WallTime now) const {
  auto it = leases_.find(LivenessLeaseName(identity));
  return it != leases_.end() && AliveBy(it->second, identity, epoch, now) ? &it->second : nullptr;
}

bool ConsumersLiveness::Alive(const std::string& identity, int64_t epoch) const {
  const WallTime now = clock_.WallNow();
  std::lock_guard lock(mu_);
  return AliveRecord(identity, epoch, now) != nullptr;
}

bool ConsumersLiveness::Renewing(const std::string& identity, int64_t epoch) const {
  const WallTime now = clock_.WallNow();
  std::lock_guard lock(mu_);
  const LivenessRecord* record = AliveRecord(identity, epoch, now);
  return record != nullptr &&
         now < record->renew_time + std::chrono::milliseconds(record->duration) / 2;
}

Result<bool> ConsumersLiveness::AliveFresh(const std::string& identity, int64_t epoch) {
  const std::string name = LivenessLeaseName(identity);
  auto lease = hub_.Get(kube::Object(kube::resources::kLeases, ns_, name));
  if (!lease.ok()) {
    if (lease.status().code() == Code::kNotFound) return false;
    return lease.status().Annotate("reading the liveness Lease of " + identity);
  }
  return AliveBy(LivenessOf(*lease), identity, epoch, clock_.WallNow());
}

size_t ConsumersLiveness::LiveCount() const {
  const std::string own_name = own_.lease_name();
  const WallTime now = clock_.WallNow();
  std::lock_guard lock(mu_);
  size_t live = 1;  // this one
  for (const auto& [name, record] : leases_) {
    if (name != own_name && record.LiveAt(now)) ++live;
  }
  return live;
}

void ConsumersLiveness::OnReplace(std::vector<Json> items) {
  std::map<std::string, LivenessRecord> leases;
  for (const Json& item : items) leases[LeaseNameOf(item)] = LivenessOf(item);
  std::lock_guard lock(mu_);
  leases_ = std::move(leases);
}

void ConsumersLiveness::OnUpsert(Json object) {
  LivenessRecord record = LivenessOf(object);
  std::lock_guard lock(mu_);
  leases_[LeaseNameOf(object)] = std::move(record);
}

void ConsumersLiveness::OnDelete(Json object) {
  std::lock_guard lock(mu_);
  leases_.erase(LeaseNameOf(object));
}

}  // namespace syncbus::consumer
