// Tests for CurlTransport against real loopback servers: http::Server for plain HTTP (and HTTPS),
// `openssl s_server` (started per test with a throw-away CA) for the TLS options, and an HTTP/2
// server in Python (tests/tools/h2_list_server.py) for what HTTP/2 did to list pages.
#include "common/http/curl_transport.h"

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/http/server.h"
#include "tests/support/child_process.h"
#include "tests/support/wait.h"

namespace syncbus::http {
namespace {

using namespace std::chrono_literals;
constexpr auto kDeadline = 30s;

std::unique_ptr<CurlTransport> NewTransport(CurlTransport::Options options = {}) {
  Result<std::unique_ptr<CurlTransport>> transport = CurlTransport::Create(options);
  REQUIRE(transport.ok());
  return std::move(transport).value();
}

std::unique_ptr<Server> StartServer(Handler handler) {
  Result<std::unique_ptr<Server>> server = Server::Start({}, std::move(handler));
  REQUIRE(server.ok());
  return std::move(server).value();
}

Request Get(const std::string& url) {
  Request request;
  request.url = url;
  return request;
}

std::string Url(const Server& server, const std::string& path) {
  return "http://127.0.0.1:" + std::to_string(server.port()) + path;
}

// A port nothing listens on (bound, then released).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// Counts callbacks and waits for a number of them.
class Completions {
 public:
  void Add(Result<Response> result) {
    std::lock_guard lock(mu_);
    if (result.ok()) {
      statuses_.push_back(result->status);
    } else {
      codes_.push_back(result.status().code());
    }
    cv_.notify_all();
  }
  Transport::DoneCallback Callback() {
    return [this](Result<Response> r) { Add(std::move(r)); };
  }
  bool Await(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kDeadline, [&] { return statuses_.size() + codes_.size() >= n; });
  }
  std::vector<int> statuses() {
    std::lock_guard lock(mu_);
    return statuses_;
  }
  std::vector<Code> codes() {
    std::lock_guard lock(mu_);
    return codes_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> statuses_;
  std::vector<Code> codes_;
};

TEST_CASE("curl transport: request and response round trip") {
  std::mutex mu;
  ServerRequest seen;
  auto server =
      StartServer([&](const ServerRequest& request, std::shared_ptr<ResponseWriter> writer) {
        {
          std::lock_guard lock(mu);
          seen = request;
        }
        writer->Respond(201, {{"Content-Type", "application/json"}, {"X-Test", "yes"}},
                        "{\"ok\":true}");
      });
  auto transport = NewTransport();
  Request request;
  request.method = "PATCH";
  request.url = Url(*server, "/apis/x?fieldManager=m");
  request.headers = {{"Content-Type", "application/merge-patch+json"},
                     {"Authorization", "Bearer t"}};
  request.body = "{\"a\":1}";
  Result<Response> response = transport->Call(request);
  REQUIRE(response.ok());
  CHECK(response->status == 201);
  CHECK(response->body == "{\"ok\":true}");
  CHECK(FindHeader(response->headers, "x-test") == "yes");
  std::lock_guard lock(mu);
  CHECK(seen.method == "PATCH");
  CHECK(seen.path == "/apis/x");
  CHECK(seen.QueryParam("fieldManager") == "m");
  CHECK(seen.body == "{\"a\":1}");
  CHECK(FindHeader(seen.headers, "Content-Type") == "application/merge-patch+json");
  CHECK(FindHeader(seen.headers, "Authorization") == "Bearer t");
  CHECK_FALSE(FindHeader(seen.headers, "Expect").has_value());
}

TEST_CASE("curl transport: PUT, DELETE with body, and an error status are responses") {
  auto server =
      StartServer([](const ServerRequest& request, std::shared_ptr<ResponseWriter> writer) {
        writer->Respond(request.method == "DELETE" ? 404 : 200, {},
                        request.method + ":" + request.body);
      });
  auto transport = NewTransport();
  Request put = Get(Url(*server, "/x"));
  put.method = "PUT";
  put.body = std::string(200000, 'p');  // large enough that curl would otherwise ask Expect: 100
  Result<Response> put_response = transport->Call(put);
  REQUIRE(put_response.ok());
  CHECK(put_response->body == "PUT:" + put.body);
  Request del = Get(Url(*server, "/x"));
  del.method = "DELETE";
  del.body = "{}";
  Result<Response> del_response = transport->Call(del);
  REQUIRE(del_response.ok());
  CHECK(del_response->status == 404);
  CHECK(del_response->body == "DELETE:{}");
}

TEST_CASE("curl transport: sequential requests reuse one kept-alive connection") {
  auto server = StartServer([](const ServerRequest&, std::shared_ptr<ResponseWriter> writer) {
    writer->Respond(200, {}, "ok");
  });
  auto transport = NewTransport();
  for (int i = 0; i < 20; ++i) {
    Result<Response> response = transport->Call(Get(Url(*server, "/r")));
    REQUIRE(response.ok());
    CHECK(response->status == 200);
  }
  CurlTransport::Stats stats = transport->stats();
  CHECK(stats.connections == 1);
  CHECK(stats.completed == 20);
  CHECK(stats.in_flight == 0);
}

// Sends `urls` one after the other and returns the connections the transport opened.
uint64_t ConnectionsFor(CurlTransport& transport, const std::vector<std::string>& urls) {
  for (const std::string& url : urls) {
    Result<Response> response = transport.Call(Get(url));
    REQUIRE(response.ok());
    REQUIRE(response->status == 200);
  }
  return transport.stats().connections;
}

TEST_CASE(
    "curl transport: each origin has its own pool, closed when idle too long or over budget") {
  auto ok = [](const ServerRequest&, std::shared_ptr<ResponseWriter> writer) {
    writer->Respond(200, {}, "ok");
  };
  auto a = StartServer(ok);
  auto b = StartServer(ok);
  const std::string url_a = Url(*a, "/a"), url_b = Url(*b, "/b");

  SUBCASE("defaults: both origins keep their connection") {
    auto transport = NewTransport();
    CHECK(ConnectionsFor(*transport, {url_a, url_b, url_a, url_b}) == 2);
  }
  SUBCASE("an idle timeout of zero closes a pool as soon as its last request ends") {
    CurlTransport::Options options;
    options.idle_pool_timeout = 0ms;
    auto transport = NewTransport(options);
    CHECK(ConnectionsFor(*transport, {url_a, url_a, url_a}) == 3);
  }
  SUBCASE("over the idle connection budget the least recently used pool is closed") {
    CurlTransport::Options options;
    options.max_idle_connections = 1;
    auto transport = NewTransport(options);
    // b's release puts two idle connections over the budget of one: a's pool is closed, b's kept.
    CHECK(ConnectionsFor(*transport, {url_a, url_b, url_b}) == 2);
    CHECK(ConnectionsFor(*transport, {url_a}) == 3);
  }
  SUBCASE("a budget that holds both keeps both") {
    CurlTransport::Options options;
    options.max_idle_connections = 2;
    auto transport = NewTransport(options);
    CHECK(ConnectionsFor(*transport, {url_a, url_b, url_a, url_b}) == 2);
  }
}

// A server that answers each request after `delay` and tracks how many wait at once.
struct DeferringServer {
  std::atomic<int> waiting{0};
  std::atomic<int> peak{0};
  std::unique_ptr<Server> server;

  explicit DeferringServer(std::chrono::milliseconds delay) {
    server = StartServer(
        [this, delay](const ServerRequest& request, std::shared_ptr<ResponseWriter> writer) {
          int now = waiting.fetch_add(1) + 1;
          int seen = peak.load();
          while (now > seen && !peak.compare_exchange_weak(seen, now)) {
          }
          server->RunAfter(delay, [this, writer, path = request.path] {
            waiting.fetch_sub(1);
            writer->Respond(200, {}, path);
          });
        });
  }
};

TEST_CASE(
    "curl transport: 2,000 concurrent requests on one loop thread all complete [concurrent]") {
  DeferringServer deferring(300ms);
  CurlTransport::Options options;
  options.max_host_connections = 0;  // HTTP/1.1: one connection per concurrent request
  auto transport = NewTransport(options);
  constexpr int kRequests = 2000;
  std::mutex mu;
  std::condition_variable cv;
  int ok = 0, failed = 0;
  std::vector<std::string> errors;
  for (int i = 0; i < kRequests; ++i) {
    std::string path = "/r/" + std::to_string(i);
    transport->Send(Get(Url(*deferring.server, path)), [&, path](Result<Response> r) {
      std::lock_guard lock(mu);
      if (r.ok() && r->status == 200 && r->body == path) {
        ++ok;
      } else {
        ++failed;
        if (errors.size() < 5)
          errors.push_back(r.ok() ? std::to_string(r->status) : r.status().ToString());
      }
      cv.notify_all();
    });
  }
  std::unique_lock lock(mu);
  REQUIRE(cv.wait_for(lock, 120s, [&] { return ok + failed == kRequests; }));
  for (const std::string& e : errors) MESSAGE(e);
  CHECK(ok == kRequests);
  // Answers were deferred, so requests overlapped at the server instead of running one by one.
  MESSAGE("peak concurrent requests at the server: " << deferring.peak.load());
  CHECK(deferring.peak.load() >= 500);
  CHECK(transport->stats().in_flight == 0);
}

TEST_CASE(
    "curl transport: max_host_connections caps connections, queued requests still complete "
    "[concurrent]") {
  DeferringServer deferring(20ms);
  CurlTransport::Options options;
  options.max_host_connections = 8;
  auto transport = NewTransport(options);
  Completions done;
  for (int i = 0; i < 200; ++i) transport->Send(Get(Url(*deferring.server, "/q")), done.Callback());
  REQUIRE(done.Await(200));
  CHECK(done.statuses() == std::vector<int>(200, 200));
  CHECK(deferring.peak.load() <= 8);
  CHECK(transport->stats().connections <= 8);
}

TEST_CASE(
    "curl transport: a send guard that says no keeps the request off the wire, on a new or a "
    "kept-alive connection") {
  std::atomic<int> served{0};
  auto server = StartServer([&](const ServerRequest&, std::shared_ptr<ResponseWriter> writer) {
    ++served;
    writer->Respond(200, {}, "ok");
  });
  auto transport = NewTransport();
  std::atomic<bool> holds{false};
  std::atomic<int> asked{0};
  auto guarded = [&] {
    Request request = Get(Url(*server, "/x"));
    request.method = "PUT";
    request.body = "{}";
    request.send_guard = [&] {
      ++asked;
      return holds.load() ? Status::Ok()
                          : Status(Code::kConflict, "the lease was not renewed in time");
    };
    return request;
  };
  // A new connection: refused after connecting, before anything is sent.
  Result<Response> refused = transport->Call(guarded());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == Code::kConflict);
  CHECK(refused.status().message().find("not sent: PUT " + Url(*server, "/x")) !=
        std::string::npos);
  CHECK(refused.status().message().find("the lease was not renewed in time") != std::string::npos);
  CHECK(served.load() == 0);
  // Allowed: sent. Then refused again on the kept-alive connection.
  holds = true;
  Result<Response> sent = transport->Call(guarded());
  REQUIRE(sent.ok());
  CHECK(sent->status == 200);
  CHECK(served.load() == 1);
  holds = false;
  refused = transport->Call(guarded());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == Code::kConflict);
  CHECK(served.load() == 1);
  CHECK(asked.load() == 3);
  // The transport still works for requests without a guard.
  Result<Response> plain = transport->Call(Get(Url(*server, "/y")));
  REQUIRE(plain.ok());
  CHECK(served.load() == 2);
}

TEST_CASE("curl transport: timeout and connection refused") {
  auto server = StartServer([](const ServerRequest&, std::shared_ptr<ResponseWriter>) {
    // Never answers: the writer is dropped and the request stays pending.
  });
  auto transport = NewTransport();
  Request slow = Get(Url(*server, "/slow"));
  slow.timeout = 100ms;
  Result<Response> timed_out = transport->Call(slow);
  CHECK(timed_out.status().code() == Code::kTimeout);
  CHECK(timed_out.status().message().find("/slow") != std::string::npos);

  Result<Response> refused =
      transport->Call(Get("http://127.0.0.1:" + std::to_string(FreePort()) + "/"));
  CHECK(refused.status().code() == Code::kUnavailable);
  CHECK(refused.status().message().find("127.0.0.1") != std::string::npos);
}

TEST_CASE("curl transport: a connection dropped mid-request is kUnavailable") {
  auto server = StartServer(
      [](const ServerRequest&, std::shared_ptr<ResponseWriter> writer) { writer->Abort(); });
  auto transport = NewTransport();
  Result<Response> response = transport->Call(Get(Url(*server, "/abort")));
  CHECK(response.status().code() == Code::kUnavailable);
}

TEST_CASE("curl transport: connect_address connects there, the URL's host and port kept for Host") {
  std::mutex mu;
  ServerRequest seen;
  auto server =
      StartServer([&](const ServerRequest& request, std::shared_ptr<ResponseWriter> writer) {
        {
          std::lock_guard lock(mu);
          seen = request;
        }
        writer->Respond(200, {}, "ok");
      });
  auto transport = NewTransport();
  const std::string port = std::to_string(server->port());
  // Hive's apiServerIPOverride: the server's name does not resolve, its IP is given.
  Request request = Get("http://api.cluster.invalid:" + port + "/x");
  request.connect_address = "127.0.0.1";
  Result<Response> response = transport->Call(request);
  REQUIRE_MESSAGE(response.ok(), response.status().ToString());
  std::lock_guard lock(mu);
  CHECK(seen.path == "/x");
  CHECK(FindHeader(seen.headers, "Host") == "api.cluster.invalid:" + port);
}

TEST_CASE("curl transport: malformed URL is kInvalidArgument") {
  auto transport = NewTransport();
  Result<Response> response = transport->Call(Get("notascheme://x"));
  CHECK(response.status().code() == Code::kInvalidArgument);
}

// Records a stream's callbacks.
struct StreamLog {
  std::mutex mu;
  std::condition_variable cv;
  int status = 0;
  std::string data;
  std::optional<Status> done;
  int done_calls = 0;

  Transport::StreamCallbacks Callbacks() {
    Transport::StreamCallbacks callbacks;
    callbacks.on_headers = [this](int s, const Headers&) {
      std::lock_guard lock(mu);
      status = s;
      cv.notify_all();
    };
    callbacks.on_data = [this](std::string_view chunk) {
      std::lock_guard lock(mu);
      data.append(chunk);
      cv.notify_all();
    };
    callbacks.on_done = [this](Status s) {
      std::lock_guard lock(mu);
      done = std::move(s);
      ++done_calls;
      cv.notify_all();
    };
    return callbacks;
  }
  bool AwaitData(const std::string& expected) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, kDeadline, [&] { return data == expected; });
  }
  bool AwaitDone() {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, kDeadline, [&] { return done.has_value(); });
  }
};

TEST_CASE("curl transport: a stream delivers headers, chunks and a clean end") {
  auto server = StartServer([](const ServerRequest&, std::shared_ptr<ResponseWriter> writer) {
    writer->StartStream(200, {{"Content-Type", "application/json"}});
    writer->WriteChunk("{\"a\":");
    writer->WriteChunk("1}\n");
    writer->EndStream();
  });
  auto transport = NewTransport();
  StreamLog log;
  Request request = Get(Url(*server, "/watch"));
  request.timeout = 0ms;
  auto handle = transport->Stream(request, log.Callbacks());
  REQUIRE(log.AwaitDone());
  std::lock_guard lock(log.mu);
  CHECK(log.status == 200);
  CHECK(log.data == "{\"a\":1}\n");
  CHECK(log.done->ok());
}

TEST_CASE("curl transport: cancelling a stream from another thread [concurrent]") {
  std::atomic<bool> client_closed{false};
  auto server = StartServer([&](const ServerRequest&, std::shared_ptr<ResponseWriter> writer) {
    writer->OnClientClose([&] { client_closed = true; });
    writer->StartStream(200, {});
    writer->WriteChunk("first\n");
  });
  auto transport = NewTransport();
  StreamLog log;
  Request request = Get(Url(*server, "/watch"));
  request.timeout = 0ms;
  std::unique_ptr<StreamHandle> handle = transport->Stream(request, log.Callbacks());
  REQUIRE(log.AwaitData("first\n"));
  std::thread canceller([&] { handle->Cancel(); });
  canceller.join();
  {
    // Cancel() returned only after on_done ran.
    std::lock_guard lock(log.mu);
    REQUIRE(log.done.has_value());
    CHECK(log.done->code() == Code::kCancelled);
  }
  handle->Cancel();
  handle.reset();
  CHECK(log.done_calls == 1);
  CHECK(transport->stats().in_flight == 0);
}

TEST_CASE("curl transport: cancelling a stream from its own callback [concurrent]") {
  auto server = StartServer([](const ServerRequest&, std::shared_ptr<ResponseWriter> writer) {
    writer->StartStream(200, {});
    writer->WriteChunk("x");
  });
  auto transport = NewTransport();
  StreamLog log;
  std::unique_ptr<StreamHandle> handle;
  std::mutex handle_mu;
  Transport::StreamCallbacks callbacks = log.Callbacks();
  auto record = callbacks.on_data;
  callbacks.on_data = [&, record](std::string_view chunk) {
    record(chunk);
    std::lock_guard lock(handle_mu);
    handle->Cancel();  // on the loop thread: requests the cancellation, does not wait
  };
  {
    std::lock_guard lock(handle_mu);
    Request request = Get(Url(*server, "/watch"));
    request.timeout = 0ms;
    handle = transport->Stream(request, std::move(callbacks));
  }
  REQUIRE(log.AwaitDone());
  std::lock_guard lock(log.mu);
  CHECK(log.done->code() == Code::kCancelled);
}

TEST_CASE("curl transport: cancel racing completion runs on_done exactly once [concurrent]") {
  auto server = StartServer([](const ServerRequest&, std::shared_ptr<ResponseWriter> writer) {
    writer->StartStream(200, {});
    writer->WriteChunk("x");
    writer->EndStream();
  });
  auto transport = NewTransport();
  for (int i = 0; i < 50; ++i) {
    StreamLog log;
    auto handle = transport->Stream(Get(Url(*server, "/w")), log.Callbacks());
    if (i % 2 == 0) log.AwaitData("x");
    handle->Cancel();
    handle.reset();
    std::lock_guard lock(log.mu);
    CHECK(log.done_calls == 1);
  }
}

TEST_CASE("curl transport: destruction cancels requests and streams in flight [concurrent]") {
  std::atomic<int> received{0};
  auto server = StartServer([&](const ServerRequest&, std::shared_ptr<ResponseWriter> writer) {
    if (received.fetch_add(1) == 0) {
      writer->StartStream(200, {});
      writer->WriteChunk("open\n");
    }
    // Plain requests stay unanswered.
  });
  Completions done;
  StreamLog log;
  std::unique_ptr<StreamHandle> handle;
  {
    auto transport = NewTransport();
    Request watch = Get(Url(*server, "/watch"));
    watch.timeout = 0ms;
    handle = transport->Stream(watch, log.Callbacks());
    REQUIRE(log.AwaitData("open\n"));
    for (int i = 0; i < 10; ++i) transport->Send(Get(Url(*server, "/pending")), done.Callback());
  }
  CHECK(done.codes() == std::vector<Code>(10, Code::kCancelled));
  {
    std::lock_guard lock(log.mu);
    REQUIRE(log.done.has_value());
    CHECK(log.done->code() == Code::kCancelled);
  }
  handle.reset();  // outliving the transport is fine
  CHECK(log.done_calls == 1);
}

TEST_CASE("curl transport: construction raises the open-file soft limit to the hard limit") {
  rlimit before{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &before) == 0);
  rlimit lowered = before;
  lowered.rlim_cur = std::min<rlim_t>(before.rlim_max, 256);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &lowered) == 0);
  auto transport = NewTransport();
  rlimit after{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &after) == 0);
  CHECK(after.rlim_cur == before.rlim_max);
}

// --- TLS against `openssl s_server -www` -------------------------------------------------------

namespace fs = std::filesystem;

bool Run(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A throw-away CA with a server certificate for DNS:kube.test and IP:127.0.0.1, and a client
// certificate.
class Pki {
 public:
  Pki() {
    std::string pattern = (fs::temp_directory_path() / "curl-tls-XXXXXX").string();
    dir_ = mkdtemp(pattern.data());
    const std::string d = dir_;
    ok_ = Run("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=test-ca -keyout " + d +
              "/ca.key -out " + d + "/ca.crt") &&
          Issue("server", "/CN=kube.test", "subjectAltName=DNS:kube.test,IP:127.0.0.1") &&
          Issue("client", "/CN=syncbus", "extendedKeyUsage=clientAuth");
  }
  ~Pki() { fs::remove_all(dir_); }
  bool ok() const { return ok_; }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  bool Issue(const std::string& name, const std::string& subject, const std::string& extension) {
    const std::string d = dir_;
    std::ofstream(d + "/" + name + ".ext") << extension << "\n";
    return Run("openssl req -newkey rsa:2048 -nodes -subj " + subject + " -keyout " + d + "/" +
               name + ".key -out " + d + "/" + name + ".csr") &&
           Run("openssl x509 -req -days 1 -in " + d + "/" + name + ".csr -CA " + d +
               "/ca.crt -CAkey " + d + "/ca.key -CAcreateserial -extfile " + d + "/" + name +
               ".ext -out " + d + "/" + name + ".crt");
  }
  std::string dir_;
  bool ok_ = false;
};

// `openssl s_server -www` on a free loopback port; stopped (SIGTERM) on destruction.
class TlsServer {
 public:
  TlsServer(const Pki& pki, bool require_client_cert) : port_(FreePort()) {
    int out[2];
    REQUIRE(pipe(out) == 0);
    std::vector<std::string> args = {"openssl", "s_server",
                                     "-accept", "127.0.0.1:" + std::to_string(port_),
                                     "-cert",   pki.Path("server.crt"),
                                     "-key",    pki.Path("server.key"),
                                     "-www"};
    if (require_client_cert) {
      for (std::string a : {"-Verify", "1", "-CAfile"}) args.push_back(a);
      args.push_back(pki.Path("ca.crt"));
    }
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      int null = open("/dev/null", O_WRONLY);
      dup2(null, STDERR_FILENO);
      close(out[0]);
      close(out[1]);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp("openssl", argv.data());
      _exit(127);
    }
    close(out[1]);
    // "ACCEPT" on stdout means it listens; the reader then keeps the pipe drained.
    std::promise<bool> ready;
    std::future<bool> is_ready = ready.get_future();
    reader_ = std::thread([fd = out[0], ready = std::move(ready)]() mutable {
      std::string seen;
      char buffer[4096];
      bool told = false;
      ssize_t n;
      while ((n = read(fd, buffer, sizeof(buffer))) > 0) {
        if (!told) {
          seen.append(buffer, static_cast<size_t>(n));
          if (seen.find("ACCEPT") != std::string::npos) {
            ready.set_value(true);
            told = true;
          }
        }
      }
      if (!told) ready.set_value(false);
      close(fd);
    });
    REQUIRE(is_ready.wait_for(kDeadline) == std::future_status::ready);
    REQUIRE(is_ready.get());
  }
  ~TlsServer() {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    reader_.join();
  }
  std::string Url(const std::string& host = "127.0.0.1") const {
    return "https://" + host + ":" + std::to_string(port_) + "/";
  }

 private:
  int port_;
  pid_t pid_ = -1;
  std::thread reader_;
};

Result<Response> TlsGet(Transport& transport, const std::string& url, TlsOptions tls) {
  Request request = Get(url);
  request.tls = std::make_shared<TlsOptions>(std::move(tls));
  return transport.Call(request);
}

TEST_CASE("curl transport TLS: CA file or PEM, system store, insecure") {
  Pki pki;
  REQUIRE(pki.ok());
  TlsServer server(pki, false);
  auto transport = NewTransport();

  TlsOptions ca_file;
  ca_file.ca_file = pki.Path("ca.crt");
  Result<Response> by_file = TlsGet(*transport, server.Url(), ca_file);
  REQUIRE(by_file.ok());
  CHECK(by_file->status == 200);

  TlsOptions ca_pem;
  ca_pem.ca_pem = ReadAll(pki.Path("ca.crt"));
  Result<Response> by_pem = TlsGet(*transport, server.Url(), ca_pem);
  REQUIRE(by_pem.ok());
  CHECK(by_pem->status == 200);

  Result<Response> untrusted = TlsGet(*transport, server.Url(), TlsOptions{});
  CHECK(untrusted.status().code() == Code::kUnauthorized);

  TlsOptions insecure;
  insecure.insecure_skip_verify = true;
  Result<Response> skipped = TlsGet(*transport, server.Url(), insecure);
  REQUIRE(skipped.ok());
  CHECK(skipped->status == 200);

  TlsOptions missing_ca;
  missing_ca.ca_file = pki.Path("absent.crt");
  CHECK(TlsGet(*transport, server.Url(), missing_ca).status().code() == Code::kInvalidArgument);
}

TEST_CASE("curl transport TLS: server name override for verification") {
  Pki pki;
  REQUIRE(pki.ok());
  TlsServer server(pki, false);
  auto transport = NewTransport();
  TlsOptions tls;
  tls.ca_file = pki.Path("ca.crt");
  // "localhost" is not in the certificate.
  CHECK(TlsGet(*transport, server.Url("localhost"), tls).status().code() == Code::kUnauthorized);
  tls.server_name = "kube.test";
  Result<Response> response = TlsGet(*transport, server.Url("localhost"), tls);
  REQUIRE(response.ok());
  CHECK(response->status == 200);
}

TEST_CASE("curl transport TLS: client certificates from files and from memory") {
  Pki pki;
  REQUIRE(pki.ok());
  TlsServer server(pki, true);
  auto transport = NewTransport();
  TlsOptions tls;
  tls.ca_file = pki.Path("ca.crt");
  Result<Response> anonymous = TlsGet(*transport, server.Url(), tls);
  CHECK_FALSE(anonymous.ok());

  TlsOptions files = tls;
  files.client_cert_file = pki.Path("client.crt");
  files.client_key_file = pki.Path("client.key");
  Result<Response> by_files = TlsGet(*transport, server.Url(), files);
  REQUIRE(by_files.ok());
  CHECK(by_files->status == 200);

  TlsOptions blobs = tls;
  blobs.client_cert_pem = ReadAll(pki.Path("client.crt"));
  blobs.client_key_pem = ReadAll(pki.Path("client.key"));
  Result<Response> by_blobs = TlsGet(*transport, server.Url(), blobs);
  REQUIRE(by_blobs.ok());
  CHECK(by_blobs->status == 200);
}

TEST_CASE(
    "curl transport TLS: http::Server over HTTPS: reuse, concurrency and streams [concurrent]") {
  Pki pki;
  REQUIRE(pki.ok());
  Server::Options options;
  options.tls_cert_file = pki.Path("server.crt");
  options.tls_key_file = pki.Path("server.key");
  std::unique_ptr<Server> server;
  Result<std::unique_ptr<Server>> started = Server::Start(
      options, [&server](const ServerRequest& request, std::shared_ptr<ResponseWriter> writer) {
        if (request.path == "/watch") {
          writer->StartStream(200, {});
          writer->WriteChunk("a\n");
          writer->WriteChunk("b\n");
          writer->EndStream();
          return;
        }
        server->RunAfter(10ms, [writer, path = request.path] { writer->Respond(200, {}, path); });
      });
  REQUIRE(started.ok());
  server = std::move(started).value();
  std::string base = "https://127.0.0.1:" + std::to_string(server->port());
  auto tls = std::make_shared<TlsOptions>();
  tls->ca_pem = ReadAll(pki.Path("ca.crt"));

  // HTTP/2 is preferred, the server speaks HTTP/1.1: requests still share kept-alive connections.
  CurlTransport::Options transport_options;
  transport_options.max_host_connections = 4;
  auto transport = NewTransport(transport_options);
  for (int i = 0; i < 5; ++i) {
    Request request = Get(base + "/seq");
    request.tls = tls;
    Result<Response> response = transport->Call(request);
    REQUIRE(response.ok());
    CHECK(response->body == "/seq");
  }
  CHECK(transport->stats().connections == 1);

  Completions done;
  for (int i = 0; i < 200; ++i) {
    Request request = Get(base + "/burst");
    request.tls = tls;
    transport->Send(request, done.Callback());
  }
  REQUIRE(done.Await(200));
  CHECK(done.statuses() == std::vector<int>(200, 200));
  CHECK(transport->stats().connections <= 4);

  StreamLog log;
  Request watch = Get(base + "/watch");
  watch.tls = tls;
  watch.timeout = 0ms;
  auto handle = transport->Stream(watch, log.Callbacks());
  REQUIRE(log.AwaitDone());
  std::lock_guard lock(log.mu);
  CHECK(log.data == "a\nb\n");
  CHECK(log.done->ok());
  server->Stop();
}

// --- An HTTP/2 server (tests/tools/h2_list_server.py)
// ---------------------------------------------

// The test server on a free port; stopped (SIGKILL) on destruction.
class ListServer {
 public:
  explicit ListServer(const Pki& pki) {
    auto child = testing::ChildProcess::Start(
        {"/usr/bin/python3", testing::SourceDir() + "/tests/tools/h2_list_server.py", "--cert",
         pki.Path("server.crt"), "--key", pki.Path("server.key")},
        pki.Path("list-server.log"));
    REQUIRE_MESSAGE(child.ok(), child.status().ToString());
    child_.emplace(std::move(child).value());
    REQUIRE_MESSAGE(
        testing::WaitFor([&] { return child_->Log().find("listening on ") != std::string::npos; },
                         kDeadline),
        child_->Log());
    port_ = std::stoi(child_->Log().substr(child_->Log().find("listening on ") + 13));
  }
  std::string Url(const std::string& path) const {
    return "https://127.0.0.1:" + std::to_string(port_) + path;
  }

 private:
  std::optional<testing::ChildProcess> child_;
  int port_ = 0;
};

// libcurl 7.88 (Debian 12) over HTTP/2: a transfer that reads the connection for its own stream
// also reads other streams' frames into their 16 KiB buffers. When a response's first four 4 KiB
// frames filled its buffer that way, libcurl paused in the middle of the last frame, and once the
// buffer was drained it never went back to that frame: its END_STREAM was handled only when more
// bytes came in on the connection. A list page beside idle watches, as the publisher's reflectors
// have them, then waited for its 30 s timeout (100 pages: 62 held back). Over HTTP/1.1 every
// transfer reads its own connection.
TEST_CASE(
    "curl transport: beside idle watches, a response is delivered as soon as its last frame "
    "arrives, over HTTP/1.1 even where the server offers HTTP/2") {
  Pki pki;
  REQUIRE(pki.ok());
  ListServer server(pki);
  auto tls = std::make_shared<TlsOptions>();
  tls->ca_file = pki.Path("ca.crt");
  auto transport = NewTransport();
  std::vector<std::unique_ptr<StreamHandle>> watches;
  for (int i = 0; i < 6; ++i) {
    Request watch = Get(server.Url("/watch" + std::to_string(i)));
    watch.tls = tls;
    watch.timeout = 0ms;
    watches.push_back(transport->Stream(
        watch, {[](int, const Headers&) {}, [](std::string_view) {}, [](Status) {}}));
  }
  int held_back = 0;
  for (int i = 0; i < 100; ++i) {
    Request page = Get(server.Url("/page" + std::to_string(i)));
    page.tls = tls;
    page.timeout = 5s;
    Result<Response> response = transport->Call(page);
    if (!response.ok()) {
      ++held_back;
      continue;
    }
    CHECK(response->body.size() == 4 * 4096 + 1000);
    CHECK(FindHeader(response->headers, "x-served-over") == "http/1.1");
  }
  CHECK(held_back == 0);
}

}  // namespace
}  // namespace syncbus::http
