// InProcessTransport: one worker thread with a timed task queue. Each request is dispatched by the
// Simulation on the worker and carried out there after its injected delay; watch events reach
// the worker through the task queue, so callbacks keep the real transport's threading.
#include "tests/fakes/common/http/in_process_transport.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "tests/kubesim/sim_watch_sink.h"

namespace syncbus::fakes {
namespace {

using kubesim::Plan;
using SteadyClock = std::chrono::steady_clock;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string DecodePath(std::string_view path) {
  std::string out;
  out.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '%' && i + 2 < path.size() && HexValue(path[i + 1]) >= 0 &&
        HexValue(path[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(path[i + 1]) * 16 + HexValue(path[i + 2])));
      i += 2;
    } else {
      out.push_back(path[i]);
    }
  }
  return out;
}

// "scheme://authority/path?query#fragment" (or just "/path?query") as the server would see it.
Result<http::ServerRequest> ToServerRequest(const http::Request& request) {
  std::string_view target = request.url;
  if (size_t scheme = target.find("://"); scheme != std::string_view::npos) {
    size_t slash = target.find('/', scheme + 3);
    target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
  }
  if (target.empty() || target.front() != '/') {
    return InvalidArgument("in-process transport: unsupported URL " + request.url);
  }
  target = target.substr(0, target.find('#'));
  http::ServerRequest out;
  size_t question = target.find('?');
  out.path = DecodePath(target.substr(0, question));
  if (question != std::string_view::npos) out.query = std::string(target.substr(question + 1));
  out.method = request.method;
  out.headers = request.headers;
  out.body = request.body;
  return out;
}

http::Response ToResponse(kubesim::ApiResponse response) {
  return {response.status, std::move(response.headers), std::move(response.body)};
}

Status DroppedConnection() {
  return Unavailable("connection reset by peer (simulated dropped connection)");
}

}  // namespace

// One request or stream; the worker cancels it at shutdown if it is still open.
class InProcessTransport::Op {
 public:
  virtual ~Op() = default;
  // Worker thread: ends the request with `status` unless it already ended.
  virtual void End(Status status) = 0;

  // The watch behind this op, stopped when the op ends. Thread-safe.
  void SetWatch(kubesim::ApiServer* api, uint64_t id) {
    {
      std::lock_guard lock(watch_mu_);
      api_ = api;
      id_ = id;
    }
    if (ended_.load()) StopWatch();
  }
  void StopWatch() {
    kubesim::ApiServer* api;
    {
      std::lock_guard lock(watch_mu_);
      api = std::exchange(api_, nullptr);
    }
    if (api != nullptr) api->StopWatch(id_);
  }
  bool ended() const { return ended_.load(); }

 protected:
  // True for the one caller that ends the op.
  bool MarkEnded() { return !ended_.exchange(true); }

 private:
  std::atomic<bool> ended_{false};
  std::mutex watch_mu_;
  kubesim::ApiServer* api_ = nullptr;
  uint64_t id_ = 0;
};

// The timed task queue and its thread. Shared (by handles and watch sinks) so that late posts
// after the transport is gone are refused instead of touching freed memory.
class InProcessTransport::Worker {
 public:
  Worker() : thread_([this] { Run(); }) {}
  ~Worker() { Stop(); }

  // Runs `task` on the worker at `when` (FIFO among equal times). False once stopped.
  bool Post(SteadyTime when, std::function<void()> task) {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    tasks_.emplace(std::make_pair(when, next_++), std::move(task));
    cv_.notify_one();
    return true;
  }
  bool PostNow(std::function<void()> task) { return Post(SteadyClock::now(), std::move(task)); }

  // Keeps `op` until it ends; ops still open when the worker stops are cancelled there.
  void Track(std::shared_ptr<Op> op) {
    std::lock_guard lock(mu_);
    if (ops_.size() >= prune_at_) {
      std::erase_if(ops_, [](const std::shared_ptr<Op>& o) { return o->ended(); });
      prune_at_ = std::max<size_t>(1024, ops_.size() * 2);
    }
    ops_.push_back(std::move(op));
  }

  // Any thread but the worker's.
  void Stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<SteadyTime, uint64_t>, std::function<void()>> tasks_;
  uint64_t next_ = 0;
  bool stopping_ = false;
  std::vector<std::shared_ptr<Op>> ops_;
  size_t prune_at_ = 1024;
  std::thread thread_;
};

class InProcessTransport::SendOp final : public Op {
 public:
  explicit SendOp(DoneCallback done) : done_(std::move(done)) {}
  void Finish(Result<http::Response> result) {
    if (!MarkEnded()) return;
    StopWatch();
    DoneCallback done = std::move(done_);
    done(std::move(result));
  }
  void End(Status status) override { Finish(std::move(status)); }
  std::string watch_body;  // worker thread: a watch answered through Send

 private:
  DoneCallback done_;
};

class InProcessTransport::StreamOp final : public Op {
 public:
  StreamOp(StreamCallbacks callbacks, std::shared_ptr<Worker> worker)
      : callbacks_(std::move(callbacks)), worker_(std::move(worker)) {}

  // Worker thread.
  void Headers(int status, const http::Headers& headers) {
    if (!ended() && callbacks_.on_headers) callbacks_.on_headers(status, headers);
  }
  void Data(std::string_view chunk) {
    if (!ended() && !chunk.empty() && callbacks_.on_data) callbacks_.on_data(chunk);
  }
  void End(Status status) override {
    if (!MarkEnded()) return;
    StopWatch();
    Done(std::move(status));
  }

  // Any thread: Cancel() from the handle.
  void RequestCancel(const std::shared_ptr<StreamOp>& self) {
    if (!MarkEnded()) return;
    StopWatch();
    auto done = [self] { self->Done(Status(Code::kCancelled, "stream cancelled")); };
    // Inline only when the worker has already stopped (the transport is going away).
    if (!worker_->PostNow(done)) done();
  }

 private:
  // Worker thread (or the caller's once the worker has stopped), once: runs on_done and lets go
  // of the callbacks.
  void Done(Status status) {
    StreamCallbacks callbacks = std::move(callbacks_);
    callbacks_ = {};
    if (callbacks.on_done) callbacks.on_done(std::move(status));
  }

  StreamCallbacks callbacks_;
  std::shared_ptr<Worker> worker_;
};

class InProcessTransport::Handle final : public http::StreamHandle {
 public:
  explicit Handle(std::shared_ptr<StreamOp> op) : op_(std::move(op)) {}
  ~Handle() override { Cancel(); }
  void Cancel() override { op_->RequestCancel(op_); }

 private:
  std::shared_ptr<StreamOp> op_;
};

void InProcessTransport::Worker::Run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (tasks_.empty()) {
      cv_.wait(lock);
      continue;
    }
    auto first = tasks_.begin();
    if (first->first.first > SteadyClock::now()) {
      cv_.wait_until(lock, first->first.first);
      continue;
    }
    std::function<void()> task = std::move(first->second);
    tasks_.erase(first);
    lock.unlock();
    task();
    lock.lock();
  }
  auto tasks = std::move(tasks_);
  auto ops = std::move(ops_);
  lock.unlock();
  tasks.clear();
  for (const std::shared_ptr<Op>& op : ops)
    op->End(Status(Code::kCancelled, "transport shut down"));
}

InProcessTransport::InProcessTransport(kubesim::Simulation& simulation)
    : simulation_(simulation), worker_(std::make_shared<Worker>()) {}

InProcessTransport::~InProcessTransport() {
  worker_->Stop();
}

void InProcessTransport::Send(http::Request request, DoneCallback done) {
  auto op = std::make_shared<SendOp>(std::move(done));
  worker_->Track(op);
  SteadyTime start = SteadyClock::now();
  if (request.timeout.count() > 0) {
    // The client gives up at its deadline whatever the server is doing (the server may still
    // carry the request out, as a real one would).
    worker_->Post(start + request.timeout, [op] {
      op->Finish(Status(Code::kTimeout, "request timed out (simulated server did not answer)"));
    });
  }
  bool posted = worker_->Post(start, [this, op, request = std::move(request)] {
    if (request.send_guard) {  // as the real transport: at the last moment, on its thread
      if (Status refused = request.send_guard(); !refused.ok()) {
        op->Finish(refused.Annotate("not sent: " + request.method + " " + request.url));
        return;
      }
    }
    auto incoming = ToServerRequest(request);
    if (!incoming.ok()) {
      op->Finish(incoming.status());
      return;
    }
    Plan plan = simulation_.Dispatch(*incoming);
    if (plan.kind == Plan::Kind::kTimeout) return;  // ends at the client's deadline (or shutdown)
    SteadyTime when = SteadyClock::now() + plan.delay;
    worker_->Post(when,
                  [this, op, plan = std::move(plan)]() mutable { Execute(op, std::move(plan)); });
  });
  if (!posted) op->Finish(Status(Code::kCancelled, "transport shut down"));
}

void InProcessTransport::Answer(Plan plan, SteadyTime hold_until,
                                std::function<void(kubesim::ApiResponse)> answer) {
  if (SteadyClock::now() < hold_until && plan.api->MustWait(plan.api_request)) {
    worker_->Post(SteadyClock::now() + kubesim::ApiServer::kFreshnessPoll,
                  [this, plan = std::move(plan), hold_until, answer = std::move(answer)]() mutable {
                    Answer(std::move(plan), hold_until, std::move(answer));
                  });
    return;
  }
  answer(plan.WithHeaders(plan.api->Handle(plan.api_request)));
}

void InProcessTransport::Execute(const std::shared_ptr<SendOp>& op, Plan plan) {
  if (op->ended()) return;
  switch (plan.kind) {
    case Plan::Kind::kRespond:
      op->Finish(ToResponse(plan.WithHeaders(std::move(plan.response))));
      return;
    case Plan::Kind::kApi:
      Answer(std::move(plan), SteadyClock::now() + kubesim::ApiServer::kFreshnessWait,
             [op](kubesim::ApiResponse response) { op->Finish(ToResponse(std::move(response))); });
      return;
    case Plan::Kind::kDrop: op->Finish(DroppedConnection()); return;
    case Plan::Kind::kTimeout: return;
    case Plan::Kind::kWatch: break;
  }
  // A watch answered through Send: the body is every event until the server ends the watch.
  auto sink = std::make_shared<kubesim::PendingWatchSink>();
  auto started = plan.api->StartWatch(plan.api_request, sink);
  if (auto* error = std::get_if<kubesim::ApiResponse>(&started)) {
    sink->Discard();
    op->Finish(ToResponse(plan.WithHeaders(std::move(*error))));
    return;
  }
  op->SetWatch(plan.api, std::get<uint64_t>(started));
  auto finish = [op, headers = plan.StreamHeaders()] {
    op->Finish(http::Response{200, headers, std::move(op->watch_body)});
  };
  std::shared_ptr<Worker> worker = worker_;
  sink->Open({[worker, op](std::string line) {
                return !op->ended() &&
                       worker->PostNow([op, line = std::move(line)] { op->watch_body += line; });
              },
              [worker, finish] { worker->PostNow(finish); }});
  if (plan.watch_timeout) worker_->Post(SteadyClock::now() + *plan.watch_timeout, finish);
}

std::unique_ptr<http::StreamHandle> InProcessTransport::Stream(http::Request request,
                                                               StreamCallbacks callbacks) {
  auto op = std::make_shared<StreamOp>(std::move(callbacks), worker_);
  worker_->Track(op);
  SteadyTime start = SteadyClock::now();
  if (request.timeout.count() > 0) {
    worker_->Post(start + request.timeout, [op] {
      op->End(Status(Code::kTimeout, "request timed out (simulated server did not finish)"));
    });
  }
  bool posted = worker_->Post(start, [this, op, request = std::move(request)] {
    if (op->ended()) return;
    auto incoming = ToServerRequest(request);
    if (!incoming.ok()) {
      op->End(incoming.status());
      return;
    }
    Plan plan = simulation_.Dispatch(*incoming);
    if (plan.kind == Plan::Kind::kTimeout) return;  // ends on Cancel, timeout or shutdown
    SteadyTime when = SteadyClock::now() + plan.delay;
    worker_->Post(when,
                  [this, op, plan = std::move(plan)]() mutable { Execute(op, std::move(plan)); });
  });
  if (!posted) op->End(Status(Code::kCancelled, "transport shut down"));
  return std::make_unique<Handle>(op);
}

void InProcessTransport::Execute(const std::shared_ptr<StreamOp>& op, Plan plan) {
  if (op->ended()) return;
  auto answer = [op](kubesim::ApiResponse response) {
    op->Headers(response.status, response.headers);
    op->Data(response.body);
    op->End(Status::Ok());
  };
  switch (plan.kind) {
    case Plan::Kind::kRespond: answer(plan.WithHeaders(std::move(plan.response))); return;
    case Plan::Kind::kApi:
      Answer(std::move(plan), SteadyClock::now() + kubesim::ApiServer::kFreshnessWait, answer);
      return;
    case Plan::Kind::kDrop: op->End(DroppedConnection()); return;
    case Plan::Kind::kTimeout: return;
    case Plan::Kind::kWatch: break;
  }
  auto sink = std::make_shared<kubesim::PendingWatchSink>();
  auto started = plan.api->StartWatch(plan.api_request, sink);
  if (auto* error = std::get_if<kubesim::ApiResponse>(&started)) {
    sink->Discard();
    answer(plan.WithHeaders(std::move(*error)));
    return;
  }
  op->SetWatch(plan.api, std::get<uint64_t>(started));
  op->Headers(200, plan.StreamHeaders());
  std::shared_ptr<Worker> worker = worker_;
  // Events arrive on whichever thread changed the object; deliver them on the worker, in order.
  sink->Open({[worker, op](std::string line) {
                return !op->ended() &&
                       worker->PostNow([op, line = std::move(line)] { op->Data(line); });
              },
              [worker, op] { worker->PostNow([op] { op->End(Status::Ok()); }); }});
  if (plan.watch_timeout) {
    worker_->Post(SteadyClock::now() + *plan.watch_timeout, [op] { op->End(Status::Ok()); });
  }
}

}  // namespace syncbus::fakes
