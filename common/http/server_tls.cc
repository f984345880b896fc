// ServerTls: SSL_CTX loading and the memory-BIO filter bufferevent.
#include "common/http/server_tls.h"

#include <algorithm>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

namespace syncbus::http {
namespace {

constexpr size_t kChunk = 16384;

std::string OpenSslError() {
  unsigned long code = ERR_get_error();
  if (code == 0) return "unknown OpenSSL error";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  ERR_clear_error();
  return text;
}

// One connection's TLS state; freed by the filter bufferevent.
struct TlsConnection {
  SSL* ssl = nullptr;
  BIO* network_in = nullptr;   // ciphertext from the peer (owned by ssl)
  BIO* network_out = nullptr;  // ciphertext for the peer (owned by ssl)
  bufferevent* filter = nullptr;
  // The first plaintext byte in the filter's output is already encrypted (see EncryptFilter).
  bool holding = false;

  ~TlsConnection() {
    if (ssl != nullptr) SSL_free(ssl);
  }

  // Moves pending ciphertext into `out`.
  void DrainTo(evbuffer* out) {
    char buf[kChunk];
    while (BIO_ctrl_pending(network_out) > 0) {
      int n = BIO_read(network_out, buf, sizeof(buf));
      if (n <= 0) break;
      evbuffer_add(out, buf, static_cast<size_t>(n));
    }
  }
};

void FreeConnection(void* arg) {
  delete static_cast<TlsConnection*>(arg);
}

// Ciphertext from the socket (src) -> plaintext for evhttp (dst).
bufferevent_filter_result DecryptFilter(evbuffer* src, evbuffer* dst, ev_ssize_t,
                                        bufferevent_flush_mode, void* arg) {
  auto* tls = static_cast<TlsConnection*>(arg);
  char buf[kChunk];
  while (evbuffer_get_length(src) > 0) {
    int n = evbuffer_remove(src, buf, sizeof(buf));
    if (n <= 0) break;
    BIO_write(tls->network_in, buf, n);
  }
  bool produced = false;
  bufferevent_filter_result result = BEV_NEED_MORE;
  while (true) {
    int n = SSL_read(tls->ssl, buf, sizeof(buf));
    if (n > 0) {
      evbuffer_add(dst, buf, static_cast<size_t>(n));
      produced = true;
      continue;
    }
    int error = SSL_get_error(tls->ssl, n);
    if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) {
      ERR_clear_error();
      result = BEV_ERROR;  // a bad handshake, a close_notify, or garbage: the connection ends
    }
    break;
  }
  // Handshake messages (and alerts) go straight to the socket.
  if (BIO_ctrl_pending(tls->network_out) > 0) {
    tls->DrainTo(bufferevent_get_output(bufferevent_get_underlying(tls->filter)));
  }
  if (produced) return BEV_OK;
  return result;
}

// Plaintext from evhttp (src) -> ciphertext for the socket (dst).
// evhttp takes an empty output buffer to mean "the reply is written", and may then close the
// connection at once: freeing the filter frees the socket bufferevent with whatever ciphertext it
// still holds, so a reply to an HTTP/1.0 or "Connection: close" request would never reach the
// client. Hence the last encrypted byte stays in src until dst has drained into the socket (the
// socket bufferevent's write callback runs this filter again): src empties only once the
// ciphertext of everything evhttp wrote has left for the kernel.
bufferevent_filter_result EncryptFilter(evbuffer* src, evbuffer* dst, ev_ssize_t,
                                        bufferevent_flush_mode, void* arg) {
  auto* tls = static_cast<TlsConnection*>(arg);
  if (!SSL_is_init_finished(tls->ssl)) return BEV_NEED_MORE;
  bool progress = false;
  if (tls->holding && evbuffer_get_length(dst) == 0) {
    evbuffer_drain(src, 1);
    tls->holding = false;
    progress = true;
  }
  size_t held = tls->holding ? 1 : 0;
  while (evbuffer_get_length(src) > held) {
    size_t length = std::min(evbuffer_get_length(src) - held, kChunk);
    unsigned char* data = evbuffer_pullup(src, static_cast<ev_ssize_t>(held + length));
    int n = SSL_write(tls->ssl, data + held, static_cast<int>(length));
    if (n <= 0) {
      ERR_clear_error();
      return BEV_ERROR;
    }
    evbuffer_drain(src, held + static_cast<size_t>(n) - 1);
    held = 1;
    progress = true;
  }
  tls->holding = held == 1;
  tls->DrainTo(dst);
  // Nothing new: stop, or the filter loop would call again while src holds its byte.
  return progress ? BEV_OK : BEV_NEED_MORE;
}

}  // namespace

Result<std::shared_ptr<ServerTls>> ServerTls::Load(const std::string& cert_file,
                                                   const std::string& key_file) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return Internal("SSL_CTX_new: " + OpenSslError());
  std::shared_ptr<ServerTls> tls(new ServerTls(ctx));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_file.c_str()) != 1) {
    return InvalidArgument("loading TLS certificate " + cert_file + ": " + OpenSslError());
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return InvalidArgument("loading TLS key " + key_file + ": " + OpenSslError());
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return InvalidArgument("TLS key " + key_file + " does not match " + cert_file);
  }
  return tls;
}

ServerTls::~ServerTls() {
  SSL_CTX_free(ctx_);
}

bufferevent* ServerTls::NewBufferevent(event_base* base, void* arg) {
  auto* self = static_cast<ServerTls*>(arg);
  auto tls = std::make_unique<TlsConnection>();
  tls->ssl = SSL_new(self->ctx_);
  if (tls->ssl == nullptr) return nullptr;
  tls->network_in = BIO_new(BIO_s_mem());
  tls->network_out = BIO_new(BIO_s_mem());
  if (tls->network_in == nullptr || tls->network_out == nullptr) {
    BIO_free(tls->network_in);
    BIO_free(tls->network_out);
    return nullptr;
  }
  SSL_set_bio(tls->ssl, tls->network_in, tls->network_out);
  SSL_set_accept_state(tls->ssl);
  bufferevent* socket = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
  if (socket == nullptr) return nullptr;
  TlsConnection* raw = tls.get();
  // The filter owns the socket bufferevent and, through FreeConnection, the TLS state.
  bufferevent* filter = bufferevent_filter_new(socket, &DecryptFilter, &EncryptFilter,
                                               BEV_OPT_CLOSE_ON_FREE, &FreeConnection, raw);
  if (filter == nullptr) {
    bufferevent_free(socket);
    return nullptr;
  }
  tls.release()->filter = filter;  // the filter owns it now
  return filter;
}

}  // namespace syncbus::http
