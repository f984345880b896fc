#include "publisher/rollout_keeper.h"

#include <set>
#include <vector>

#include <fmt/format.h>

#include "common/kube/resource.h"
#include "common/log.h"
#include "common/time_format.h"

namespace syncbus::publisher {
namespace {

namespace res = kube::resources;

// "syncset/ns/name" or "selectorsyncset/name": the metric label and log field.
std::string SetLabel(const GatedSet& set) {
  return set.kind == hive::SetKind::kSyncSet ? "syncset/" + set.ns + "/" + set.name
                                             : "selectorsyncset/" + set.name;
}

kube::ObjectRef RefOf(const GatedSet& set) {
  return set.kind == hive::SetKind::kSyncSet ? kube::Object(res::kSyncSets, set.ns, set.name)
                                             : kube::Object(res::kSelectorSyncSets, "", set.name);
}

GatedSet GatedOf(const hive::ObjectMeta& meta, hive::SetKind kind) {
  return {kind, meta.ns, meta.name, meta.generation, rollout::RolloutOf(meta)};
}

}  // namespace

RolloutKeeper::RolloutKeeper(HubCache& cache, kube::Client& hub, Clock& clock,
                             prometheus::Registry& registry, std::string identity)
    : cache_(cache),
      hub_(hub),
      clock_(clock),
      identity_(std::move(identity)),
      wave_(prometheus::BuildGauge()
                .Name("syncbus_publisher_rollout_wave")
                .Help("The last wave a set's rollout released, by set (equal to "
                      "syncbus_publisher_rollout_waves once complete)")
                .Register(registry)),
      halted_(prometheus::BuildGauge()
                  .Name("syncbus_publisher_rollout_halted")
                  .Help("1 while a set's rollout is halted (too many failures in a wave, a "
                        "missed deadline or an unreadable annotation), by set")
                  .Register(registry)),
      steps_(prometheus::BuildCounter()
                 .Name("syncbus_publisher_rollout_steps_total")
                 .Help("Rollout steps the leader took, by reason (RolloutStarted, "
                       "RolloutWaveReleased, RolloutComplete, RolloutHalted)")
                 .Register(registry)) {}

Status RolloutKeeper::Tick() {
  Status first = RetryEvents();
  auto inputs = cache_.Rollouts([](const hive::ObjectMeta& meta) {
    return RolloutActive(GatedOf(meta, hive::SetKind::kSyncSet));
  });
  std::set<std::string> seen;
  const WallTime now = clock_.WallNow();
  for (const auto& in : inputs) {
    const hive::ObjectMeta& meta = in.sync_set ? in.sync_set->meta : in.selector_sync_set->meta;
    const hive::SetKind kind =
        in.sync_set ? hive::SetKind::kSyncSet : hive::SetKind::kSelectorSyncSet;
    const GatedSet set = GatedOf(meta, kind);
    seen.insert(SetLabel(set));
    SetGauges(set);
    std::vector<RolloutCluster> clusters;
    clusters.reserve(in.clusters.size());
    for (const auto& [cd, status] : in.clusters) {
      clusters.push_back({cd.get(), status ? status->Find(kind, meta.name) : nullptr});
    }
    RolloutStep step = DecideRollout(set, clusters, now);
    if (!step.write) continue;
    Status written = Write(set, meta.resource_version, *step.write);
    if (!written.ok()) {
      // A conflict: syncbusctl or another leader wrote first; the cache brings the newer set.
      log::Info("rollout state not written; deciding again from the newer set",
                {{"set", SetLabel(set)}, {"error", written.message()}});
      if (first.ok()) first = written;
      continue;
    }
    if (step.event) {
      steps_.Add({{"reason", step.event->reason}}).Increment();
      log::Info("rollout " + step.event->reason,
                {{"set", SetLabel(set)}, {"message", step.event->message}});
      Status recorded = RecordEvent(set, meta.uid, *step.event);
      if (first.ok() && !recorded.ok()) first = recorded;
    }
    GatedSet after = set;
    after.rollout.state = *step.write;
    SetGauges(after);
  }
  for (auto it = gauges_.begin(); it != gauges_.end();) {
    if (seen.contains(it->first)) {
      ++it;
      continue;
    }
    wave_.Remove(it->second.first);
    halted_.Remove(it->second.second);
    it = gauges_.erase(it);
  }
  return first;
}

void RolloutKeeper::Reset() {
  for (const auto& [label, gauges] : gauges_) {
    wave_.Remove(gauges.first);
    halted_.Remove(gauges.second);
  }
  gauges_.clear();
  for (const UnrecordedEvent& e : unrecorded_) {
    log::Warn("a rollout Event not recorded: no longer the leader",
              {{"set", e.set}, {"reason", e.event.value("reason", "")}});
  }
  unrecorded_.clear();
}

Status RolloutKeeper::Write(const GatedSet& set, const std::string& resource_version,
                            const rollout::RolloutState& state) {
  Json patch = {{"metadata",
                 {{"resourceVersion", resource_version},
                  {"annotations", {{rollout::kStateAnnotation, rollout::EncodeState(state)}}}}}};
  auto written = hub_.Patch(RefOf(set), kube::PatchType::kMerge, patch.dump());
  return written.ok() ? Status::Ok() : written.status();
}

Status RolloutKeeper::RecordEvent(const GatedSet& set, const std::string& uid,
                                  const RolloutEvent& event) {
  const WallTime now = clock_.WallNow();
  const std::string ns = set.kind == hive::SetKind::kSyncSet ? set.ns : "default";
  Json involved = {{"apiVersion", "hive.openshift.io/v1"},
                   {"kind", set.kind == hive::SetKind::kSyncSet ? "SyncSet" : "SelectorSyncSet"},
                   {"name", set.name},
                   {"uid", uid}};
  if (!set.ns.empty()) involved["namespace"] = set.ns;
  const auto nanos =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  Json e = {{"apiVersion", "v1"},
            {"kind", "Event"},
            {"metadata",
             // A name is at most 253 characters: the set's (cut) and the time, as client-go's.
             {{"name", fmt::format("{}.{:x}", set.name.substr(0, 200), nanos)}, {"namespace", ns}}},
            {"involvedObject", involved},
            {"type", event.warning ? "Warning" : "Normal"},
            {"reason", event.reason},
            {"message", event.message},
            {"source", {{"component", "syncbus-publisher"}, {"host", identity_}}},
            {"count", 1},
            {"firstTimestamp", FormatRfc3339(now)},
            {"lastTimestamp", FormatRfc3339(now)}};
  Status created = CreateEvent(ns, e);
  if (!created.ok()) {
    log::Warn("the hub refused a rollout Event; trying again on the next looks",
              {{"set", SetLabel(set)}, {"reason", event.reason}, {"error", created.message()}});
    unrecorded_.push_back({SetLabel(set), ns, std::move(e)});
  }
  return created;
}

Status RolloutKeeper::CreateEvent(const std::string& ns, const Json& event) {
  auto created = hub_.Create(kube::Collection(res::kEvents, ns), event);
  if (created.ok() || created.status().code() == Code::kAlreadyExists) return Status::Ok();
  return created.status();
}

Status RolloutKeeper::RetryEvents() {
  Status first = Status::Ok();
  std::erase_if(unrecorded_, [&](UnrecordedEvent& e) {
    Status created = CreateEvent(e.ns, e.event);
    if (created.ok()) return true;
    if (first.ok()) first = created;
    if (++e.tries < kEventTries) return false;
    log::Warn("a rollout Event given up after every try", {{"set", e.set},
                                                           {"reason", e.event.value("reason", "")},
                                                           {"tries", std::to_string(e.tries)},
                                                           {"error", created.message()}});
    return true;
  });
  return first;
}

void RolloutKeeper::SetGauges(const GatedSet& set) {
  const std::string label = SetLabel(set);
  auto it = gauges_.find(label);
  if (it == gauges_.end()) {
    it =
        gauges_
            .emplace(label, std::pair{&wave_.Add({{"set", label}}), &halted_.Add({{"set", label}})})
            .first;
  }
  const auto& state = set.rollout.state;
  const bool current = state && state->generation == set.generation;
  it->second.first->Set(current ? state->wave : 0);
  it->second.second->Set(current && state->phase == rollout::Phase::kHalted ? 1 : 0);
}

}  // namespace syncbus::publisher
