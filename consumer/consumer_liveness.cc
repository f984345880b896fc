#include "consumer/consumer_liveness.h"

#include <algorithm>
#include <charconv>

#include "common/bus/cluster_claim.h"
#include "common/digest.h"
#include "common/log.h"
#include "common/time_format.h"

namespace syncbus::consumer {
namespace {

namespace res = kube::resources;

constexpr size_t kMaxLabel = 63;
constexpr size_t kDigestChars = 8;

// Written by someone else (409) or deleted (404) since this process last wrote it.
bool LeaseReplaced(Code code) {
  return code == Code::kConflict || code == Code::kNotFound;
}

std::string TextAt(const Json& object, const char* section, const char* key) {
  auto outer = object.find("metadata");
  if (outer == object.end() || !outer->is_object()) return "";
  auto inner = outer->find(section);
  if (inner == outer->end() || !inner->is_object()) return "";
  auto it = inner->find(key);
  return it != inner->end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

std::string LivenessLeaseName(const std::string& identity) {
  std::string name;
  for (char c : identity) {
    char lower = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    bool allowed = (lower >= 'a' && lower <= 'z') || (lower >= '0' && lower <= '9') || lower == '-';
    name += allowed ? lower : '-';
  }
  if (name == identity && !name.empty() && name.size() <= kMaxLabel && name.front() != '-' &&
      name.back() != '-') {
    return name;
  }
  // Lossy or too long: what is left of it, then a digest of the identity itself.
  name.resize(std::min(name.size(), kMaxLabel - kDigestChars - 1));
  while (!name.empty() && name.front() == '-') name.erase(name.begin());
  while (!name.empty() && name.back() == '-') name.pop_back();
  const std::string digest = Sha256Hex(identity).substr(0, kDigestChars);
  return name.empty() ? digest : name + "-" + digest;
}

WallTime LivenessRecord::ExpiresAt(std::chrono::milliseconds skew) const {
  return renew_time + duration + skew;
}

LivenessRecord LivenessOf(const Json& lease) {
  LivenessRecord record;
  auto spec = lease.find("spec");
  if (spec == lease.end() || !spec->is_object()) return record;
  record.identity = spec->value("holderIdentity", "");
  auto seconds = spec->find("leaseDurationSeconds");
  if (seconds != spec->end() && seconds->is_number_integer())
    record.duration = std::chrono::seconds(seconds->get<int64_t>());
  auto renewed = ParseRfc3339(spec->value("renewTime", ""));
  const std::string epoch = TextAt(lease, "annotations", kEpochAnnotation);
  auto [end, error] = std::from_chars(epoch.data(), epoch.data() + epoch.size(), record.epoch);
  if (error != std::errc() || end != epoch.data() + epoch.size()) record.epoch = 0;
  if (renewed.ok()) record.renew_time = *renewed;
  record.valid = renewed.ok() && record.duration.count() > 0 && record.epoch > 0;
  return record;
}

Result<size_t> SweepExpiredLiveness(kube::Client& hub, const std::string& ns, WallTime now,
                                    std::chrono::seconds grace) {
  kube::ListOptions options;
  options.label_selector = kLivenessSelector;
  auto leases = hub.List(kube::Collection(res::kLeases, ns), options);
  if (!leases.ok()) return leases.status().Annotate("listing the liveness Leases");
  size_t deleted = 0;
  for (const Json& lease : leases->items) {
    const LivenessRecord record = LivenessOf(lease);
    if (!record.valid || now < record.ExpiresAt(grace)) continue;
    kube::DeleteOptions precondition;
    precondition.precondition_resource_version = lease["metadata"].value("resourceVersion", "");
    const std::string name = lease["metadata"].value("name", "");
    Status status = hub.Delete(kube::Object(res::kLeases, ns, name), precondition);
    if (status.ok()) {
      ++deleted;
      log::Info("deleted an expired liveness Lease",
                {{"lease", ns + "/" + name}, {"holder", record.identity}});
    } else if (!LeaseReplaced(status.code())) {
      return status.Annotate("deleting the expired liveness Lease " + ns + "/" + name);
    }
  }
  return deleted;
}

ConsumerLiveness::ConsumerLiveness(LivenessOptions options, kube::Client& hub, Clock& clock,
                                   prometheus::Registry& registry)
    : options_(std::move(options)),
      name_(LivenessLeaseName(options_.identity)),
      hub_(hub),
      clock_(clock),
      events_(prometheus::BuildCounter()
                  .Name("syncbus_consumer_liveness_total")
                  .Help("Renewals of the consumer's liveness Lease: renewed, failed, and "
                        "epoch-moved (a lapse or a re-created Lease voided its sticky claims)")
                  .Register(registry)),
      renewed_ok_(events_.Add({{"event", "renewed"}})),
      renew_failed_(events_.Add({{"event", "failed"}})),
      epoch_moved_(events_.Add({{"event", "epoch-moved"}})) {}

ConsumerLiveness::~ConsumerLiveness() {
  StopRenewing();
}

Json ConsumerLiveness::LeaseFor(const Json& base, int64_t epoch) const {
  const std::string now = FormatRfc3339Micro(clock_.WallNow());
  Json lease = base.is_object() ? base : Json::object();
  lease["apiVersion"] = res::kLeases.ApiVersion();
  lease["kind"] = res::kLeases.kind;
  Json& metadata = lease["metadata"];
  metadata["name"] = name_;
  metadata["namespace"] = options_.ns;
  metadata["labels"][kLivenessLabel] = "true";
  metadata["annotations"][kEpochAnnotation] = std::to_string(epoch);
  Json& spec = lease["spec"];
  if (LivenessOf(base).epoch != epoch) spec["acquireTime"] = now;
  spec["holderIdentity"] = options_.identity;
  spec["leaseDurationSeconds"] = std::max<int64_t>(1, options_.duration.count());
  spec["renewTime"] = now;
  return lease;
}

bool ConsumerLiveness::LandedLate(int64_t epoch) const {
  std::lock_guard lock(state_mu_);
  return renewed_ && epoch == epoch_ &&
         clock_.Now() >= renewed_at_ + options_.duration - options_.safety_margin;
}

void ConsumerLiveness::NoteWritten(Json written, int64_t epoch, SteadyTime start) {
  record_ = std::move(written);
  renewed_ok_.Increment();
  std::lock_guard lock(state_mu_);
  if (epoch_ != 0 && epoch != epoch_) {
    epoch_moved_.Increment();
    log::Warn("liveness epoch moved: the claims of the earlier epoch are void",
              {{"from", std::to_string(epoch_)}, {"to", std::to_string(epoch)}});
  }
  epoch_ = epoch;
  renewed_ = true;
  renewed_at_ = start;
}

void ConsumerLiveness::EndFence() {
  std::lock_guard lock(state_mu_);
  renewed_ = false;
}

Status ConsumerLiveness::Rewrite(SteadyTime start) {
  EndFence();
  const kube::ObjectRef ref = kube::Object(res::kLeases, options_.ns, name_);
  auto current = hub_.Get(ref);
  if (!current.ok() && current.status().code() != Code::kNotFound)
    return current.status().Annotate("reading the liveness Lease");
  int64_t epoch = 0;
  {
    std::lock_guard lock(state_mu_);
    epoch = epoch_;
  }
  Result<Json> written = Status(Code::kInternal, "unwritten");
  if (current.ok()) {
    epoch = std::max(epoch, LivenessOf(*current).epoch) + 1;
    written = hub_.Update(ref, LeaseFor(*current, epoch));
  } else {
    epoch += 1;
    written = hub_.Create(kube::Collection(res::kLeases, options_.ns), LeaseFor(Json(), epoch));
  }
  if (!written.ok()) return written.status().Annotate("writing the liveness Lease");
  NoteWritten(std::move(*written), epoch, start);
  return Status::Ok();
}

Status ConsumerLiveness::Start() {
  std::lock_guard write(write_mu_);
  Status status = Rewrite(clock_.Now());
  if (!status.ok()) renew_failed_.Increment();
  return status;
}

Status ConsumerLiveness::Renew() {
  std::lock_guard write(write_mu_);
  const SteadyTime start = clock_.Now();
  if (stopped_) return {Code::kCancelled, "the liveness Lease was given up"};
  Status status;
  if (!record_.is_object()) {
    status = Rewrite(start);  // never written (Start failed): start now
  } else {
    int64_t epoch = 0;
    {
      std::lock_guard lock(state_mu_);
      const bool lapsed =
          !renewed_ || start >= renewed_at_ + options_.duration - options_.safety_margin;
      epoch = lapsed ? epoch_ + 1 : epoch_;
    }
    auto written =
        hub_.Update(kube::Object(res::kLeases, options_.ns, name_), LeaseFor(record_, epoch));
    if (written.ok() && LandedLate(epoch)) {
      // It may have reached the hub after the Lease had expired for the others, who may have
      // taken this consumer's claims meanwhile: the epoch ends with the fence, and the next
      // renewal (a lapse) starts a new one.
      record_ = std::move(*written);
      status = Status(Code::kTimeout, "the liveness renewal came back after the fence ended");
    } else if (written.ok()) {
      NoteWritten(std::move(*written), epoch, start);
    } else if (LeaseReplaced(written.status().code())) {
      status = Rewrite(start);
    } else {
      status = written.status().Annotate("renewing the liveness Lease");
    }
  }
  if (!status.ok()) {
    renew_failed_.Increment();
    log::Debug("liveness renewal failed", {{"error", status.message()}});
  }
  return status;
}

LivenessCheck ConsumerLiveness::Check() const {
  const SteadyTime now = clock_.Now();
  std::lock_guard lock(state_mu_);
  return {renewed_ && now < renewed_at_ + options_.duration - options_.safety_margin, epoch_};
}

void ConsumerLiveness::StartRenewing() {
  renewer_ = std::thread([this] {
    const auto tick = std::max<std::chrono::milliseconds>(options_.renew_interval / 5,
                                                          std::chrono::milliseconds(100));
    std::unique_lock lock(thread_mu_);
    while (!stop_cv_.wait_for(lock, tick, [&] { return stopping_; })) {
      lock.unlock();
      bool due = false;
      {
        std::lock_guard state(state_mu_);
        due = !renewed_ || clock_.Now() - renewed_at_ >= options_.renew_interval;
      }
      if (due) (void)Renew();  // failures are counted and logged; the next tick retries
      lock.lock();
    }
  });
}

void ConsumerLiveness::StopRenewing() {
  {
    std::lock_guard lock(thread_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
}

Status ConsumerLiveness::Stop() {
  StopRenewing();
  std::lock_guard write(write_mu_);
  stopped_ = true;
  EndFence();
  if (!record_.is_object()) return Status::Ok();
  kube::DeleteOptions precondition;
  precondition.precondition_uid = record_["metadata"].value("uid", "");
  precondition.precondition_resource_version = record_["metadata"].value("resourceVersion", "");
  record_ = nullptr;
  Status status = hub_.Delete(kube::Object(res::kLeases, options_.ns, name_), precondition);
  // Gone, or written by someone else since: not this process's to delete.
  if (status.ok() || LeaseReplaced(status.code())) return Status::Ok();
  return status.Annotate("deleting the liveness Lease");
}

}  // namespace syncbus::consumer
