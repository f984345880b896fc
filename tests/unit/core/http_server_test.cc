// Tests for http::Server over real loopback sockets, with a minimal blocking HTTP/1.1 client.
// Test names ending in [concurrent] exercise cross-thread paths (run them under TSan too).
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <curl/curl.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/http/server.h"
#include "tests/support/self_signed_cert.h"

namespace syncbus::http {
namespace {

using namespace std::chrono_literals;

// Safety deadline for waits on events that should happen promptly.
constexpr auto kServerDeadline = 10s;

struct ClientResponse {
  std::string version;  // "HTTP/1.1"
  int status = 0;
  Headers headers;
  std::string body;
  bool chunked = false;
};

// Blocking HTTP/1.1 client over one loopback connection, in plain text or (with `tls`) over TLS
// without checking the server's certificate; every read has kServerDeadline.
class TestClient {
 public:
  explicit TestClient(int port, bool tls = false) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (!connected_ || !tls) return;
    // The handshake reads with a blocking socket: bound it like every other read.
    timeval timeout{static_cast<time_t>(std::chrono::seconds(kServerDeadline).count()), 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    tls_ctx_ = SSL_CTX_new(TLS_client_method());
    // A server may close without close_notify once its answer is complete.
    SSL_CTX_set_options(tls_ctx_, SSL_OP_IGNORE_UNEXPECTED_EOF);
    ssl_ = SSL_new(tls_ctx_);
    SSL_set_fd(ssl_, fd_);
    connected_ = SSL_connect(ssl_) == 1;
  }
  ~TestClient() { Close(); }
  TestClient(const TestClient&) = delete;
  TestClient& operator=(const TestClient&) = delete;

  bool connected() const { return connected_; }
  void Close() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (tls_ctx_ != nullptr) SSL_CTX_free(tls_ctx_);
    ssl_ = nullptr;
    tls_ctx_ = nullptr;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  bool SendRaw(const std::string& data) {
    if (ssl_ != nullptr) {
      return SSL_write(ssl_, data.data(), static_cast<int>(data.size())) ==
             static_cast<int>(data.size());
    }
    size_t sent = 0;
    while (sent < data.size()) {
      ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }
  bool Send(const std::string& method, const std::string& target, const std::string& body = {},
            const std::string& extra_headers = {}) {
    std::string request = method + " " + target + " HTTP/1.1\r\nHost: localhost\r\n" +
                          extra_headers + "Content-Length: " + std::to_string(body.size()) +
                          "\r\n\r\n" + body;
    return SendRaw(request);
  }

  // Status line and headers; nullopt on EOF or timeout.
  std::optional<ClientResponse> ReadHead() {
    std::optional<std::string> head = ReadUntil("\r\n\r\n");
    if (!head) return std::nullopt;
    ClientResponse response;
    size_t line_end = head->find("\r\n");
    std::string status_line = head->substr(0, line_end);
    if (status_line.size() < 12) return std::nullopt;
    response.version = status_line.substr(0, 8);
    response.status = std::stoi(status_line.substr(9, 3));
    size_t pos = line_end + 2;
    while (pos < head->size()) {
      size_t end = std::min(head->find("\r\n", pos), head->size());
      std::string line = head->substr(pos, end - pos);
      pos = end + 2;
      if (line.empty()) break;
      size_t colon = line.find(':');
      std::string value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      response.headers.emplace_back(line.substr(0, colon), value);
      if (line.substr(0, colon) == "Transfer-Encoding" && value == "chunked") {
        response.chunked = true;
      }
    }
    return response;
  }

  // The next chunk of a chunked body ("" for the terminal chunk); nullopt on EOF or timeout.
  std::optional<std::string> ReadChunk() {
    std::optional<std::string> size_line = ReadUntil("\r\n");
    if (!size_line) return std::nullopt;
    size_t size = std::stoul(*size_line, nullptr, 16);
    std::optional<std::string> data = ReadExactly(size + 2);
    if (!data) return std::nullopt;
    return data->substr(0, size);
  }

  std::optional<ClientResponse> ReadResponse() {
    std::optional<ClientResponse> response = ReadHead();
    if (!response) return std::nullopt;
    if (response->chunked) {
      while (true) {
        std::optional<std::string> chunk = ReadChunk();
        if (!chunk) return std::nullopt;
        if (chunk->empty()) break;
        response->body += *chunk;
      }
      return response;
    }
    std::optional<size_t> length;
    for (const auto& [name, value] : response->headers) {
      if (name == "Content-Length") length = std::stoul(value);
    }
    if (!length && response->version == "HTTP/1.0") {
      // The body runs until the server closes the connection.
      while (Fill()) {
      }
      if (!eof_) return std::nullopt;
      length = buffer_.size();
    }
    std::optional<std::string> body = ReadExactly(length.value_or(0));
    if (!body) return std::nullopt;
    response->body = *body;
    return response;
  }

  // True when the server closed the connection (EOF or reset) within the deadline.
  bool WaitForClose() {
    while (true) {
      if (!Fill()) return eof_;
    }
  }

 private:
  // Reads more into buffer_; false on EOF, error or timeout.
  bool Fill() {
    if (eof_) return false;
    if (ssl_ == nullptr || SSL_pending(ssl_) == 0) {
      pollfd pfd{fd_, POLLIN, 0};
      int ready =
          ::poll(&pfd, 1, static_cast<int>(std::chrono::milliseconds(kServerDeadline).count()));
      if (ready <= 0) return false;
    }
    char buf[16384];
    if (ssl_ != nullptr) {
      int n = SSL_read(ssl_, buf, sizeof(buf));
      if (n > 0) {
        buffer_.append(buf, static_cast<size_t>(n));
        return true;
      }
      // A clean EOF (with or without close_notify) or a reset; not a read timeout.
      int error = SSL_get_error(ssl_, n);
      eof_ = error == SSL_ERROR_ZERO_RETURN ||
             (error == SSL_ERROR_SYSCALL && errno != EAGAIN && errno != EWOULDBLOCK);
      ERR_clear_error();
      return false;
    }
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buffer_.append(buf, static_cast<size_t>(n));
    return true;
  }
  std::optional<std::string> ReadUntil(const std::string& delimiter) {
    while (true) {
      size_t pos = buffer_.find(delimiter);
      if (pos != std::string::npos) {
        std::string out = buffer_.substr(0, pos + delimiter.size());
        buffer_.erase(0, pos + delimiter.size());
        return out.substr(0, pos);
      }
      if (!Fill()) return std::nullopt;
    }
  }
  std::optional<std::string> ReadExactly(size_t n) {
    while (buffer_.size() < n) {
      if (!Fill()) return std::nullopt;
    }
    std::string out = buffer_.substr(0, n);
    buffer_.erase(0, n);
    return out;
  }

  int fd_ = -1;
  SSL_CTX* tls_ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  bool connected_ = false;
  bool eof_ = false;
  std::string buffer_;
};

std::string HeaderValue(const Headers& headers, const std::string& name) {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return {};
}

std::unique_ptr<Server> StartHttpServer(Handler handler, Server::Options options = {}) {
  auto server = Server::Start(options, std::move(handler));
  REQUIRE(server.ok());
  return std::move(server).value();
}

// Collects writers handed to a deferring handler; thread-safe.
class WriterBox {
 public:
  void Add(std::shared_ptr<ResponseWriter> writer, ServerRequest request) {
    std::lock_guard lock(mu_);
    writers_.push_back(std::move(writer));
    requests_.push_back(std::move(request));
    cv_.notify_all();
  }
  bool WaitFor(size_t count) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kServerDeadline, [&] { return writers_.size() >= count; });
  }
  std::shared_ptr<ResponseWriter> writer(size_t i) {
    std::lock_guard lock(mu_);
    return writers_.at(i);
  }
  ServerRequest request(size_t i) {
    std::lock_guard lock(mu_);
    return requests_.at(i);
  }
  std::vector<std::shared_ptr<ResponseWriter>> TakeAll() {
    std::lock_guard lock(mu_);
    return std::exchange(writers_, {});
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<ResponseWriter>> writers_;
  std::vector<ServerRequest> requests_;
};

Handler Deferring(WriterBox& box) {
  return [&box](const ServerRequest& request, std::shared_ptr<ResponseWriter> writer) {
    box.Add(std::move(writer), request);
  };
}

TEST_CASE("Server answers with the status and headers and body from the handler") {
  auto server =
      StartHttpServer([](const ServerRequest& request, std::shared_ptr<ResponseWriter> w) {
        if (request.path == "/missing") {
          w->Respond(404, {{"Content-Type", "text/plain"}}, "nope");
          return;
        }
        w->Respond(201, {{"Content-Type", "application/json"}, {"X-Method", request.method}},
                   "{\"path\":\"" + request.path + "\",\"body\":\"" + request.body + "\"}");
      });
  TestClient client(server->port());
  REQUIRE(client.connected());

  REQUIRE(client.Send("POST", "/a/b", "hello"));
  auto response = client.ReadResponse();
  REQUIRE(response);
  CHECK(response->status == 201);
  CHECK(HeaderValue(response->headers, "Content-Type") == "application/json");
  CHECK(HeaderValue(response->headers, "X-Method") == "POST");
  CHECK(response->body == "{\"path\":\"/a/b\",\"body\":\"hello\"}");

  REQUIRE(client.Send("GET", "/missing"));
  response = client.ReadResponse();
  REQUIRE(response);
  CHECK(response->status == 404);
  CHECK(response->body == "nope");
}

TEST_CASE("Server parses the path and query and headers") {
  WriterBox box;
  auto server = StartHttpServer(Deferring(box));
  TestClient client(server->port());
  REQUIRE(client.Send("PATCH", "/api/v1/name%20space?watch=1&labelSelector=a%3Db&x=a+b&flag", "{}",
                      "Content-Type: application/merge-patch+json\r\n"));
  REQUIRE(box.WaitFor(1));
  ServerRequest request = box.request(0);
  CHECK(request.method == "PATCH");
  CHECK(request.path == "/api/v1/name space");
  CHECK(request.query == "watch=1&labelSelector=a%3Db&x=a+b&flag");
  CHECK(request.QueryParam("watch") == std::optional<std::string>("1"));
  CHECK(request.QueryParam("labelSelector") == std::optional<std::string>("a=b"));
  CHECK(request.QueryParam("x") == std::optional<std::string>("a b"));
  CHECK(request.QueryParam("flag") == std::optional<std::string>(""));
  CHECK_FALSE(request.QueryParam("missing").has_value());
  CHECK(HeaderValue(request.headers, "Content-Type") == "application/merge-patch+json");
  CHECK(request.body == "{}");
  box.writer(0)->Respond(200, {}, "ok");
  auto response = client.ReadResponse();
  REQUIRE(response);
  CHECK(response->status == 200);
}

TEST_CASE("Server keeps the connection alive across requests") {
  std::atomic<int> count{0};
  auto server = StartHttpServer([&](const ServerRequest&, std::shared_ptr<ResponseWriter> w) {
    w->Respond(200, {}, std::to_string(++count));
  });
  TestClient client(server->port());
  for (int i = 1; i <= 5; ++i) {
    REQUIRE(client.Send("GET", "/"));
    auto response = client.ReadResponse();
    REQUIRE(response);
    CHECK(response->body == std::to_string(i));
  }
  // Two pipelined requests on the same connection are answered in order.
  REQUIRE(client.SendRaw("GET /x HTTP/1.1\r\nHost: a\r\n\r\nGET /y HTTP/1.1\r\nHost: a\r\n\r\n"));
  auto first = client.ReadResponse();
  auto second = client.ReadResponse();
  REQUIRE(first);
  REQUIRE(second);
  CHECK(first->body == "6");
  CHECK(second->body == "7");
}

TEST_CASE("Server answers 413 to a body over the limit") {
  Server::Options options;
  options.max_body_bytes = 1024;
  std::atomic<int> handled{0};
  auto server = StartHttpServer(
      [&](const ServerRequest&, std::shared_ptr<ResponseWriter> w) {
        ++handled;
        w->Respond(200, {}, "ok");
      },
      options);
  TestClient small(server->port());
  REQUIRE(small.Send("POST", "/", std::string(1024, 'a')));
  auto response = small.ReadResponse();
  REQUIRE(response);
  CHECK(response->status == 200);

  TestClient big(server->port());
  REQUIRE(big.Send("POST", "/", std::string(4096, 'a')));
  response = big.ReadResponse();
  REQUIRE(response);
  CHECK(response->status == 413);
  CHECK(handled == 1);
}

TEST_CASE("Server streams chunks that the client reads one at a time [concurrent]") {
  WriterBox box;
  auto server = StartHttpServer(Deferring(box));
  TestClient client(server->port());
  REQUIRE(client.Send("GET", "/watch"));
  REQUIRE(box.WaitFor(1));
  auto writer = box.writer(0);
  writer->StartStream(200, {{"Content-Type", "application/json"}});
  CHECK(writer->WriteChunk("{\"n\":1}\n"));
  auto head = client.ReadHead();
  REQUIRE(head);
  CHECK(head->status == 200);
  CHECK(head->chunked);
  CHECK(client.ReadChunk() == std::optional<std::string>("{\"n\":1}\n"));
  // The next chunk is written only after the first one was read.
  CHECK(writer->WriteChunk("{\"n\":2}\n"));
  CHECK(client.ReadChunk() == std::optional<std::string>("{\"n\":2}\n"));
  writer->EndStream();
  CHECK(client.ReadChunk() == std::optional<std::string>(""));
  CHECK_FALSE(writer->WriteChunk("late"));

  // The connection is still usable after the stream ended.
  REQUIRE(client.Send("GET", "/next"));
  REQUIRE(box.WaitFor(2));
  box.writer(1)->Respond(204, {}, "");
  auto response = client.ReadResponse();
  REQUIRE(response);
  CHECK(response->status == 204);
}

TEST_CASE("Server keeps chunk order for writes from several threads in turn [concurrent]") {
  WriterBox box;
  auto server = StartHttpServer(Deferring(box));
  TestClient client(server->port());
  REQUIRE(client.Send("GET", "/watch"));
  REQUIRE(box.WaitFor(1));
  auto writer = box.writer(0);
  writer->StartStream(200, {});
  std::mutex order;
  int next = 0;
  auto write_some = [&] {
    for (int i = 0; i < 200; ++i) {
      std::lock_guard lock(order);
      writer->WriteChunk(std::to_string(next++) + "\n");
    }
  };
  std::thread a(write_some), b(write_some);
  a.join();
  b.join();
  writer->EndStream();
  auto response = client.ReadResponse();
  REQUIRE(response);
  std::string expected;
  for (int i = 0; i < 400; ++i) expected += std::to_string(i) + "\n";
  CHECK(response->body == expected);
}

TEST_CASE("Server tells the handler when the client goes away [concurrent]") {
  WriterBox box;
  auto server = StartHttpServer(Deferring(box));
  std::promise<void> closed;
  {
    TestClient client(server->port());
    REQUIRE(client.Send("GET", "/slow"));
    REQUIRE(box.WaitFor(1));
    box.writer(0)->OnClientClose([&] { closed.set_value(); });
  }
  REQUIRE(closed.get_future().wait_for(kServerDeadline) == std::future_status::ready);
  CHECK_FALSE(box.writer(0)->WriteChunk("x"));
  box.writer(0)->Respond(200, {}, "too late");  // a no-op, not a crash

  // A callback registered after the close still runs.
  std::promise<void> late;
  box.writer(0)->OnClientClose([&] { late.set_value(); });
  CHECK(late.get_future().wait_for(kServerDeadline) == std::future_status::ready);

  // The same for a client that leaves in the middle of a stream.
  std::promise<void> stream_closed;
  {
    TestClient client(server->port());
    REQUIRE(client.Send("GET", "/watch"));
    REQUIRE(box.WaitFor(2));
    box.writer(1)->OnClientClose([&] { stream_closed.set_value(); });
    box.writer(1)->StartStream(200, {});
    box.writer(1)->WriteChunk("a");
    REQUIRE(client.ReadHead());
  }
  REQUIRE(stream_closed.get_future().wait_for(kServerDeadline) == std::future_status::ready);
  CHECK_FALSE(box.writer(1)->WriteChunk("x"));
}

TEST_CASE("Server close callbacks do not run after a complete answer") {
  std::atomic<bool> ran{false};
  auto server = StartHttpServer([&](const ServerRequest&, std::shared_ptr<ResponseWriter> w) {
    w->OnClientClose([&] { ran = true; });
    w->Respond(200, {}, "done");
  });
  {
    TestClient client(server->port());
    REQUIRE(client.Send("GET", "/"));
    REQUIRE(client.ReadResponse());
  }
  // Another request on a fresh connection proves the loop went past the first close.
  TestClient client(server->port());
  REQUIRE(client.Send("GET", "/"));
  REQUIRE(client.ReadResponse());
  CHECK_FALSE(ran);
}

TEST_CASE("Server Abort drops the connection without an answer [concurrent]") {
  std::promise<void> aborted;
  auto server =
      StartHttpServer([&](const ServerRequest& request, std::shared_ptr<ResponseWriter> w) {
        if (request.path == "/inline") {
          w->Abort();
          return;
        }
        w->OnClientClose([&] { aborted.set_value(); });
        std::thread([w] { w->Abort(); }).detach();
      });
  TestClient inline_client(server->port());
  REQUIRE(inline_client.Send("GET", "/inline"));
  CHECK_FALSE(inline_client.ReadResponse());
  CHECK(inline_client.WaitForClose());

  TestClient client(server->port());
  REQUIRE(client.Send("GET", "/other-thread"));
  CHECK_FALSE(client.ReadResponse());
  CHECK(client.WaitForClose());
  CHECK(aborted.get_future().wait_for(kServerDeadline) == std::future_status::ready);
}

TEST_CASE("Server RunAfter runs callbacks in deadline order on the loop [concurrent]") {
  auto server = StartHttpServer(
      [](const ServerRequest&, std::shared_ptr<ResponseWriter> w) { w->Respond(200, {}, ""); });
  std::mutex mu;
  std::vector<std::string> order;
  std::promise<void> done;
  auto record = [&](std::string name) {
    return [&, name] {
      std::lock_guard lock(mu);
      order.push_back(name);
      if (order.size() == 4) done.set_value();
    };
  };
  server->RunAfter(60ms, record("c"));
  server->RunAfter(20ms, record("a"));
  server->RunAfter(40ms, record("b"));
  server->RunAfter(0ms, record("now"));
  REQUIRE(done.get_future().wait_for(kServerDeadline) == std::future_status::ready);
  CHECK(order == std::vector<std::string>{"now", "a", "b", "c"});
}

TEST_CASE("Server answers deferred requests from RunAfter on the loop") {
  auto server_holder = std::make_shared<Server*>(nullptr);
  auto server =
      StartHttpServer([server_holder](const ServerRequest&, std::shared_ptr<ResponseWriter> w) {
        (*server_holder)->RunAfter(5ms, [w] { w->Respond(200, {}, "later"); });
      });
  *server_holder = server.get();
  TestClient client(server->port());
  REQUIRE(client.Send("GET", "/"));
  auto response = client.ReadResponse();
  REQUIRE(response);
  CHECK(response->body == "later");
}

TEST_CASE("Server holds 1000 concurrent deferred requests on one loop [concurrent]") {
  constexpr size_t kClients = 1000;
  WriterBox box;
  Server::Options options;
  options.threads = 1;
  auto server = StartHttpServer(Deferring(box), options);
  std::vector<std::unique_ptr<TestClient>> clients;
  for (size_t i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<TestClient>(server->port()));
    REQUIRE(clients.back()->connected());
    REQUIRE(clients.back()->Send("GET", "/slow/" + std::to_string(i)));
  }
  REQUIRE(box.WaitFor(kClients));
  std::vector<std::shared_ptr<ResponseWriter>> writers = box.TakeAll();
  for (size_t i = 0; i < kClients; ++i) {
    ServerRequest request = box.request(i);
    writers[i]->Respond(200, {}, request.path);
  }
  size_t ok = 0;
  for (size_t i = 0; i < kClients; ++i) {
    auto response = clients[i]->ReadResponse();
    if (response && response->body == "/slow/" + std::to_string(i)) ++ok;
  }
  CHECK(ok == kClients);
}

TEST_CASE("Server spreads connections over several loops [concurrent]") {
  Server::Options options;
  options.threads = 2;
  std::mutex mu;
  std::set<std::thread::id> threads;
  auto server = StartHttpServer(
      [&](const ServerRequest&, std::shared_ptr<ResponseWriter> w) {
        {
          std::lock_guard lock(mu);
          threads.insert(std::this_thread::get_id());
        }
        w->Respond(200, {}, "ok");
      },
      options);
  std::vector<std::thread> workers;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        TestClient client(server->port());
        if (client.Send("GET", "/") && client.ReadResponse()) ++ok;
      }
    });
  }
  for (auto& w : workers) w.join();
  CHECK(ok == 200);
  std::lock_guard lock(mu);
  CHECK(threads.size() >= 1);
  CHECK(threads.size() <= 2);
}

TEST_CASE("Server Stop closes open connections and pending requests cleanly [concurrent]") {
  WriterBox box;
  Server::Options options;
  options.threads = 2;
  auto server = StartHttpServer(Deferring(box), options);
  std::atomic<int> closes{0};
  TestClient idle(server->port());
  TestClient pending(server->port());
  TestClient streaming(server->port());
  REQUIRE(idle.connected());
  REQUIRE(pending.Send("GET", "/pending"));
  REQUIRE(streaming.Send("GET", "/watch"));
  REQUIRE(box.WaitFor(2));
  for (size_t i = 0; i < 2; ++i) {
    auto writer = box.writer(i);
    writer->OnClientClose([&] { ++closes; });
    if (box.request(i).path == "/watch") {
      writer->StartStream(200, {});
      writer->WriteChunk("x");
    }
  }
  server->RunAfter(1h, [] { FAIL("a timer ran after Stop"); });
  server->Stop();
  CHECK(closes == 2);
  CHECK(idle.WaitForClose());
  CHECK(pending.WaitForClose());
  CHECK(streaming.WaitForClose());
  // Writers outlive the server harmlessly.
  CHECK_FALSE(box.writer(0)->WriteChunk("x"));
  box.writer(1)->Respond(200, {}, "");
  server->RunAfter(0ms, [] { FAIL("ran after Stop"); });
  server->Stop();
}

TEST_CASE("Server refuses a port that is in use") {
  auto first = StartHttpServer(
      [](const ServerRequest&, std::shared_ptr<ResponseWriter> w) { w->Respond(200, {}, ""); });
  Server::Options options;
  options.port = first->port();
  auto second =
      Server::Start(options, [](const ServerRequest&, std::shared_ptr<ResponseWriter>) {});
  CHECK_FALSE(second.ok());
  CHECK(second.status().code() == Code::kUnavailable);
}

size_t AppendTo(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

TEST_CASE("Server speaks HTTPS with a configured certificate [concurrent]") {
  syncbus::testing::SelfSignedCert cert;
  REQUIRE(cert.ok);
  Server::Options options;
  options.tls_cert_file = cert.cert;
  options.tls_key_file = cert.key;
  WriterBox box;
  auto server = StartHttpServer(
      [&](const ServerRequest& request, std::shared_ptr<ResponseWriter> w) {
        if (request.path == "/stream") {
          box.Add(w, request);
          return;
        }
        w->Respond(200, {{"Content-Type", "text/plain"}}, "secure " + request.body);
      },
      options);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  CURL* curl = curl_easy_init();
  std::string body;
  std::string url = "https://127.0.0.1:" + std::to_string(server->port()) + "/x";
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CAINFO, cert.cert.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "hello");
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, AppendTo);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
  // Two requests on one connection, then a chunked stream answered from another thread.
  for (int i = 0; i < 2; ++i) {
    body.clear();
    REQUIRE(curl_easy_perform(curl) == CURLE_OK);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    CHECK(status == 200);
    CHECK(body == "secure hello");
  }
  long connects = -1;
  curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &connects);
  CHECK(connects == 0);  // the second request reused the TLS connection

  std::thread answer([&] {
    if (!box.WaitFor(1)) return;
    auto w = box.writer(0);
    w->StartStream(200, {});
    for (int i = 0; i < 50; ++i) w->WriteChunk(std::string(1000, static_cast<char>('a' + i % 26)));
    w->EndStream();
  });
  body.clear();
  url = "https://127.0.0.1:" + std::to_string(server->port()) + "/stream";
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  CHECK(curl_easy_perform(curl) == CURLE_OK);
  answer.join();
  CHECK(body.size() == 50000);

  // A client that does not trust the certificate fails the handshake; the server carries on.
  CURL* untrusting = curl_easy_init();
  curl_easy_setopt(untrusting, CURLOPT_URL, url.c_str());
  curl_easy_setopt(untrusting, CURLOPT_TIMEOUT_MS, 10000L);
  CHECK(curl_easy_perform(untrusting) == CURLE_PEER_FAILED_VERIFICATION);
  curl_easy_cleanup(untrusting);

  // Plain HTTP to the TLS port is refused without hurting the server.
  TestClient plain(server->port());
  REQUIRE(plain.Send("GET", "/x"));
  CHECK_FALSE(plain.ReadResponse());
  url = "https://127.0.0.1:" + std::to_string(server->port()) + "/x";
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  body.clear();
  CHECK(curl_easy_perform(curl) == CURLE_OK);
  curl_easy_cleanup(curl);
}

TEST_CASE("Server answers HTTP/1.0 and Connection: close requests in full, then closes") {
  syncbus::testing::SelfSignedCert cert;
  REQUIRE(cert.ok);
  Server::Options options;
  bool tls = false;
  SUBCASE("plain HTTP") {}
  SUBCASE("HTTPS") {
    tls = true;
    options.tls_cert_file = cert.cert;
    options.tls_key_file = cert.key;
  }
  // Larger than the socket buffers: the server needs several writes to send it.
  std::string big;
  for (int i = 0; big.size() < (4 << 20); ++i) big += std::to_string(i) + ",";
  auto server = StartHttpServer(
      [&](const ServerRequest& request, std::shared_ptr<ResponseWriter> w) {
        if (request.path == "/stream") {
          w->StartStream(200, {{"Content-Type", "text/plain"}});
          for (int i = 0; i < 3; ++i) w->WriteChunk("part" + std::to_string(i) + ";");
          w->EndStream();
          return;
        }
        w->Respond(200, {{"Content-Type", "text/plain"}}, request.path == "/big" ? big : "small");
      },
      options);
  const std::vector<std::pair<std::string, std::string>> answers = {
      {"/small", "small"}, {"/big", big}, {"/stream", "part0;part1;part2;"}};
  for (const std::string request_line_end :
       {" HTTP/1.0\r\n", " HTTP/1.1\r\nConnection: close\r\n"}) {
    for (const auto& [path, expected] : answers) {
      CAPTURE(request_line_end);
      CAPTURE(path);
      TestClient client(server->port(), tls);
      REQUIRE(client.connected());
      REQUIRE(client.SendRaw("GET " + path + request_line_end + "Host: localhost\r\n\r\n"));
      std::optional<ClientResponse> response = client.ReadResponse();
      REQUIRE(response);
      CHECK(response->status == 200);
      CHECK(response->body.size() == expected.size());
      CHECK((response->body == expected));
      CHECK(client.WaitForClose());
    }
  }
}

TEST_CASE("Server refuses a TLS key that does not load") {
  Server::Options options;
  options.tls_cert_file = "/nonexistent/cert.pem";
  options.tls_key_file = "/nonexistent/key.pem";
  auto server =
      Server::Start(options, [](const ServerRequest&, std::shared_ptr<ResponseWriter>) {});
  CHECK_FALSE(server.ok());
  CHECK(server.status().code() == Code::kInvalidArgument);
}

}  // namespace
}  // namespace syncbus::http
