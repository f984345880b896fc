// TLS for http::Server: an OpenSSL server context, and per-connection bufferevents that encrypt
// through OpenSSL memory BIOs inside a libevent filter (so libevent_openssl is not needed).
// Internal to server.cc. A ServerTls is immutable after Load and may be shared by the loops.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"

struct bufferevent;
struct event_base;
struct ssl_ctx_st;

namespace syncbus::http {

class ServerTls {
 public:
  // Loads a PEM certificate chain and its private key.
  static Result<std::shared_ptr<ServerTls>> Load(const std::string& cert_file,
                                                 const std::string& key_file);
  ~ServerTls();
  ServerTls(const ServerTls&) = delete;
  ServerTls& operator=(const ServerTls&) = delete;

  // For evhttp_set_bevcb (arg: this ServerTls): a filtering bufferevent, without a socket yet,
  // that speaks TLS as the server side of one connection.
  static bufferevent* NewBufferevent(event_base* base, void* arg);

 private:
  explicit ServerTls(ssl_ctx_st* ctx) : ctx_(ctx) {}
  ssl_ctx_st* ctx_;
};

}  // namespace syncbus::http
