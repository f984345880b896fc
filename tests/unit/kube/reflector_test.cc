#include "common/kube/reflector.h"

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tests/fakes/common/fake_clock.h"
#include "tests/fakes/common/fake_random.h"

namespace syncbus::kube {
namespace {

using std::chrono::milliseconds;
constexpr auto kReflectorDeadline = std::chrono::seconds(20);

Json Obj(const std::string& name, const std::string& rv) {
  return {{"metadata", {{"name", name}, {"resourceVersion", rv}}}};
}

// A watch fed by the test. Thread-safe.
class FakeWatch final : public WatchStream {
 public:
  Result<std::optional<WatchEvent>> Next(milliseconds timeout) override {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return !items_.empty() || cancelled_; });
    if (cancelled_) return Status(Code::kCancelled, "cancelled");
    if (items_.empty()) return std::optional<WatchEvent>();
    Result<WatchEvent> item = std::move(items_.front());
    items_.pop_front();
    if (!item.ok()) return item.status();
    return std::optional<WatchEvent>(std::move(item).value());
  }
  void Cancel() override {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    cv_.notify_all();
  }
  void Push(Result<WatchEvent> item) {
    std::lock_guard lock(mu_);
    items_.push_back(std::move(item));
    cv_.notify_all();
  }
  bool cancelled() {
    std::lock_guard lock(mu_);
    return cancelled_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Result<WatchEvent>> items_;
  bool cancelled_ = false;
};

// Hands each watch to the test through a shared FakeWatch that outlives the reflector's stream.
class ForwardingWatch final : public WatchStream {
 public:
  explicit ForwardingWatch(std::shared_ptr<FakeWatch> target) : target_(std::move(target)) {}
  ~ForwardingWatch() override { target_->Cancel(); }  // destroying a watch cancels it
  Result<std::optional<WatchEvent>> Next(milliseconds timeout) override {
    return target_->Next(timeout);
  }
  void Cancel() override { target_->Cancel(); }

 private:
  std::shared_ptr<FakeWatch> target_;
};

// A Client whose lists are scripted and whose watches the test drives.
class FakeClient final : public Client {
 public:
  Result<ObjectList> List(const ObjectRef&, const ListOptions& options) override {
    std::unique_lock lock(mu_);
    list_options_.push_back(options);
    if (!pages_.empty()) return ListPages(options);
    cv_.wait(lock, [&] { return !lists_.empty(); });
    Result<ObjectList> next = std::move(lists_.front());
    lists_.pop_front();
    cv_.notify_all();
    lock.unlock();
    if (next.ok() && options.on_page) options.on_page(next->items);  // one page
    return next;
  }
  Result<std::unique_ptr<WatchStream>> Watch(const ObjectRef&,
                                             const WatchOptions& options) override {
    std::lock_guard lock(mu_);
    watch_options_.push_back(options);
    if (!watch_errors_.empty()) {
      Status error = watch_errors_.front();
      watch_errors_.pop_front();
      cv_.notify_all();
      return error;
    }
    auto watch = std::make_shared<FakeWatch>();
    watches_.push_back(watch);
    cv_.notify_all();
    return std::unique_ptr<WatchStream>(std::make_unique<ForwardingWatch>(watch));
  }

  // Every list from now on is these pages, at resourceVersion `rv`; the continue token that
  // asks for page i is "p<i>".
  void SetPages(std::vector<std::vector<Json>> pages, std::string rv) {
    std::lock_guard lock(mu_);
    pages_ = std::move(pages);
    pages_rv_ = std::move(rv);
  }
  // The next request for page `index` fails with `error`.
  void FailPageOnce(size_t index, Status error) {
    std::lock_guard lock(mu_);
    page_failures_.emplace(index, std::move(error));
  }
  // The resourceVersion each List call asked for ("0": the watch cache, "": etcd).
  std::vector<std::string> list_versions() {
    std::lock_guard lock(mu_);
    std::vector<std::string> versions;
    for (const ListOptions& o : list_options_) versions.push_back(o.resource_version);
    return versions;
  }
  // The continue token each List call started from ("" = the first page).
  std::vector<std::string> list_starts() {
    std::lock_guard lock(mu_);
    std::vector<std::string> starts;
    for (const ListOptions& o : list_options_) starts.push_back(o.continue_token);
    return starts;
  }

  void AddList(Result<ObjectList> list) {
    std::lock_guard lock(mu_);
    lists_.push_back(std::move(list));
    cv_.notify_all();
  }
  void AddWatchError(Status error) {
    std::lock_guard lock(mu_);
    watch_errors_.push_back(std::move(error));
  }
  // Waits for the n-th watch (1-based) to be opened.
  std::shared_ptr<FakeWatch> AwaitWatch(size_t n) {
    std::unique_lock lock(mu_);
    REQUIRE(cv_.wait_for(lock, kReflectorDeadline, [&] { return watches_.size() >= n; }));
    return watches_[n - 1];
  }
  WatchOptions watch_options(size_t n) {
    std::lock_guard lock(mu_);
    return watch_options_.at(n - 1);
  }
  size_t watch_calls() {
    std::lock_guard lock(mu_);
    return watch_options_.size();
  }
  ListOptions list_options(size_t n) {
    std::lock_guard lock(mu_);
    return list_options_.at(n - 1);
  }

  Result<Json> Get(const ObjectRef&) override { return Unimplemented(); }
  Result<Json> Create(const ObjectRef&, const Json&, const WriteOptions& = {}) override {
    return Unimplemented();
  }
  Result<Json> Update(const ObjectRef&, const Json&) override { return Unimplemented(); }
  Result<Json> Apply(const ObjectRef&, const Json&, const ApplyOptions&) override {
    return Unimplemented();
  }
  Result<Json> Patch(const ObjectRef&, PatchType, const std::string&,
                     const WriteOptions& = {}) override {
    return Unimplemented();
  }
  Status Delete(const ObjectRef&, const DeleteOptions&) override { return Unimplemented(); }
  Result<Json> GetPath(const std::string&) override { return Unimplemented(); }

 private:
  static Status Unimplemented() { return Status(Code::kUnsupported, "not used by the reflector"); }
  // Serves pages_ from the page `options` asks for, as ClientImpl::List does. mu_ is held.
  Result<ObjectList> ListPages(const ListOptions& options) {
    size_t index =
        options.continue_token.empty() ? 0 : std::stoul(options.continue_token.substr(1));
    ObjectList list{{}, pages_rv_};
    for (; index < pages_.size(); ++index) {
      if (auto failure = page_failures_.find(index); failure != page_failures_.end()) {
        Status error = failure->second;
        page_failures_.erase(failure);
        return error;
      }
      std::vector<Json> items = pages_[index];
      if (options.on_page) options.on_page(items);
      for (Json& item : items) list.items.push_back(std::move(item));
      if (options.progress != nullptr) {
        options.progress->resource_version = pages_rv_;
        options.progress->next_continue =
            index + 1 < pages_.size() ? "p" + std::to_string(index + 1) : "";
        ++options.progress->pages;
      }
    }
    return list;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Result<ObjectList>> lists_;
  std::deque<Status> watch_errors_;
  std::vector<std::shared_ptr<FakeWatch>> watches_;
  std::vector<WatchOptions> watch_options_;
  std::vector<ListOptions> list_options_;
  std::vector<std::vector<Json>> pages_;
  std::string pages_rv_;
  std::map<size_t, Status> page_failures_;
};

// Records handler calls as strings ("replace:a,b", "upsert:a", "delete:a", "synced").
class RecordingHandler final : public ReflectorHandler {
 public:
  // With take_pages, list starts ("start") and pages ("page:a,b") are recorded and the pages'
  // objects taken.
  explicit RecordingHandler(bool take_pages = false) : take_pages_(take_pages) {}
  void OnListStart() override {
    if (take_pages_) Record("start");
  }
  void OnListPage(std::vector<Json>& items) override {
    if (!take_pages_) return;
    Record("page:" + Names(items));
    items.clear();
  }
  void OnReplace(std::vector<Json> items) override {
    std::string line = "replace:";
    for (size_t i = 0; i < items.size(); ++i) {
      line += (i ? "," : "") + items[i]["metadata"]["name"].get<std::string>();
    }
    Record(line);
  }
  void OnUpsert(Json object) override {
    Record("upsert:" + object["metadata"]["name"].get<std::string>());
  }
  void OnDelete(Json object) override {
    Record("delete:" + object["metadata"]["name"].get<std::string>());
  }
  void OnSynced() override { Record("synced"); }

  // Waits until `n` calls were recorded and returns them.
  std::vector<std::string> Await(size_t n) {
    std::unique_lock lock(mu_);
    REQUIRE(cv_.wait_for(lock, kReflectorDeadline, [&] { return calls_.size() >= n; }));
    return calls_;
  }

 private:
  static std::string Names(const std::vector<Json>& items) {
    std::string names;
    for (size_t i = 0; i < items.size(); ++i)
      names += (i ? "," : "") + items[i]["metadata"]["name"].get<std::string>();
    return names;
  }
  void Record(std::string line) {
    std::lock_guard lock(mu_);
    calls_.push_back(std::move(line));
    cv_.notify_all();
  }
  const bool take_pages_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> calls_;
};

ObjectList ListOf(std::vector<Json> items, std::string rv) {
  return {std::move(items), std::move(rv)};
}

// Backoff waits recorded instead of slept; the fake clock moves by each delay.
struct RecordedWaits {
  std::mutex mu;
  std::vector<long long> delays_ms;
  FakeClock clock;

  std::function<void(milliseconds)> Fn() {
    return [this](milliseconds d) {
      std::lock_guard lock(mu);
      delays_ms.push_back(d.count());
      clock.Advance(d);
    };
  }
  std::vector<long long> Get() {
    std::lock_guard lock(mu);
    return delays_ms;
  }
};

struct Fixture {
  FakeClient client;
  RecordingHandler handler;
  FakeRandom random{0.5};  // no jitter; watch timeout 450 s
  RecordedWaits waits;

  Reflector::Options Options() {
    Reflector::Options options;
    options.list.label_selector = "hive.openshift.io/managed=true";
    options.list.limit = 50;
    options.clock = &waits.clock;
    options.random = &random;
    options.wait = waits.Fn();
    return options;
  }
};

WatchEvent Event(WatchEventType type, Json object) {
  return {type, std::move(object)};
}

TEST_CASE("reflector: list, then watch from the list's resourceVersion [concurrent]") {
  Fixture f;
  f.client.AddList(ListOf({Obj("a", "5"), Obj("b", "7")}, "10"));
  Reflector reflector(f.client, Collection(resources::kClusterDeployments), f.handler, f.Options());
  reflector.Start();
  std::shared_ptr<FakeWatch> watch = f.client.AwaitWatch(1);
  CHECK(f.handler.Await(2) == std::vector<std::string>{"replace:a,b", "synced"});
  WatchOptions opened = f.client.watch_options(1);
  CHECK(opened.resource_version == "10");
  CHECK(opened.allow_bookmarks);
  CHECK(opened.timeout_seconds == 450);
  CHECK(opened.label_selector == "hive.openshift.io/managed=true");
  CHECK(f.client.list_options(1).limit == 50);
  CHECK(f.client.list_options(1).label_selector == "hive.openshift.io/managed=true");

  watch->Push(Event(WatchEventType::kAdded, Obj("c", "11")));
  watch->Push(Event(WatchEventType::kModified, Obj("a", "12")));
  watch->Push(Event(WatchEventType::kDeleted, Obj("b", "13")));
  CHECK(f.handler.Await(5) ==
        std::vector<std::string>{"replace:a,b", "synced", "upsert:c", "upsert:a", "delete:b"});
  reflector.Stop();
  CHECK(reflector.resource_version() == "13");
  CHECK(reflector.lists() == 1);
  CHECK(reflector.relists() == 0);
  CHECK(f.waits.Get().empty());
}

TEST_CASE(
    "reflector: a closed watch resumes from the last seen resourceVersion, bookmarks included "
    "[concurrent]") {
  Fixture f;
  f.client.AddList(ListOf({}, "10"));
  Reflector reflector(f.client, Collection(resources::kSyncSets, "ns"), f.handler, f.Options());
  reflector.Start();
  std::shared_ptr<FakeWatch> first = f.client.AwaitWatch(1);
  first->Push(Event(WatchEventType::kAdded, Obj("a", "11")));
  first->Push(Event(WatchEventType::kBookmark, {{"metadata", {{"resourceVersion", "30"}}}}));
  first->Push(Status(Code::kUnavailable, "watch closed"));
  std::shared_ptr<FakeWatch> second = f.client.AwaitWatch(2);
  CHECK(f.client.watch_options(2).resource_version == "30");
  CHECK(reflector.watch_restarts() == 1);
  CHECK(reflector.lists() == 1);
  second->Push(Event(WatchEventType::kModified, Obj("a", "31")));
  CHECK(f.handler.Await(4).back() == "upsert:a");
  reflector.Stop();
  CHECK(f.waits.Get().empty());  // the first watch was healthy: no backoff
}

TEST_CASE("reflector: 410 from the watch relists and replaces everything [concurrent]") {
  Fixture f;
  f.client.AddList(ListOf({Obj("a", "5")}, "10"));
  f.client.AddList(ListOf({Obj("b", "50")}, "60"));
  Reflector reflector(f.client, Collection(resources::kSyncSets), f.handler, f.Options());
  reflector.Start();
  std::shared_ptr<FakeWatch> first = f.client.AwaitWatch(1);
  first->Push(Event(WatchEventType::kAdded, Obj("c", "11")));
  first->Push(Status(Code::kGone, "too old resource version"));
  f.client.AwaitWatch(2);
  CHECK(f.handler.Await(5) ==
        std::vector<std::string>{"replace:a", "synced", "upsert:c", "replace:b", "synced"});
  CHECK(f.client.watch_options(2).resource_version == "60");
  // Both from the watch cache: the relist no older than what the watch had seen.
  CHECK(f.client.list_versions() == std::vector<std::string>{"0", "11"});
  CHECK(reflector.relists() == 1);
  CHECK(reflector.lists() == 2);
  CHECK(reflector.watch_restarts() == 0);
  reflector.Stop();
}

TEST_CASE(
    "reflector: a list page that fails is asked for again from its continue token, not from "
    "the start [concurrent]") {
  Fixture f;
  f.client.SetPages({{Obj("a", "1")}, {Obj("b", "2")}, {Obj("c", "3")}}, "10");
  f.client.FailPageOnce(1, Status(Code::kTimeout, "page timed out"));
  Reflector reflector(f.client, Collection(resources::kSecrets), f.handler, f.Options());
  reflector.Start();
  f.client.AwaitWatch(1);
  CHECK(f.handler.Await(2) == std::vector<std::string>{"replace:a,b,c", "synced"});
  CHECK(f.client.list_starts() == std::vector<std::string>{"", "p1"});
  CHECK(f.client.watch_options(1).resource_version == "10");
  CHECK(reflector.page_retries() == 1);
  CHECK(reflector.lists() == 1);
  CHECK(reflector.relists() == 0);
  CHECK(f.waits.Get().size() == 1);  // one backoff delay before the page is asked for again
  reflector.Stop();
}

TEST_CASE("reflector: a handler taking pages sees a resumed list begin once [concurrent]") {
  FakeClient client;
  RecordingHandler handler(/*take_pages=*/true);
  Fixture f;
  client.SetPages({{Obj("a", "1")}, {Obj("b", "2")}, {Obj("c", "3")}}, "10");
  client.FailPageOnce(2, Status(Code::kUnavailable, "connection reset"));
  Reflector reflector(client, Collection(resources::kSecrets), handler, f.Options());
  reflector.Start();
  client.AwaitWatch(1);
  CHECK(handler.Await(6) ==
        std::vector<std::string>{"start", "page:a", "page:b", "page:c", "replace:", "synced"});
  CHECK(client.list_starts() == std::vector<std::string>{"", "p2"});
  reflector.Stop();
}

TEST_CASE(
    "reflector: an expired continue token (410) or a failed first page starts the list over "
    "[concurrent]") {
  FakeClient client;
  RecordingHandler handler(/*take_pages=*/true);
  Fixture f;
  client.SetPages({{Obj("a", "1")}, {Obj("b", "2")}}, "10");
  client.FailPageOnce(0, Status(Code::kUnavailable, "connection refused"));
  client.FailPageOnce(1, Status(Code::kGone, "the provided continue parameter is too old"));
  Reflector reflector(client, Collection(resources::kSecrets), handler, f.Options());
  reflector.Start();
  client.AwaitWatch(1);
  CHECK(handler.Await(8) == std::vector<std::string>{"start", "start", "page:a", "start", "page:a",
                                                     "page:b", "replace:", "synced"});
  CHECK(client.list_starts() == std::vector<std::string>{"", "", ""});
  CHECK(reflector.page_retries() == 0);
  CHECK(reflector.lists() == 1);
  reflector.Stop();
}

TEST_CASE("reflector: 410 when opening the watch relists [concurrent]") {
  Fixture f;
  f.client.AddList(ListOf({}, "10"));
  f.client.AddList(ListOf({}, "70"));
  f.client.AddWatchError(Status(Code::kGone, "expired"));
  Reflector reflector(f.client, Collection(resources::kSyncSets), f.handler, f.Options());
  reflector.Start();
  f.client.AwaitWatch(1);  // the second Watch call: the first one failed
  CHECK(f.client.watch_options(2).resource_version == "70");
  CHECK(reflector.relists() == 1);
  reflector.Stop();
}

TEST_CASE(
    "reflector: failures back off 800 ms doubling, reset after a healthy watch [concurrent]") {
  Fixture f;
  for (int i = 0; i < 3; ++i) f.client.AddList(Status(Code::kUnavailable, "connection refused"));
  f.client.AddList(ListOf({}, "10"));
  Reflector reflector(f.client, Collection(resources::kSyncSets), f.handler, f.Options());
  reflector.Start();
  std::shared_ptr<FakeWatch> silent = f.client.AwaitWatch(1);
  CHECK(f.waits.Get() == std::vector<long long>{800, 1600, 3200});
  // After a list from the watch cache failed, etcd is asked until a list succeeds.
  CHECK(f.client.list_versions() == std::vector<std::string>{"0", "", "", ""});
  silent->Push(Status(Code::kUnavailable, "watch closed"));  // no event: not healthy
  std::shared_ptr<FakeWatch> healthy = f.client.AwaitWatch(2);
  CHECK(f.waits.Get() == std::vector<long long>{800, 1600, 3200, 6400});
  healthy->Push(Event(WatchEventType::kBookmark, {{"metadata", {{"resourceVersion", "12"}}}}));
  healthy->Push(Status(Code::kUnavailable, "watch closed"));
  std::shared_ptr<FakeWatch> third = f.client.AwaitWatch(3);
  CHECK(f.waits.Get().size() == 4);  // healthy: immediate rewatch
  third->Push(Status(Code::kUnavailable, "watch closed"));
  f.client.AwaitWatch(4);
  CHECK(f.waits.Get() == std::vector<long long>{800, 1600, 3200, 6400, 800});
  CHECK(reflector.watch_restarts() == 3);
  reflector.Stop();
}

TEST_CASE(
    "reflector: a watch open for the healthy period resets the backoff even without events "
    "[concurrent]") {
  Fixture f;
  f.client.AddList(Status(Code::kUnavailable, "refused"));
  f.client.AddList(ListOf({}, "10"));
  Reflector::Options options = f.Options();
  options.healthy_watch = std::chrono::seconds(30);
  Reflector reflector(f.client, Collection(resources::kSyncSets), f.handler, options);
  reflector.Start();
  std::shared_ptr<FakeWatch> quiet = f.client.AwaitWatch(1);
  f.waits.clock.Advance(std::chrono::seconds(31));
  quiet->Push(Status(Code::kUnavailable, "watch closed"));
  std::shared_ptr<FakeWatch> next = f.client.AwaitWatch(2);
  next->Push(Status(Code::kUnavailable, "watch closed"));
  f.client.AwaitWatch(3);
  CHECK(f.waits.Get() == std::vector<long long>{800, 800});
  reflector.Stop();
}

TEST_CASE("reflector: Stop cancels a blocked watch [concurrent]") {
  Fixture f;
  f.client.AddList(ListOf({}, "10"));
  Reflector reflector(f.client, Collection(resources::kSyncSets), f.handler, f.Options());
  reflector.Start();
  std::shared_ptr<FakeWatch> watch = f.client.AwaitWatch(1);
  reflector.Stop();
  CHECK(watch->cancelled());
  CHECK(f.client.watch_calls() == 1);
  reflector.Stop();  // idempotent
}

TEST_CASE("reflector: Stop cuts a real backoff wait short [concurrent]") {
  Fixture f;
  f.client.AddList(Status(Code::kUnavailable, "refused"));
  Reflector::Options options = f.Options();
  options.wait = nullptr;  // the built-in timed wait
  options.backoff.initial = std::chrono::hours(1);
  options.backoff.max = std::chrono::hours(1);
  Reflector reflector(f.client, Collection(resources::kSyncSets), f.handler, options);
  reflector.Start();
  f.client.AddList(ListOf({}, "1"));  // only consumed if the wait ended early
  auto started = std::chrono::steady_clock::now();
  reflector.Stop();
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::minutes(1));
  CHECK(reflector.lists() == 0);
}

TEST_CASE(
    "reflector: a handler takes the pages of a list as they come, a failed list starts over "
    "[concurrent]") {
  Fixture f;
  RecordingHandler handler(/*take_pages=*/true);
  f.client.AddList(Status(Code::kUnavailable, "hub down"));
  f.client.AddList(ListOf({Obj("a", "5"), Obj("b", "7")}, "10"));
  Reflector reflector(f.client, Collection(resources::kClusterDeployments), handler, f.Options());
  reflector.Start();
  f.client.AwaitWatch(1);
  CHECK(handler.Await(5) ==
        std::vector<std::string>{"start", "start", "page:a,b", "replace:", "synced"});
  reflector.Stop();
}

}  // namespace
}  // namespace syncbus::kube
