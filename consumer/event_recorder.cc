#include "consumer/event_recorder.h"

#include "common/hive/types.h"
#include "common/log.h"

namespace syncbus::consumer {
namespace {

namespace res = kube::resources;

}  // namespace

EventRecorder::EventRecorder(Options options, kube::Client& hub, const HubMirror* mirror,
                             const Clock& clock, Random& random, prometheus::Registry& registry)
    : options_(std::move(options)),
      hub_(hub),
      mirror_(mirror),
      random_(random),
      correlator_(clock, options_.correlator),
      events_(prometheus::BuildCounter()
                  .Name("syncbus_consumer_events_total")
                  .Help("Kubernetes Events about ClusterSyncs, by reason and result: created, "
                        "patched (a repeat counted), spam-filtered, dropped (queue full), failed "
                        "(refused, or the hub not reached), no-object (the cluster is gone)")
                  .Register(registry)) {
  writer_ = std::thread([this] { Run(); });
}

EventRecorder::~EventRecorder() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  writer_.join();
}

void EventRecorder::Count(const char* reason, const char* result) {
  events_.Add({{"reason", reason}, {"result", result}}).Increment();
}

void EventRecorder::Record(SyncEvent event) {
  {
    std::lock_guard lock(mu_);
    if (queue_.size() < options_.max_queued) {
      queue_.push_back(std::move(event));
      cv_.notify_all();
      return;
    }
  }
  Count(SyncEventReason(event.kind), "dropped");
  log::Warn("too many Events waiting; one dropped", {{"cluster", event.ns + "/" + event.name}});
}

bool EventRecorder::WaitIdle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return queue_.empty() && !busy_; });
}

bool EventRecorder::Pause(std::chrono::milliseconds delay) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, delay, [this] { return stopping_; });
}

void EventRecorder::Run() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    SyncEvent event = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    Write(event);
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

std::optional<EventObject> EventRecorder::InvolvedObject(const std::string& ns,
                                                         const std::string& name) {
  EventObject sync{hive::kHiveInternalApiVersion, "ClusterSync", ns, name, ""};
  if (mirror_ != nullptr) {
    if (auto status = mirror_->Status(ns, name)) {
      sync.uid = status->meta.uid;
      return sync;
    }
  }
  auto read = hub_.Get(kube::Object(res::kClusterSyncs, ns, name));
  if (read.ok()) {
    sync.uid = (*read)["metadata"].value("uid", "");
    return sync;
  }
  if (read.status().code() != Code::kNotFound) {
    log::Debug("no Event: the ClusterSync could not be read",
               {{"cluster", ns + "/" + name}, {"error", read.status().message()}});
    return std::nullopt;
  }
  // No status stored yet (the first sync failed before it could write one): the cluster itself.
  EventObject cd{hive::kHiveApiVersion, "ClusterDeployment", ns, name, ""};
  if (mirror_ != nullptr) {
    if (auto state = mirror_->Read(ns, name); state.cd) {
      cd.uid = state.cd->meta.uid;
      return cd;
    }
  }
  auto cluster = hub_.Get(kube::Object(res::kClusterDeployments, ns, name));
  if (!cluster.ok()) return std::nullopt;
  cd.uid = (*cluster)["metadata"].value("uid", "");
  return cd;
}

bool EventRecorder::Send(EventRecord& event, bool update, const char* reason) {
  const kube::ObjectRef ref = kube::Object(res::kEvents, event.object.ns, event.name);
  Result<Json> stored = Status(Code::kNotFound, "not patched");
  if (update) {
    stored = hub_.Patch(ref, kube::PatchType::kStrategicMerge, event.Patch().dump());
  }
  // A patched Event may be gone (the apiserver's event TTL): write it anew.
  bool created = !update || stored.status().code() == Code::kNotFound;
  if (created) {
    event.resource_version.clear();
    stored = hub_.Create(kube::Collection(res::kEvents, event.object.ns), event.ToJson());
  }
  if (stored.ok()) {
    correlator_.UpdateState(EventRecord::FromStored(*stored, event));
    Count(reason, created ? "created" : "patched");
    return true;
  }
  if (stored.status().http_status() != 0) {  // the server refused it: as client-go, no retry
    Count(reason, "failed");
    log::Warn("the hub refused an Event", {{"cluster", event.object.ns + "/" + event.object.name},
                                           {"reason", reason},
                                           {"error", stored.status().message()}});
    return true;
  }
  log::Debug("writing an Event failed; retrying",
             {{"cluster", event.object.ns + "/" + event.object.name},
              {"error", stored.status().message()}});
  return false;
}

void EventRecorder::Write(const SyncEvent& sync_event) {
  const char* reason = SyncEventReason(sync_event.kind);
  std::optional<EventObject> object = InvolvedObject(sync_event.ns, sync_event.name);
  if (!object) {
    Count(reason, "no-object");
    return;
  }
  EventRecord record;
  record.object = std::move(*object);
  record.type = SyncEventType(sync_event.kind);
  record.reason = reason;
  record.message = sync_event.message;
  record.source_component = options_.component;
  record.source_host = options_.host;
  Correlated correlated = correlator_.Correlate(std::move(record));
  if (correlated.skip) {
    Count(reason, "spam-filtered");
    return;
  }
  for (int tries = 1;; ++tries) {
    if (Send(correlated.event, correlated.update, reason)) return;
    if (tries >= options_.max_tries) break;
    // The first wait is random, so that consumers do not all retry at once after a hub outage.
    auto wait = tries == 1
                    ? std::chrono::milliseconds(static_cast<int64_t>(
                          random_.Uniform() * static_cast<double>(options_.retry_interval.count())))
                    : options_.retry_interval;
    if (!Pause(wait)) return;
  }
  Count(reason, "failed");
  log::Warn("an Event could not be written; given up",
            {{"cluster", sync_event.ns + "/" + sync_event.name}, {"reason", reason}});
}

}  // namespace syncbus::consumer
