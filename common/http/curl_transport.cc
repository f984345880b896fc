#include "common/http/curl_transport.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <curl/curl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/http/curl_handles.h"
#include "common/unique_fd.h"

namespace syncbus::http {
namespace {

void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);  // best effort: the old limit still works, only lower
}

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// Shared by a stream's handle and the loop: who asked to cancel, and whether on_done has run.
struct StreamControl {
  std::atomic<bool> cancel_requested{false};
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;

  void MarkFinished() {
    std::lock_guard lock(mu);
    finished = true;
    cv.notify_all();
  }
  void WaitFinished() {
    std::unique_lock lock(mu);
    cv.wait(lock, [this] { return finished; });
  }
};

// The connections (and TLS sessions) of one origin: libcurl searches a connection cache on
// every transfer's start and end, so one cache per origin keeps that work proportional to one
// cluster's connections instead of the whole fleet's. Loop thread only.
struct Pool {
  std::string key;
  CurlShare share;
  size_t active = 0;       // transfers attached to the share
  size_t peak_active = 0;  // an upper bound of its open connections
  std::chrono::steady_clock::time_point idle_since;
  std::list<Pool*>::iterator idle_position;  // in the idle list while active == 0
};

// One request from submission to completion. Owned by the submit queue, then by the loop.
struct Transfer {
  uint64_t id = 0;
  Request request;
  std::string pool_key;  // origin (scheme://host:port) and connect-to route
  Pool* pool = nullptr;  // loop thread only
  CurlEasy easy;
  CurlSlist header_list;
  CurlSlist connect_to;
  char error[CURL_ERROR_SIZE] = {};
  Status setup_error;  // non-OK: completes on the loop without touching the network
  Status refused;      // the request's send guard said no: nothing was sent

  int status = 0;   // from the latest status line
  Headers headers;  // of the final (non-1xx) header block
  bool headers_done = false;
  std::string body;  // Send only

  Transport::DoneCallback done;            // Send
  Transport::StreamCallbacks stream;       // Stream
  std::shared_ptr<StreamControl> control;  // Stream only
};

std::string Trim(std::string_view s) {
  size_t begin = 0, end = s.size();
  while (begin < end && (s[begin] == ' ' || s[begin] == '\t')) ++begin;
  while (end > begin &&
         (s[end - 1] == ' ' || s[end - 1] == '\t' || s[end - 1] == '\r' || s[end - 1] == '\n')) {
    --end;
  }
  return std::string(s.substr(begin, end - begin));
}

size_t OnHeaderLine(char* data, size_t size, size_t count, void* userdata) {
  auto* t = static_cast<Transfer*>(userdata);
  std::string_view line(data, size * count);
  if (t->headers_done) return line.size();  // trailers
  if (line.starts_with("HTTP/")) {
    size_t space = line.find(' ');
    int status = 0;
    if (space != std::string_view::npos && space + 4 <= line.size()) {
      std::from_chars(line.data() + space + 1, line.data() + space + 4, status);
    }
    t->status = status;
    t->headers.clear();
    return line.size();
  }
  if (line == "\r\n" || line == "\n") {
    if (t->status >= 200) {
      t->headers_done = true;
      if (t->control != nullptr && t->stream.on_headers)
        t->stream.on_headers(t->status, t->headers);
    }
    return line.size();
  }
  size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    t->headers.emplace_back(Trim(line.substr(0, colon)), Trim(line.substr(colon + 1)));
  }
  return line.size();
}

size_t OnBody(char* data, size_t size, size_t count, void* userdata) {
  auto* t = static_cast<Transfer*>(userdata);
  size_t n = size * count;
  if (t->control == nullptr) {
    t->body.append(data, n);
    return n;
  }
  if (t->control->cancel_requested.load()) return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  if (t->stream.on_data) t->stream.on_data(std::string_view(data, n));
  return n;
}

// CURLOPT_PREREQFUNCTION: the connection is ready and nothing of the request is sent yet.
int OnReadyToSend(void* userdata, char* /*primary_ip*/, char* /*local_ip*/, int /*primary_port*/,
                  int /*local_port*/) {
  auto* t = static_cast<Transfer*>(userdata);
  t->refused = t->request.send_guard();
  if (t->refused.ok()) return CURL_PREREQFUNC_OK;
  t->refused = t->refused.Annotate("not sent: " + t->request.method + " " + t->request.url);
  return CURL_PREREQFUNC_ABORT;
}

Status MapCurlError(CURLcode code, const Transfer& t) {
  if (code == CURLE_ABORTED_BY_CALLBACK && !t.refused.ok()) return t.refused;
  std::string text = t.error[0] != '\0' ? t.error : curl_easy_strerror(code);
  std::string message = t.request.method + " " + t.request.url + ": " + text;
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT: return Status(Code::kTimeout, std::move(message));
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH: return Status(Code::kUnauthorized, std::move(message));
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CRL_BADFILE: return Status(Code::kInvalidArgument, std::move(message));
    case CURLE_OUT_OF_MEMORY:
    case CURLE_BAD_FUNCTION_ARGUMENT: return Status(Code::kInternal, std::move(message));
    default:
      // Refused, reset, DNS, handshake, partial bodies, HTTP/2 stream errors: all transient.
      return Status(Code::kUnavailable, std::move(message));
  }
}

// Where a transfer connects when that is not simply the URL's host: `server_name` puts that
// name in the URL (SNI and certificate verification) while connecting to the original host and
// keeping the original Host header; `connect_address` connects to that address instead (the
// URL's port kept; the URL's host still names the server for Host, SNI and verification). Both
// may be set.
Status Route(Transfer& t, const std::string& server_name, std::string connect_address) {
  if (!connect_address.empty() && connect_address.find(':') != std::string::npos &&
      connect_address.front() != '[') {
    connect_address = "[" + connect_address + "]";  // IPv6
  }
  std::string route;
  if (server_name.empty()) {
    route = "::" + connect_address + ":";  // any host and port, to this address, same port
  } else {
    CurlUrl url(curl_url());
    if (url == nullptr) return Internal("curl_url: out of memory");
    if (curl_url_set(url.get(), CURLUPART_URL, t.request.url.c_str(), 0) != CURLUE_OK) {
      return InvalidArgument("malformed URL: " + t.request.url);
    }
    char* host = nullptr;
    char* port = nullptr;
    curl_url_get(url.get(), CURLUPART_HOST, &host, 0);
    curl_url_get(url.get(), CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
    std::string original_host = host != nullptr ? host : "";
    std::string original_port = port != nullptr ? port : "";
    curl_free(host);
    curl_free(port);
    curl_url_set(url.get(), CURLUPART_HOST, server_name.c_str(), 0);
    char* rewritten = nullptr;
    if (curl_url_get(url.get(), CURLUPART_URL, &rewritten, 0) != CURLUE_OK) {
      return InvalidArgument("bad tls server name: " + server_name);
    }
    t.request.url = rewritten;
    curl_free(rewritten);
    route = server_name;
    route.append(":").append(original_port).append(":");
    route.append(connect_address.empty() ? original_host : connect_address);
    route.append(":").append(original_port);
    if (!t.header_list.Append("Host: " + original_host + ":" + original_port)) {
      return Internal("curl_slist_append: out of memory");
    }
  }
  t.pool_key.append("|").append(route);
  if (!t.connect_to.Append(route)) return Internal("curl_slist_append: out of memory");
  curl_easy_setopt(t.easy.get(), CURLOPT_CONNECT_TO, t.connect_to.get());
  return Status::Ok();
}

void SetBlob(CURL* easy, CURLoption option, const std::string& pem) {
  curl_blob blob{const_cast<char*>(pem.data()), pem.size(), CURL_BLOB_COPY};
  curl_easy_setopt(easy, option, &blob);
}

Status ConfigureTls(Transfer& t, const TlsOptions& tls) {
  CURL* easy = t.easy.get();
  if (!tls.ca_pem.empty()) {
    SetBlob(easy, CURLOPT_CAINFO_BLOB, tls.ca_pem);
  } else if (!tls.ca_file.empty()) {
    curl_easy_setopt(easy, CURLOPT_CAINFO, tls.ca_file.c_str());
  }
  if (!tls.client_cert_pem.empty()) {
    SetBlob(easy, CURLOPT_SSLCERT_BLOB, tls.client_cert_pem);
    curl_easy_setopt(easy, CURLOPT_SSLCERTTYPE, "PEM");
  } else if (!tls.client_cert_file.empty()) {
    curl_easy_setopt(easy, CURLOPT_SSLCERT, tls.client_cert_file.c_str());
  }
  if (!tls.client_key_pem.empty()) {
    SetBlob(easy, CURLOPT_SSLKEY_BLOB, tls.client_key_pem);
    curl_easy_setopt(easy, CURLOPT_SSLKEYTYPE, "PEM");
  } else if (!tls.client_key_file.empty()) {
    curl_easy_setopt(easy, CURLOPT_SSLKEY, tls.client_key_file.c_str());
  }
  if (tls.insecure_skip_verify) {
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  return Status::Ok();
}

// "https://host:port" of a URL: what a pool is kept for.
std::string OriginOf(const std::string& url) {
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return url;
  size_t authority_end = url.find_first_of("/?#", scheme_end + 3);
  return url.substr(0, authority_end);
}

// Builds the easy handle on the submitting thread (the pool is attached on the loop).
Status Configure(Transfer& t, const CurlTransport::Options& options) {
  t.easy.reset(curl_easy_init());
  if (t.easy == nullptr) return Internal("curl_easy_init failed");
  CURL* easy = t.easy.get();
  curl_easy_setopt(easy, CURLOPT_PRIVATE, &t);
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, t.error);
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &OnHeaderLine);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(t.request.timeout.count()));
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options.connect_timeout.count()));
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPIDLE, static_cast<long>(options.keepalive_idle.count()));
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPINTVL,
                   static_cast<long>(options.keepalive_interval.count()));
  curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");
  if (t.request.send_guard) {
    curl_easy_setopt(easy, CURLOPT_PREREQFUNCTION, &OnReadyToSend);
    curl_easy_setopt(easy, CURLOPT_PREREQDATA, &t);
  }
  curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));

  const std::string& method = t.request.method;
  if (method == "GET") {
    curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
  } else if (method == "HEAD") {
    curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
  } else {
    if (method != "POST") curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method.c_str());
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(t.request.body.size()));
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, t.request.body.data());
  }

  for (const auto& [name, value] : t.request.headers) {
    // "Name;" is curl's spelling of a header with an empty value.
    std::string line = name;
    if (value.empty()) {
      line += ';';
    } else {
      line.append(": ").append(value);
    }
    if (!t.header_list.Append(line)) {
      return Internal("curl_slist_append: out of memory");
    }
  }
  if (!t.header_list.Append("Expect:")) return Internal("curl_slist_append: out of memory");
  if (t.request.tls != nullptr) SYNCBUS_RETURN_IF_ERROR(ConfigureTls(t, *t.request.tls));
  if (!t.request.proxy.empty()) {
    curl_easy_setopt(easy, CURLOPT_PROXY, t.request.proxy.c_str());
    t.pool_key.append("|proxy=").append(t.request.proxy);
  }
  const std::string server_name = t.request.tls != nullptr ? t.request.tls->server_name : "";
  if (!server_name.empty() || !t.request.connect_address.empty()) {
    SYNCBUS_RETURN_IF_ERROR(Route(t, server_name, t.request.connect_address));
  }
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, t.header_list.get());
  curl_easy_setopt(easy, CURLOPT_URL, t.request.url.c_str());
  t.pool_key.insert(0, OriginOf(t.request.url));
  return Status::Ok();
}

// Delivers the outcome of a transfer. Runs on the loop thread (or inline once shut down).
void Deliver(std::unique_ptr<Transfer> t, Status status) {
  if (t->control == nullptr) {
    if (!status.ok()) {
      t->done(std::move(status));
      return;
    }
    Response response;
    response.status = t->status;
    response.headers = std::move(t->headers);
    response.body = std::move(t->body);
    t->done(std::move(response));
    return;
  }
  if (t->control->cancel_requested.load()) status = Status(Code::kCancelled, "stream cancelled");
  if (status.ok() && !t->headers_done && t->stream.on_headers) {
    t->stream.on_headers(t->status, t->headers);
  }
  if (t->stream.on_done) t->stream.on_done(std::move(status));
  t->control->MarkFinished();
}

}  // namespace

class CurlTransport::Loop {
 public:
  static Result<std::shared_ptr<Loop>> Create(const Options& options);
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;
  ~Loop() = default;

  // Any thread. After shutdown began, `t` is failed inline with kCancelled.
  void Submit(std::unique_ptr<Transfer> t);
  void RequestCancel(uint64_t id);
  // Cancels everything, delivers kCancelled, joins the loop thread.
  void Shutdown();
  bool OnLoopThread() const { return std::this_thread::get_id() == loop_id_; }
  uint64_t NextId() { return next_id_.fetch_add(1) + 1; }
  const Options& options() const { return options_; }
  bool stopping() const {
    std::lock_guard lock(mu_);
    return stopping_;
  }
  Stats stats() const {
    return {completed_.load(), connections_.load(), in_flight_.load(), pools_open_.load()};
  }

 private:
  explicit Loop(const Options& options) : options_(options) {}
  void Run();
  void Wake();
  bool DrainCommands();  // false once stopping
  void Start(std::unique_ptr<Transfer> t);
  // Removes `t` from the multi handle, delivers it, and lets go of its pool.
  void Complete(std::unique_ptr<Transfer> t, Status status);
  void Finish(std::unique_ptr<Transfer> t, Status status);
  Pool* AcquirePool(const std::string& key);
  void ReleasePool(Pool* pool);
  // Closes idle pools past the idle timeout or beyond the idle connection budget.
  void CloseIdlePools(std::chrono::steady_clock::time_point now);
  void ClosePool(Pool* pool);
  void ProcessCompletions();
  void SocketAction(curl_socket_t fd, int flags);
  void CancelAll();

  static int OnSocket(CURL* easy, curl_socket_t fd, int what, void* userp, void* socketp);
  static int OnTimer(CURLM* multi, long timeout_ms, void* userp);

  const Options options_;
  CurlMulti multi_;
  UniqueFd epoll_fd_;
  UniqueFd wake_fd_;
  std::thread thread_;
  std::thread::id loop_id_;

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Transfer>> submitted_;  // guarded by mu_
  std::vector<uint64_t> cancels_;                     // guarded by mu_
  bool stopping_ = false;                             // guarded by mu_
  bool wake_pending_ = false;                         // guarded by mu_

  // Loop thread only. Pools are destroyed before the multi handle (declared after it), and after
  // the transfers attached to them (declared before them).
  std::unordered_map<std::string, std::unique_ptr<Pool>> pools_;
  std::list<Pool*> idle_pools_;  // active == 0, least recently used first
  size_t idle_connections_ = 0;  // sum of the idle pools' peak_active
  std::unordered_map<uint64_t, std::unique_ptr<Transfer>> active_;
  std::optional<std::chrono::steady_clock::time_point> timer_deadline_;

  std::atomic<uint64_t> next_id_{0};
  std::atomic<uint64_t> completed_{0};
  std::atomic<uint64_t> connections_{0};
  std::atomic<uint64_t> in_flight_{0};
  std::atomic<uint64_t> pools_open_{0};
};

Result<std::shared_ptr<CurlTransport::Loop>> CurlTransport::Loop::Create(const Options& options) {
  GlobalInit();
  RaiseOpenFileLimit();
  std::shared_ptr<Loop> loop(new Loop(options));
  loop->multi_.reset(curl_multi_init());
  if (loop->multi_ == nullptr) return Internal("curl init failed");
  loop->epoll_fd_ = UniqueFd(epoll_create1(EPOLL_CLOEXEC));
  loop->wake_fd_ = UniqueFd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (loop->epoll_fd_.get() < 0 || loop->wake_fd_.get() < 0) {
    return Internal("epoll/eventfd: " + std::generic_category().message(errno));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = loop->wake_fd_.get();
  if (epoll_ctl(loop->epoll_fd_.get(), EPOLL_CTL_ADD, loop->wake_fd_.get(), &ev) != 0) {
    return Internal("epoll_ctl: " + std::generic_category().message(errno));
  }
  CURLM* multi = loop->multi_.get();
  curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, &Loop::OnSocket);
  curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, loop.get());
  curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, &Loop::OnTimer);
  curl_multi_setopt(multi, CURLMOPT_TIMERDATA, loop.get());
  curl_multi_setopt(multi, CURLMOPT_PIPELINING, CURLPIPE_NOTHING);
  curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, options.max_host_connections);
  {
    // loop_id_ is published to other threads through mu_ (every use follows a Submit).
    std::lock_guard lock(loop->mu_);
    loop->thread_ = std::thread([raw = loop.get()] { raw->Run(); });
    loop->loop_id_ = loop->thread_.get_id();
  }
  return loop;
}

void CurlTransport::Loop::Submit(std::unique_ptr<Transfer> t) {
  in_flight_.fetch_add(1);
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      submitted_.push_back(std::move(t));
      if (!wake_pending_) {
        wake_pending_ = true;
        Wake();
      }
      return;
    }
  }
  Finish(std::move(t), Status(Code::kCancelled, "transport shut down"));
}

void CurlTransport::Loop::RequestCancel(uint64_t id) {
  std::lock_guard lock(mu_);
  if (stopping_) return;
  cancels_.push_back(id);
  if (!wake_pending_) {
    wake_pending_ = true;
    Wake();
  }
}

void CurlTransport::Loop::Wake() {
  uint64_t one = 1;
  // A full eventfd counter still wakes the loop; nothing else can fail here.
  [[maybe_unused]] ssize_t n = write(wake_fd_.get(), &one, sizeof(one));
}

void CurlTransport::Loop::Shutdown() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    Wake();
  }
  thread_.join();
}

int CurlTransport::Loop::OnSocket(CURL*, curl_socket_t fd, int what, void* userp, void* socketp) {
  auto* loop = static_cast<Loop*>(userp);
  int epfd = loop->epoll_fd_.get();
  if (what == CURL_POLL_REMOVE) {
    epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nullptr);  // ENOENT/EBADF: already gone with the socket
    return 0;
  }
  epoll_event ev{};
  ev.events =
      ((what & CURL_POLL_IN) != 0 ? EPOLLIN : 0u) | ((what & CURL_POLL_OUT) != 0 ? EPOLLOUT : 0u);
  ev.data.fd = fd;
  if (socketp == nullptr) {
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0 && errno == EEXIST) {
      epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev);
    }
    curl_multi_assign(loop->multi_.get(), fd, loop);  // marks the socket as registered
  } else if (epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) != 0 && errno == ENOENT) {
    epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
  }
  return 0;
}

int CurlTransport::Loop::OnTimer(CURLM*, long timeout_ms, void* userp) {
  auto* loop = static_cast<Loop*>(userp);
  if (timeout_ms < 0) {
    loop->timer_deadline_.reset();
  } else {
    loop->timer_deadline_ =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  }
  return 0;
}

void CurlTransport::Loop::Run() {
  constexpr int kMaxEvents = 256;
  epoll_event events[kMaxEvents];
  while (true) {
    std::optional<std::chrono::steady_clock::time_point> wake_at = timer_deadline_;
    if (!idle_pools_.empty()) {
      auto expiry = idle_pools_.front()->idle_since + options_.idle_pool_timeout;
      if (!wake_at || expiry < *wake_at) wake_at = expiry;
    }
    int wait_ms = -1;
    if (wake_at) {
      auto left =
          std::chrono::ceil<std::chrono::milliseconds>(*wake_at - std::chrono::steady_clock::now());
      wait_ms = static_cast<int>(std::clamp<long long>(left.count(), 0, 60000));
    }
    int n = epoll_wait(epoll_fd_.get(), events, kMaxEvents, wait_ms);
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == wake_fd_.get()) {
        uint64_t count;
        [[maybe_unused]] ssize_t r = read(fd, &count, sizeof(count));
        continue;
      }
      uint32_t e = events[i].events;
      int flags = 0;
      if ((e & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0) flags |= CURL_CSELECT_IN;
      if ((e & EPOLLOUT) != 0) flags |= CURL_CSELECT_OUT;
      if ((e & EPOLLERR) != 0) flags |= CURL_CSELECT_ERR;
      SocketAction(fd, flags);
    }
    if (timer_deadline_ && std::chrono::steady_clock::now() >= *timer_deadline_) {
      timer_deadline_.reset();
      SocketAction(CURL_SOCKET_TIMEOUT, 0);
    }
    ProcessCompletions();
    if (!DrainCommands()) break;
    ProcessCompletions();
    CloseIdlePools(std::chrono::steady_clock::now());
  }
  CancelAll();
}

void CurlTransport::Loop::SocketAction(curl_socket_t fd, int flags) {
  int running = 0;
  curl_multi_socket_action(multi_.get(), fd, flags, &running);
}

bool CurlTransport::Loop::DrainCommands() {
  std::vector<std::unique_ptr<Transfer>> submitted;
  std::vector<uint64_t> cancels;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    wake_pending_ = false;
    submitted.swap(submitted_);
    cancels.swap(cancels_);
  }
  for (auto& t : submitted) Start(std::move(t));
  for (uint64_t id : cancels) {
    auto it = active_.find(id);
    if (it == active_.end()) continue;  // already finished
    std::unique_ptr<Transfer> t = std::move(it->second);
    active_.erase(it);
    Complete(std::move(t), Status(Code::kCancelled, "stream cancelled"));
  }
  return true;
}

void CurlTransport::Loop::Start(std::unique_ptr<Transfer> t) {
  if (!t->setup_error.ok()) {
    Status error = t->setup_error;
    Finish(std::move(t), std::move(error));
    return;
  }
  if (t->control != nullptr && t->control->cancel_requested.load()) {
    Finish(std::move(t), Status(Code::kCancelled, "stream cancelled"));
    return;
  }
  Pool* pool = AcquirePool(t->pool_key);
  if (pool == nullptr) {
    Finish(std::move(t), Internal("curl_share_init failed"));
    return;
  }
  t->pool = pool;
  curl_easy_setopt(t->easy.get(), CURLOPT_SHARE, pool->share.get());
  CURLMcode rc = curl_multi_add_handle(multi_.get(), t->easy.get());
  if (rc != CURLM_OK) {
    curl_easy_setopt(t->easy.get(), CURLOPT_SHARE, nullptr);
    t->pool = nullptr;
    ReleasePool(pool);
    Finish(std::move(t),
           Internal(std::string("curl_multi_add_handle: ") + curl_multi_strerror(rc)));
    return;
  }
  uint64_t id = t->id;
  active_.emplace(id, std::move(t));
}

void CurlTransport::Loop::ProcessCompletions() {
  int pending = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi_.get(), &pending)) {
    if (msg->msg != CURLMSG_DONE) continue;
    CURL* easy = msg->easy_handle;
    CURLcode code = msg->data.result;
    Transfer* raw = nullptr;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, &raw);
    auto it = active_.find(raw->id);
    std::unique_ptr<Transfer> t = std::move(it->second);
    active_.erase(it);
    long connects = 0;
    curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &connects);
    connections_.fetch_add(static_cast<uint64_t>(connects));
    if (code == CURLE_OK) {
      long status = 0;
      curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
      t->status = static_cast<int>(status);
      Complete(std::move(t), Status::Ok());
    } else {
      Status error = MapCurlError(code, *t);
      Complete(std::move(t), std::move(error));
    }
  }
}

void CurlTransport::Loop::Complete(std::unique_ptr<Transfer> t, Status status) {
  curl_multi_remove_handle(multi_.get(), t->easy.get());
  Pool* pool = t->pool;
  Finish(std::move(t), std::move(status));  // the easy handle (and its hold on the pool) is gone
  ReleasePool(pool);
}

void CurlTransport::Loop::Finish(std::unique_ptr<Transfer> t, Status status) {
  completed_.fetch_add(1);
  in_flight_.fetch_sub(1);
  Deliver(std::move(t), std::move(status));
}

Pool* CurlTransport::Loop::AcquirePool(const std::string& key) {
  auto [it, added] = pools_.try_emplace(key);
  if (added) {
    auto pool = std::make_unique<Pool>();
    pool->key = key;
    pool->share.reset(curl_share_init());
    if (pool->share == nullptr) {
      pools_.erase(it);
      return nullptr;
    }
    curl_share_setopt(pool->share.get(), CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
    curl_share_setopt(pool->share.get(), CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    it->second = std::move(pool);
    pools_open_.store(pools_.size());
  }
  Pool* pool = it->second.get();
  if (pool->active == 0 && !added) {
    idle_pools_.erase(pool->idle_position);
    idle_connections_ -= pool->peak_active;
  }
  ++pool->active;
  pool->peak_active = std::max(pool->peak_active, pool->active);
  return pool;
}

void CurlTransport::Loop::ReleasePool(Pool* pool) {
  if (pool == nullptr || --pool->active > 0) return;
  pool->idle_since = std::chrono::steady_clock::now();
  pool->idle_position = idle_pools_.insert(idle_pools_.end(), pool);
  idle_connections_ += pool->peak_active;
  CloseIdlePools(pool->idle_since);  // before any later request can pick the pool up again
}

void CurlTransport::Loop::CloseIdlePools(std::chrono::steady_clock::time_point now) {
  const auto budget = static_cast<size_t>(std::max(0L, options_.max_idle_connections));
  while (!idle_pools_.empty()) {
    Pool* oldest = idle_pools_.front();
    if (idle_connections_ <= budget && now - oldest->idle_since < options_.idle_pool_timeout) {
      return;
    }
    ClosePool(oldest);
  }
}

void CurlTransport::Loop::ClosePool(Pool* pool) {
  idle_pools_.erase(pool->idle_position);
  idle_connections_ -= pool->peak_active;
  pools_.erase(pool->key);  // curl_share_cleanup closes its connections
  pools_open_.store(pools_.size());
}

void CurlTransport::Loop::CancelAll() {
  std::vector<std::unique_ptr<Transfer>> pending;
  {
    std::lock_guard lock(mu_);
    pending.swap(submitted_);
    cancels_.clear();
  }
  for (auto& t : pending) Finish(std::move(t), Status(Code::kCancelled, "transport shut down"));
  std::vector<std::unique_ptr<Transfer>> started;
  for (auto& [id, t] : active_) started.push_back(std::move(t));
  active_.clear();
  for (auto& t : started) Complete(std::move(t), Status(Code::kCancelled, "transport shut down"));
  while (!idle_pools_.empty()) ClosePool(idle_pools_.front());
}

class CurlTransport::LoopStreamHandle final : public StreamHandle {
 public:
  LoopStreamHandle(std::weak_ptr<Loop> loop, uint64_t id, std::shared_ptr<StreamControl> control)
      : loop_(std::move(loop)), id_(id), control_(std::move(control)) {}
  ~LoopStreamHandle() override { Cancel(); }

  void Cancel() override {
    std::shared_ptr<Loop> loop = loop_.lock();
    if (loop == nullptr) return;  // the transport is gone: every stream has finished
    if (!control_->cancel_requested.exchange(true)) loop->RequestCancel(id_);
    if (!loop->OnLoopThread()) control_->WaitFinished();
  }

 private:
  std::weak_ptr<Loop> loop_;
  uint64_t id_;
  std::shared_ptr<StreamControl> control_;
};

Result<std::unique_ptr<CurlTransport>> CurlTransport::Create(const Options& options) {
  Result<std::shared_ptr<Loop>> loop = Loop::Create(options);
  if (!loop.ok()) return loop.status();
  return std::unique_ptr<CurlTransport>(new CurlTransport(std::move(loop).value()));
}

CurlTransport::CurlTransport(std::shared_ptr<Loop> loop) : loop_(std::move(loop)) {}

CurlTransport::~CurlTransport() {
  loop_->Shutdown();
}

void CurlTransport::Shutdown() {
  loop_->Shutdown();
}

void CurlTransport::Send(Request request, DoneCallback done) {
  auto t = std::make_unique<Transfer>();
  t->id = loop_->NextId();
  t->request = std::move(request);
  t->done = std::move(done);
  t->setup_error = Configure(*t, loop_->options());
  loop_->Submit(std::move(t));
}

std::unique_ptr<StreamHandle> CurlTransport::Stream(Request request, StreamCallbacks callbacks) {
  auto t = std::make_unique<Transfer>();
  uint64_t id = loop_->NextId();
  t->id = id;
  t->request = std::move(request);
  t->stream = std::move(callbacks);
  t->control = std::make_shared<StreamControl>();
  t->setup_error = Configure(*t, loop_->options());
  std::shared_ptr<StreamControl> control = t->control;
  loop_->Submit(std::move(t));
  return std::make_unique<LoopStreamHandle>(loop_, id, std::move(control));
}

Status CurlTransport::Fetch(Request request, const StreamCallbacks& callbacks) {
  if (loop_->stopping()) return Status(Code::kCancelled, "transport shut down");
  Transfer t;
  t.request = std::move(request);
  t.stream = callbacks;
  t.control = std::make_shared<StreamControl>();
  SYNCBUS_RETURN_IF_ERROR(Configure(t, loop_->options()));
  // Shutdown() ends a fetch in progress too: curl asks this about once a second and on progress.
  auto abort_on_shutdown = [](void* loop, curl_off_t, curl_off_t, curl_off_t, curl_off_t) -> int {
    return static_cast<const Loop*>(loop)->stopping() ? 1 : 0;
  };
  curl_xferinfo_callback progress = abort_on_shutdown;
  curl_easy_setopt(t.easy.get(), CURLOPT_XFERINFOFUNCTION, progress);
  curl_easy_setopt(t.easy.get(), CURLOPT_XFERINFODATA, loop_.get());
  curl_easy_setopt(t.easy.get(), CURLOPT_NOPROGRESS, 0L);
  CURLcode code = curl_easy_perform(t.easy.get());
  if (code == CURLE_ABORTED_BY_CALLBACK && t.refused.ok())
    return Status(Code::kCancelled, "transport shut down");
  if (code != CURLE_OK) return MapCurlError(code, t);
  return Status::Ok();
}

CurlTransport::Stats CurlTransport::stats() const {
  return loop_->stats();
}

}  // namespace syncbus::http
