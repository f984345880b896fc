// Server on libevent's evhttp: Options::threads event loops, each with its own evhttp and thread,
// accept from one shared listening socket. Every request becomes an Exchange (the ResponseWriter),
// kept alive by its loop until it is answered or its connection goes away.
#include "common/http/server.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/http/server_tls.h"
#include "common/unique_fd.h"

namespace syncbus::http {
namespace {

struct EventBaseFree {
  void operator()(event_base* b) const { event_base_free(b); }
};
struct EventFree {
  void operator()(event* e) const { event_free(e); }
};
struct EvhttpFree {
  void operator()(evhttp* h) const { evhttp_free(h); }
};
struct EvbufferFree {
  void operator()(evbuffer* b) const { evbuffer_free(b); }
};
using EventBasePtr = std::unique_ptr<event_base, EventBaseFree>;
using EventPtr = std::unique_ptr<event, EventFree>;
using EvhttpPtr = std::unique_ptr<evhttp, EvhttpFree>;
using EvbufferPtr = std::unique_ptr<evbuffer, EvbufferFree>;

timeval ToTimeval(std::chrono::microseconds d) {
  if (d.count() < 0) d = std::chrono::microseconds(0);
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000000);
  tv.tv_usec = static_cast<suseconds_t>(d.count() % 1000000);
  return tv;
}

const char* MethodName(evhttp_cmd_type type) {
  switch (type) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    case EVHTTP_REQ_TRACE: return "TRACE";
    case EVHTTP_REQ_CONNECT: return "CONNECT";
    case EVHTTP_REQ_PATCH: return "PATCH";
  }
  return "UNKNOWN";
}

// Work for one loop, posted from any thread. Shared with the loop's Exchanges, which may outlive
// the loop: once closed, posts fail and nothing runs.
class TaskQueue {
 public:
  explicit TaskQueue(event* wake) : wake_(wake) {}

  bool Post(std::function<void()> task) {
    std::lock_guard lock(mu_);
    if (closed_) return false;
    tasks_.push_back(std::move(task));
    if (!wake_pending_) {
      wake_pending_ = true;
      event_active(wake_, EV_READ, 0);
    }
    return true;
  }
  std::deque<std::function<void()>> TakeAll() {
    std::lock_guard lock(mu_);
    wake_pending_ = false;
    return std::exchange(tasks_, {});
  }
  // Refuses further posts and hands back what was queued (to be dropped, not run).
  std::deque<std::function<void()>> Close() {
    std::lock_guard lock(mu_);
    closed_ = true;
    wake_ = nullptr;
    return std::exchange(tasks_, {});
  }
  bool OnLoopThread() const { return current_ == this; }
  static void SetCurrent(const TaskQueue* queue) { current_ = queue; }

 private:
  static thread_local const TaskQueue* current_;
  std::mutex mu_;
  event* wake_;
  bool wake_pending_ = false;
  bool closed_ = false;
  std::deque<std::function<void()>> tasks_;
};

thread_local const TaskQueue* TaskQueue::current_ = nullptr;

class Loop;

// One request and its answer. libevent state (request, connection, close detector) is touched on
// the loop thread only; the public methods queue operations and drain them there, in call order.
class Exchange final : public ResponseWriter, public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(Loop* loop, std::shared_ptr<TaskQueue> queue, evhttp_request* req)
      : loop_(loop),
        queue_(std::move(queue)),
        req_(req),
        evcon_(evhttp_request_get_connection(req)) {}

  // Loop thread: hooks the connection's close callback and a close detector on its socket.
  void Attach(event_base* base);

  void Respond(int status, Headers headers, std::string body) override {
    Enqueue([this, status, h = std::move(headers), b = std::move(body)]() mutable {
      DoRespond(status, h, b);
    });
  }
  void StartStream(int status, Headers headers) override {
    Enqueue([this, status, h = std::move(headers)]() mutable { DoStartStream(status, h); });
  }
  bool WriteChunk(std::string data) override {
    if (over_.load(std::memory_order_acquire)) return false;
    Enqueue([this, d = std::move(data)] { DoChunk(d); });
    return true;
  }
  void EndStream() override {
    Enqueue([this] { DoEnd(); });
  }
  void Abort() override {
    Enqueue([this] { DoAbort(); });
  }
  void OnClientClose(std::function<void()> callback) override {
    std::unique_lock lock(mu_);
    if (!closed_ && !complete_) {
      close_callbacks_.push_back(std::move(callback));
      return;
    }
    bool run = closed_;
    lock.unlock();
    if (run) queue_->Post(std::move(callback));
  }

  // Loop thread, at server stop: the connection is gone without libevent telling us.
  void ForceClose() { Closed(/*request_detached=*/false); }

 private:
  enum class Phase { kPending, kStreaming, kDone, kClosed };

  void Enqueue(std::function<void()> op);
  void Drain();

  void DoRespond(int status, const Headers& headers, const std::string& body);
  void DoStartStream(int status, const Headers& headers);
  void DoChunk(const std::string& data);
  void DoEnd();
  void DoAbort();

  void AddHeaders(const Headers& headers) {
    evkeyvalq* out = evhttp_request_get_output_headers(req_);
    for (const auto& [name, value] : headers) evhttp_add_header(out, name.c_str(), value.c_str());
  }
  // Stops watching the connection before handing the request back to libevent.
  void Detach() {
    evhttp_connection_set_closecb(evcon_, nullptr, nullptr);
    detector_.reset();
  }
  // Pushes what evhttp queued through a TLS filter now: the filter encrypts only when data is
  // added while writing is enabled, and evhttp enables writing after adding. (A plain socket
  // ignores this.) May complete the reply and free the request and connection.
  static void Flush(bufferevent* bev) { bufferevent_flush(bev, EV_WRITE, BEV_FLUSH); }
  void Completed();
  void Closed(bool request_detached);

  static void OnConnectionClose(evhttp_connection* evcon, void* arg);
  static void OnReadable(evutil_socket_t fd, short what, void* arg);

  Loop* const loop_;
  const std::shared_ptr<TaskQueue> queue_;

  // Loop thread only.
  evhttp_request* req_;
  evhttp_connection* evcon_;
  EventPtr detector_;
  Phase phase_ = Phase::kPending;

  std::atomic<bool> over_{false};  // answered or closed: WriteChunk returns false
  std::mutex mu_;
  std::deque<std::function<void()>> ops_;
  bool draining_ = false;
  bool drain_scheduled_ = false;
  bool complete_ = false;
  bool closed_ = false;
  std::vector<std::function<void()>> close_callbacks_;
};

class Loop {
 public:
  Loop(const Server::Options& options, const Handler* handler)
      : options_(options), handler_(handler) {}
  ~Loop() {
    // Join() has run: nothing else touches the loop now.
    http_.reset();
    wake_.reset();
    base_.reset();
  }

  Status Init(int listen_fd, ServerTls* tls) {
    base_.reset(event_base_new());
    if (!base_) return Internal("event_base_new failed");
    wake_.reset(event_new(base_.get(), -1, 0, &Loop::OnWake, this));
    if (!wake_) return Internal("event_new failed");
    queue_ = std::make_shared<TaskQueue>(wake_.get());
    http_.reset(evhttp_new(base_.get()));
    if (!http_) return Internal("evhttp_new failed");
    evhttp_set_allowed_methods(http_.get(), EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                                EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                                EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    evhttp_set_max_body_size(http_.get(), static_cast<ev_ssize_t>(options_.max_body_bytes));
    evhttp_set_max_headers_size(http_.get(), 1 << 20);
    evhttp_set_timeout(http_.get(), static_cast<int>(options_.io_timeout.count()));
    // Reads the rest of an oversized body before closing, so the client sees the 413.
    evhttp_set_flags(http_.get(), EVHTTP_SERVER_LINGERING_CLOSE);
    evhttp_set_gencb(http_.get(), &Loop::OnRequest, this);
    if (tls != nullptr) evhttp_set_bevcb(http_.get(), &ServerTls::NewBufferevent, tls);
    // Backlog 0: the socket is already listening; the listener does not own it.
    evconnlistener* listener =
        evconnlistener_new(base_.get(), nullptr, nullptr, LEV_OPT_CLOSE_ON_EXEC, 0, listen_fd);
    if (listener == nullptr) return Internal("evconnlistener_new failed");
    if (evhttp_bind_listener(http_.get(), listener) == nullptr) {
      evconnlistener_free(listener);
      return Internal("evhttp_bind_listener failed");
    }
    return Status::Ok();
  }

  void Run() {
    thread_ = std::thread([this] {
      TaskQueue::SetCurrent(queue_.get());
      event_base_loop(base_.get(), EVLOOP_NO_EXIT_ON_EMPTY);
      TaskQueue::SetCurrent(nullptr);
    });
  }

  // Any thread but this loop's: tears down on the loop thread, then joins it.
  void Shutdown() {
    if (!thread_.joinable()) return;
    if (!queue_->Post([this] { Teardown(); })) event_base_loopbreak(base_.get());
    thread_.join();
  }

  const std::shared_ptr<TaskQueue>& queue() const { return queue_; }
  event_base* base() const { return base_.get(); }

  // Loop thread.
  void AddTimer(SteadyTime deadline, std::function<void()> fn) {
    auto timer = std::make_unique<Timer>();
    Timer* raw = timer.get();
    raw->loop = this;
    raw->fn = std::move(fn);
    raw->ev.reset(evtimer_new(base_.get(), &Loop::OnTimer, raw));
    if (!raw->ev) return;
    auto remaining = std::chrono::duration_cast<std::chrono::microseconds>(
        deadline - std::chrono::steady_clock::now());
    timeval tv = ToTimeval(remaining);
    evtimer_add(raw->ev.get(), &tv);
    timers_.emplace(raw, std::move(timer));
  }
  void Unregister(Exchange* exchange) { exchanges_.erase(exchange); }

 private:
  struct Timer {
    Loop* loop = nullptr;
    EventPtr ev;
    std::function<void()> fn;
  };

  static void OnWake(evutil_socket_t, short, void* arg) {
    auto* loop = static_cast<Loop*>(arg);
    for (auto& task : loop->queue_->TakeAll()) task();
  }

  static void OnTimer(evutil_socket_t, short, void* arg) {
    auto* timer = static_cast<Timer*>(arg);
    Loop* loop = timer->loop;
    auto it = loop->timers_.find(timer);
    std::unique_ptr<Timer> owned = std::move(it->second);
    loop->timers_.erase(it);
    owned->fn();
  }

  static void OnRequest(evhttp_request* req, void* arg) {
    auto* loop = static_cast<Loop*>(arg);
    ServerRequest request;
    request.method = MethodName(evhttp_request_get_command(req));
    const evhttp_uri* uri = evhttp_request_get_evhttp_uri(req);
    const char* raw_path = uri != nullptr ? evhttp_uri_get_path(uri) : nullptr;
    size_t decoded_size = 0;
    char* decoded = raw_path != nullptr && raw_path[0] == '/'
                        ? evhttp_uridecode(raw_path, 0, &decoded_size)
                        : nullptr;
    if (decoded == nullptr) {
      bufferevent* bev = evhttp_connection_get_bufferevent(evhttp_request_get_connection(req));
      evhttp_send_error(req, HTTP_BADREQUEST, nullptr);
      bufferevent_flush(bev, EV_WRITE, BEV_FLUSH);
      return;
    }
    request.path.assign(decoded, decoded_size);
    free(decoded);  // allocated by libevent with malloc
    if (const char* query = evhttp_uri_get_query(uri); query != nullptr) request.query = query;
    const evkeyvalq* in = evhttp_request_get_input_headers(req);
    for (const evkeyval* h = in->tqh_first; h != nullptr; h = h->next.tqe_next) {
      request.headers.emplace_back(h->key, h->value);
    }
    evbuffer* body = evhttp_request_get_input_buffer(req);
    size_t length = evbuffer_get_length(body);
    request.body.resize(length);
    if (length > 0) evbuffer_remove(body, request.body.data(), length);

    auto exchange = std::make_shared<Exchange>(loop, loop->queue_, req);
    loop->exchanges_.emplace(exchange.get(), exchange);
    exchange->Attach(loop->base_.get());
    (*loop->handler_)(request, std::move(exchange));
  }

  void Teardown() {
    for (auto& task : queue_->Close()) task = nullptr;
    // Frees the listener and every connection; pending exchanges hear of it via close callbacks.
    http_.reset();
    while (!exchanges_.empty()) {
      std::shared_ptr<Exchange> exchange = exchanges_.begin()->second;
      exchange->ForceClose();
      exchanges_.erase(exchange.get());
    }
    timers_.clear();
    event_base_loopbreak(base_.get());
  }

  const Server::Options options_;
  const Handler* const handler_;
  EventBasePtr base_;
  EventPtr wake_;
  EvhttpPtr http_;
  std::shared_ptr<TaskQueue> queue_;
  std::thread thread_;
  std::unordered_map<Exchange*, std::shared_ptr<Exchange>> exchanges_;
  std::unordered_map<Timer*, std::unique_ptr<Timer>> timers_;
};

void Exchange::Attach(event_base* base) {
  evhttp_connection_set_closecb(evcon_, &Exchange::OnConnectionClose, this);
  // evhttp stops reading while a request is being answered, so it would notice a client that
  // hangs up only when a write fails. Watch the socket ourselves meanwhile.
  int fd = bufferevent_getfd(evhttp_connection_get_bufferevent(evcon_));
  if (fd < 0) return;
  detector_.reset(event_new(base, fd, EV_READ, &Exchange::OnReadable, this));
  if (detector_) event_add(detector_.get(), nullptr);
}

void Exchange::Enqueue(std::function<void()> op) {
  auto self = shared_from_this();
  bool schedule = false;
  {
    std::lock_guard lock(mu_);
    ops_.push_back(std::move(op));
    if (!queue_->OnLoopThread() && !drain_scheduled_ && !draining_) {
      drain_scheduled_ = true;
      schedule = true;
    }
  }
  if (queue_->OnLoopThread()) {
    Drain();
  } else if (schedule) {
    queue_->Post([self] { self->Drain(); });
  }
}

void Exchange::Drain() {
  auto self = shared_from_this();
  std::unique_lock lock(mu_);
  drain_scheduled_ = false;
  if (draining_) return;  // a drain further up this thread's stack picks the op up
  draining_ = true;
  while (!ops_.empty()) {
    std::function<void()> op = std::move(ops_.front());
    ops_.pop_front();
    lock.unlock();
    op();
    lock.lock();
  }
  draining_ = false;
}

void Exchange::DoRespond(int status, const Headers& headers, const std::string& body) {
  if (phase_ != Phase::kPending) return;
  AddHeaders(headers);
  EvbufferPtr buf(evbuffer_new());
  if (buf) evbuffer_add(buf.get(), body.data(), body.size());
  Detach();
  bufferevent* bev = evhttp_connection_get_bufferevent(evcon_);
  evhttp_send_reply(req_, status, nullptr, buf.get());
  Flush(bev);
  Completed();
}

void Exchange::DoStartStream(int status, const Headers& headers) {
  if (phase_ != Phase::kPending) return;
  AddHeaders(headers);
  evhttp_send_reply_start(req_, status, nullptr);
  Flush(evhttp_connection_get_bufferevent(evcon_));
  phase_ = Phase::kStreaming;
}

void Exchange::DoChunk(const std::string& data) {
  if (phase_ != Phase::kStreaming || data.empty()) return;
  EvbufferPtr buf(evbuffer_new());
  if (!buf) return;
  evbuffer_add(buf.get(), data.data(), data.size());
  evhttp_send_reply_chunk(req_, buf.get());
  Flush(evhttp_connection_get_bufferevent(evcon_));
}

void Exchange::DoEnd() {
  if (phase_ == Phase::kPending) DoStartStream(200, {});
  if (phase_ != Phase::kStreaming) return;
  Detach();
  bufferevent* bev = evhttp_connection_get_bufferevent(evcon_);
  evhttp_send_reply_end(req_);
  Flush(bev);
  Completed();
}

void Exchange::DoAbort() {
  if (phase_ != Phase::kPending && phase_ != Phase::kStreaming) return;
  // Runs our close callback (Closed) before freeing the request with the connection.
  evhttp_connection_free(evcon_);
}

void Exchange::Completed() {
  req_ = nullptr;
  evcon_ = nullptr;
  phase_ = Phase::kDone;
  over_.store(true, std::memory_order_release);
  std::vector<std::function<void()>> dropped;
  {
    std::lock_guard lock(mu_);
    complete_ = true;
    dropped.swap(close_callbacks_);
  }
  loop_->Unregister(this);
}

void Exchange::Closed(bool request_detached) {
  if (phase_ != Phase::kPending && phase_ != Phase::kStreaming) return;
  auto self = shared_from_this();
  // A request that evhttp detached from its failed connection is ours to free.
  if (request_detached) evhttp_request_free(req_);
  req_ = nullptr;
  evcon_ = nullptr;
  detector_.reset();
  phase_ = Phase::kClosed;
  over_.store(true, std::memory_order_release);
  std::vector<std::function<void()>> callbacks;
  {
    std::lock_guard lock(mu_);
    closed_ = true;
    callbacks.swap(close_callbacks_);
  }
  loop_->Unregister(this);
  for (auto& callback : callbacks) callback();
}

void Exchange::OnConnectionClose(evhttp_connection* evcon, void* arg) {
  auto* exchange = static_cast<Exchange*>(arg);
  evhttp_connection_set_closecb(evcon, nullptr, nullptr);
  bool detached =
      exchange->req_ != nullptr && evhttp_request_get_connection(exchange->req_) == nullptr;
  exchange->Closed(detached);
}

void Exchange::OnReadable(evutil_socket_t fd, short, void* arg) {
  auto* exchange = static_cast<Exchange*>(arg);
  char byte;
  ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return;  // the client sent more (pipelining): evhttp reads it after our answer
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    event_add(exchange->detector_.get(), nullptr);
    return;
  }
  // EOF or a reset: drop the connection now (runs OnConnectionClose).
  evhttp_connection_free(exchange->evcon_);
}

class LibeventServer final : public Server {
 public:
  LibeventServer(Handler handler, UniqueFd listen_fd, int port)
      : handler_(std::move(handler)), listen_fd_(std::move(listen_fd)), port_(port) {}
  ~LibeventServer() override { Stop(); }

  Status Init(const Options& options) {
    if (!options.tls_cert_file.empty() || !options.tls_key_file.empty()) {
      auto tls = ServerTls::Load(options.tls_cert_file, options.tls_key_file);
      if (!tls.ok()) return tls.status();
      tls_ = std::move(*tls);
    }
    int threads = std::max(1, options.threads);
    for (int i = 0; i < threads; ++i) {
      auto loop = std::make_unique<Loop>(options, &handler_);
      SYNCBUS_RETURN_IF_ERROR(loop->Init(listen_fd_.get(), tls_.get()));
      loops_.push_back(std::move(loop));
    }
    for (auto& loop : loops_) loop->Run();
    return Status::Ok();
  }

  int port() const override { return port_; }

  void RunAfter(std::chrono::milliseconds delay, std::function<void()> fn) override {
    Loop* target = loops_.front().get();
    for (auto& loop : loops_) {
      if (loop->queue()->OnLoopThread()) target = loop.get();
    }
    if (delay.count() <= 0) {
      target->queue()->Post(std::move(fn));
      return;
    }
    SteadyTime deadline = std::chrono::steady_clock::now() + delay;
    if (target->queue()->OnLoopThread()) {
      target->AddTimer(deadline, std::move(fn));
    } else {
      target->queue()->Post([target, deadline, fn = std::move(fn)]() mutable {
        target->AddTimer(deadline, std::move(fn));
      });
    }
  }

  void Stop() override {
    std::lock_guard lock(stop_mu_);
    for (auto& loop : loops_) loop->Shutdown();
    listen_fd_.Reset();
  }

 private:
  const Handler handler_;
  std::shared_ptr<ServerTls> tls_;  // null for plain HTTP; outlives the loops
  UniqueFd listen_fd_;
  const int port_;
  std::vector<std::unique_ptr<Loop>> loops_;
  std::mutex stop_mu_;
};

Result<UniqueFd> Listen(const std::string& host, int port, int* bound_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) {
    return InvalidArgument("resolving listen address " + host + ": " + gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, &freeaddrinfo);
  std::string last_error = "no address";
  for (addrinfo* ai = addresses.get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (fd.get() < 0) {
      last_error = std::generic_category().message(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd.get(), 4096) != 0) {
      last_error = std::generic_category().message(errno);
      continue;
    }
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &length) != 0) {
      last_error = std::generic_category().message(errno);
      continue;
    }
    *bound_port = local.ss_family == AF_INET6
                      ? ntohs(reinterpret_cast<sockaddr_in6*>(&local)->sin6_port)
                      : ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port);
    return fd;
  }
  return Unavailable("listening on " + host + ":" + service + ": " + last_error);
}

}  // namespace

Result<std::unique_ptr<Server>> Server::Start(const Options& options, Handler handler) {
  static std::once_flag threads_once;
  std::call_once(threads_once, [] { evthread_use_pthreads(); });
  int bound_port = 0;
  Result<UniqueFd> fd = Listen(options.host, options.port, &bound_port);
  if (!fd.ok()) return fd.status();
  auto server = std::make_unique<LibeventServer>(std::move(handler), std::move(*fd), bound_port);
  Status status = server->Init(options);
  if (!status.ok()) return status;
  return std::unique_ptr<Server>(std::move(server));
}

}  // namespace syncbus::http
