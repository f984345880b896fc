#include "common/kube/reflector.h"

#include <utility>

#include "common/log.h"

namespace syncbus::kube {

Reflector::Reflector(Client& client, ObjectRef collection, ReflectorHandler& handler,
                     Options options)
    : client_(client),
      collection_(std::move(collection)),
      handler_(handler),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : RealClock()),
      random_(options_.random != nullptr ? *options_.random : RealRandom()),
      backoff_(options_.backoff, random_) {}

Reflector::~Reflector() {
  Stop();
}

void Reflector::Start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { Run(); });
}

void Reflector::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (current_ != nullptr) current_->Cancel();
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

std::string Reflector::resource_version() const {
  std::lock_guard lock(mu_);
  return resource_version_;
}

bool Reflector::Stopping() {
  std::lock_guard lock(mu_);
  return stopping_;
}

void Reflector::Wait(std::chrono::milliseconds delay) {
  if (options_.wait) {
    options_.wait(delay);
    return;
  }
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, delay, [this] { return stopping_; });
}

int Reflector::NextWatchTimeoutSeconds() {
  auto low = options_.min_watch_timeout.count();
  auto high = std::max(options_.max_watch_timeout.count(), low);
  return static_cast<int>(
      low + static_cast<long long>(random_.Uniform() * static_cast<double>(high - low + 1)));
}

Status Reflector::RunWatch(WatchStream& stream, SteadyTime started, bool& healthy) {
  healthy = false;
  while (true) {
    Result<std::optional<WatchEvent>> next = stream.Next(std::chrono::seconds(60));
    if (!next.ok()) {
      if (clock_.Now() - started >= options_.healthy_watch) healthy = true;
      return next.status();
    }
    if (!next->has_value()) continue;
    WatchEvent& event = **next;
    healthy = true;
    std::string version = event.object.contains("metadata")
                              ? event.object["metadata"].value("resourceVersion", "")
                              : std::string();
    if (!version.empty()) {
      std::lock_guard lock(mu_);
      resource_version_ = version;
    }
    switch (event.type) {
      case WatchEventType::kAdded:
      case WatchEventType::kModified: handler_.OnUpsert(std::move(event.object)); break;
      case WatchEventType::kDeleted: handler_.OnDelete(std::move(event.object)); break;
      case WatchEventType::kBookmark:
        if (!version.empty()) handler_.OnCheckpoint(version, true);
        break;
      case WatchEventType::kError: break;
    }
  }
}

Result<ObjectList> Reflector::ListAll() {
  handler_.OnListStart();
  ObjectList all;
  ListProgress progress;
  ListOptions list_options = options_.list;
  // From the watch cache (see the header), unless the last try there failed.
  const bool from_cache = !cache_list_failed_;
  if (from_cache) {
    const std::string seen = resource_version();
    list_options.resource_version = seen.empty() ? "0" : seen;
  }
  list_options.progress = &progress;
  list_options.on_page = [&](std::vector<Json>& items) {
    handler_.OnListPage(items);
    for (Json& item : items) all.items.push_back(std::move(item));
    items.clear();
  };
  while (true) {
    Result<ObjectList> rest = client_.List(collection_, list_options);
    if (rest.ok()) {
      cache_list_failed_ = false;
      all.resource_version =
          progress.resource_version.empty() ? rest->resource_version : progress.resource_version;
      return all;
    }
    if (from_cache) cache_list_failed_ = true;
    if (Stopping()) return rest.status();
    // The first page failed (nothing to resume) or the token expired (410): start over.
    if (progress.next_continue.empty() || rest.status().code() == Code::kGone) return rest.status();
    log::Warn("reflector list page failed, resuming the list at that page",
              {{"collection", collection_.Describe()},
               {"pages_read", std::to_string(progress.pages)},
               {"error", rest.status().ToString()}});
    page_retries_.fetch_add(1);
    Wait(backoff_.Next());
    if (Stopping()) return Status(Code::kCancelled, "reflector stopping");
    list_options.continue_token = progress.next_continue;
  }
}

void Reflector::Run() {
  const std::string what = collection_.Describe();
  bool need_list = true;
  bool after_list = false;
  while (!Stopping()) {
    if (need_list) {
      Result<ObjectList> list = ListAll();
      if (Stopping()) break;
      if (!list.ok()) {
        log::Warn("reflector list failed",
                  {{"collection", what}, {"error", list.status().ToString()}});
        Wait(backoff_.Next());
        continue;
      }
      if (lists_.fetch_add(1) > 0) relists_.fetch_add(1);
      {
        std::lock_guard lock(mu_);
        resource_version_ = list->resource_version;
      }
      handler_.OnReplace(std::move(list->items));
      handler_.OnSynced();
      handler_.OnCheckpoint(list->resource_version, false);
      need_list = false;
      after_list = true;
    }

    WatchOptions watch_options;
    watch_options.resource_version = resource_version();
    watch_options.allow_bookmarks = true;
    watch_options.timeout_seconds = NextWatchTimeoutSeconds();
    watch_options.label_selector = options_.list.label_selector;
    watch_options.metadata_only = options_.list.metadata_only;
    if (!after_list) watch_restarts_.fetch_add(1);
    after_list = false;
    SteadyTime started = clock_.Now();
    Result<std::unique_ptr<WatchStream>> opened = client_.Watch(collection_, watch_options);
    if (!opened.ok()) {
      log::Warn("reflector watch failed",
                {{"collection", what}, {"error", opened.status().ToString()}});
      need_list = opened.status().code() == Code::kGone;
      if (need_list) handler_.OnStale();
      Wait(backoff_.Next());
      continue;
    }
    std::unique_ptr<WatchStream> stream = std::move(opened).value();
    {
      std::lock_guard lock(mu_);
      if (stopping_) break;
      current_ = stream.get();
    }
    bool healthy = false;
    Status end = RunWatch(*stream, started, healthy);
    {
      std::lock_guard lock(mu_);
      current_ = nullptr;
    }
    stream.reset();
    if (Stopping()) break;
    need_list = end.code() == Code::kGone;
    if (need_list) handler_.OnStale();
    if (end.code() != Code::kUnavailable && end.code() != Code::kGone) {
      log::Warn("reflector watch ended", {{"collection", what}, {"error", end.ToString()}});
    }
    if (healthy) {
      backoff_.Reset();
    } else {
      Wait(backoff_.Next());
    }
  }
}

}  // namespace syncbus::kube
