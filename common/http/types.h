// Plain HTTP request/response values shared by the client transport, the admin server and the
// Kubernetes simulator. Value types; thread-compatible.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace syncbus::http {

using Headers = std::vector<std::pair<std::string, std::string>>;

// Asked on the transport's thread at the last moment before a request goes out (after any
// connection set-up); a failure keeps the request off the wire and is its result. A writer that
// holds a lease passes its fence, so that what it decided before a pause (SIGSTOP, a long GC-like
// stall, a queue) is not sent after its lease may have passed to another writer.
using SendGuard = std::function<Status()>;

// Returns the first header named `name` (case-insensitive), if any.
std::optional<std::string> FindHeader(const Headers& headers, std::string_view name);

// TLS settings for one peer. Files or in-memory PEM; PEM wins when both are set.
struct TlsOptions {
  std::string ca_file, ca_pem;  // trust anchors; empty = system store
  std::string client_cert_file, client_cert_pem;
  std::string client_key_file, client_key_pem;
  bool insecure_skip_verify = false;
  std::string server_name;  // SNI / verification name override
};

struct Request {
  std::string method = "GET";
  std::string url;  // absolute: https://host:port/prefix/api/v1/...
  Headers headers;
  std::string body;
  std::chrono::milliseconds timeout{30000};  // whole request; 0 = none (watches)
  std::shared_ptr<const TlsOptions> tls;     // null = defaults
  // Proxy URL as libcurl takes it (http://, https://, socks5h://...); empty = libcurl's default,
  // the http_proxy / https_proxy / no_proxy environment.
  std::string proxy;
  // Connect to this address (an IP) instead of resolving the URL's host; the port, the Host
  // header, SNI and certificate verification stay the URL's. Empty = resolve the host.
  std::string connect_address;
  SendGuard send_guard;  // null = always sent
};

struct Response {
  int status = 0;
  Headers headers;
  std::string body;
};

}  // namespace syncbus::http
