#include "common/amqp/session_impl.h"

#include <algorithm>
#include <functional>
#include <utility>

#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <sys/time.h>

#include "common/amqp/field_table.h"
#include "common/log.h"

namespace syncbus::amqp {
namespace {

using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

constexpr int kFrameMax = 131072;
constexpr size_t kMaxInFlight = 2000;  // unconfirmed publications before waiting
constexpr size_t kPumpEvery = 128;     // publications between non-blocking reads
constexpr milliseconds kCloseTimeout{2000};

amqp_bytes_t Bytes(const std::string& s) {
  return amqp_bytes_t{s.size(), const_cast<char*>(s.data())};
}

std::string Str(amqp_bytes_t b) {
  return b.len == 0 ? std::string() : std::string(static_cast<const char*>(b.bytes), b.len);
}

timeval ToTimeval(Duration d) {
  auto us = std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::microseconds>(d).count());
  return timeval{static_cast<time_t>(us / 1000000), static_cast<suseconds_t>(us % 1000000)};
}

std::string QuoteName(const std::string& name) {
  return "'" + name + "'";
}

// A failure reported by rabbitmq-c itself (socket, timeout, protocol decoding).
Status LibraryError(int rc, const std::string& what) {
  Code code = Code::kUnavailable;
  switch (rc) {
    case AMQP_STATUS_TIMEOUT: code = Code::kTimeout; break;
    case AMQP_STATUS_SSL_HOSTNAME_VERIFY_FAILED:
    case AMQP_STATUS_SSL_PEER_VERIFY_FAILED:
      code = Code::kUnauthorized;  // the broker's certificate is not the one we trust
      break;
    case AMQP_STATUS_NO_MEMORY:
    case AMQP_STATUS_BAD_AMQP_DATA:
    case AMQP_STATUS_UNKNOWN_CLASS:
    case AMQP_STATUS_UNKNOWN_METHOD:
    case AMQP_STATUS_UNEXPECTED_STATE:
    case AMQP_STATUS_INVALID_PARAMETER:
    case AMQP_STATUS_TABLE_TOO_BIG:
    case AMQP_STATUS_TIMER_FAILURE: code = Code::kInternal; break;
    default: break;
  }
  return Status(code, what + ": " + amqp_error_string2(rc));
}

// What an operator needs to fix a failed TLS handshake, appended to rabbitmq-c's terse error.
Status WithTlsHint(const Status& status, int rc, const ConnectionOptions& options,
                   const Address& address) {
  if (!options.tls) return status;
  std::string hint;
  switch (rc) {
    case AMQP_STATUS_SSL_PEER_VERIFY_FAILED:
      hint =
          "the broker's certificate is not signed by " +
          (options.tls_ca_file.empty() ? std::string("a CA the system trusts")
                                       : "the CA in amqp.tls.caFile (" + options.tls_ca_file + ")");
      break;
    case AMQP_STATUS_SSL_HOSTNAME_VERIFY_FAILED:
      hint = "the broker's certificate does not name \"" + address.host +
             "\" (only DNS names are matched: connect by a name the certificate lists, not by IP "
             "address)";
      break;
    case AMQP_STATUS_SSL_CONNECTION_FAILED:
    case AMQP_STATUS_SSL_ERROR:
    case AMQP_STATUS_SOCKET_ERROR:
    case AMQP_STATUS_CONNECTION_CLOSED:
      hint =
          options.tls_cert_file.empty()
              ? "TLS handshake refused: does the broker listen with TLS on this port, and does it "
                "require a client certificate (amqp.tls.certFile, keyFile)?"
              : "TLS handshake refused: does the broker listen with TLS on this port, and does it "
                "trust the CA of the client certificate " +
                    options.tls_cert_file + "?";
      break;
    default: return status;
  }
  return Status(status.code(), status.message() + " (" + hint + ")");
}

// A channel.close or connection.close from the broker, e.g. 404 NOT_FOUND.
Status ServerError(uint16_t reply_code, const std::string& text, const std::string& what) {
  Code code;
  switch (reply_code) {
    case AMQP_CONTENT_TOO_LARGE: code = Code::kInvalidArgument; break;
    case AMQP_NO_ROUTE: code = Code::kNotFound; break;
    case AMQP_ACCESS_REFUSED:
    case AMQP_NOT_ALLOWED: code = Code::kUnauthorized; break;
    case AMQP_NOT_FOUND: code = Code::kNotFound; break;
    case AMQP_RESOURCE_LOCKED: code = Code::kConflict; break;
    case AMQP_PRECONDITION_FAILED:
      // "inequivalent arg ..." is a clash with an existing declaration; the rest (unknown
      // delivery tag, invalid argument values) is a malformed request.
      code =
          text.find("inequivalent") != std::string::npos ? Code::kConflict : Code::kInvalidArgument;
      break;
    case AMQP_CONNECTION_FORCED:
    case AMQP_NO_CONSUMERS:
    case AMQP_RESOURCE_ERROR:
    case AMQP_INTERNAL_ERROR: code = Code::kUnavailable; break;
    default: code = Code::kInternal; break;
  }
  return Status(code, what + ": " + std::to_string(reply_code) + " " + text);
}

// The result of a library call that returns amqp_rpc_reply_t (only login here).
Status ReplyError(const amqp_rpc_reply_t& reply, const std::string& what) {
  switch (reply.reply_type) {
    case AMQP_RESPONSE_NORMAL: return Status::Ok();
    case AMQP_RESPONSE_NONE: return Internal(what + ": no reply");
    case AMQP_RESPONSE_LIBRARY_EXCEPTION: return LibraryError(reply.library_error, what);
    case AMQP_RESPONSE_SERVER_EXCEPTION:
      if (reply.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        auto* m = static_cast<amqp_connection_close_t*>(reply.reply.decoded);
        return ServerError(m->reply_code, Str(m->reply_text), what);
      }
      if (reply.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        auto* m = static_cast<amqp_channel_close_t*>(reply.reply.decoded);
        return ServerError(m->reply_code, Str(m->reply_text), what);
      }
      return Internal(what + ": unexpected method " + std::to_string(reply.reply.id));
  }
  return Internal(what + ": unknown reply type");
}

Message DecodeProperties(const amqp_basic_properties_t& p) {
  Message m;
  m.content_type = (p._flags & AMQP_BASIC_CONTENT_TYPE_FLAG) ? Str(p.content_type) : "";
  m.message_id = (p._flags & AMQP_BASIC_MESSAGE_ID_FLAG) ? Str(p.message_id) : "";
  m.app_id = (p._flags & AMQP_BASIC_APP_ID_FLAG) ? Str(p.app_id) : "";
  m.type = (p._flags & AMQP_BASIC_TYPE_FLAG) ? Str(p.type) : "";
  m.timestamp = (p._flags & AMQP_BASIC_TIMESTAMP_FLAG) ? static_cast<int64_t>(p.timestamp) : 0;
  m.persistent = (p._flags & AMQP_BASIC_DELIVERY_MODE_FLAG) && p.delivery_mode == 2;
  m.expiration = (p._flags & AMQP_BASIC_EXPIRATION_FLAG) ? Str(p.expiration) : "";
  m.reply_to = (p._flags & AMQP_BASIC_REPLY_TO_FLAG) ? Str(p.reply_to) : "";
  m.correlation_id = (p._flags & AMQP_BASIC_CORRELATION_ID_FLAG) ? Str(p.correlation_id) : "";
  if (p._flags & AMQP_BASIC_HEADERS_FLAG) {
    auto headers = TableToJson(p.headers);
    if (headers.ok()) {
      m.headers = std::move(*headers);
    } else {
      log::Warn("amqp: dropping undecodable message headers",
                {{"error", headers.status().message()}});
    }
  }
  return m;
}

// The basic.publish properties of `m`: persistence, the properties it sets and its headers
// (whose table `headers` owns, and must outlive the publish).
amqp_basic_properties_t PropertiesOf(const Message& m, const FieldTable& headers) {
  amqp_basic_properties_t props{};
  props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
  props.delivery_mode = m.persistent ? 2 : 1;
  auto set = [&props](int flag, amqp_bytes_t& field, const std::string& value) {
    if (value.empty()) return;
    props._flags |= flag;
    field = Bytes(value);
  };
  set(AMQP_BASIC_CONTENT_TYPE_FLAG, props.content_type, m.content_type);
  set(AMQP_BASIC_MESSAGE_ID_FLAG, props.message_id, m.message_id);
  set(AMQP_BASIC_APP_ID_FLAG, props.app_id, m.app_id);
  set(AMQP_BASIC_TYPE_FLAG, props.type, m.type);
  set(AMQP_BASIC_EXPIRATION_FLAG, props.expiration, m.expiration);
  set(AMQP_BASIC_REPLY_TO_FLAG, props.reply_to, m.reply_to);
  set(AMQP_BASIC_CORRELATION_ID_FLAG, props.correlation_id, m.correlation_id);
  if (m.timestamp != 0) {
    props._flags |= AMQP_BASIC_TIMESTAMP_FLAG;
    props.timestamp = static_cast<uint64_t>(m.timestamp);
  }
  if (headers.table().num_entries > 0) {
    props._flags |= AMQP_BASIC_HEADERS_FLAG;
    props.headers = headers.table();
  }
  return props;
}

bool SameMessage(const Publication& p, const std::string& exchange, const std::string& routing_key,
                 const Message& m) {
  return p.exchange == exchange && p.routing_key == routing_key &&
         p.message.message_id == m.message_id && p.message.body == m.body &&
         p.message.headers == m.headers;
}

}  // namespace

// The publications of one PublishAll call. Sequence numbers first_seq .. first_seq+sent-1 map
// to publications through index_of.
struct RabbitmqSession::Batch {
  std::span<const Publication> publications;
  std::vector<Status> results;
  std::vector<size_t> index_of;       // seq - first_seq -> publication index
  std::vector<char> resolved;         // by seq - first_seq
  std::vector<std::string> returned;  // by seq - first_seq: the basic.return reason, if any
  uint64_t first_seq = 0;
  size_t low = 0;  // every offset below this is resolved
  size_t outstanding = 0;
  std::optional<Status> aborted;

  void Resolve(size_t offset, Status status) {
    if (resolved[offset]) return;
    resolved[offset] = 1;
    results[index_of[offset]] = std::move(status);
    --outstanding;
  }
  void Abort(const Status& why) {
    for (size_t off = low; off < index_of.size(); ++off) Resolve(off, why);
    aborted = why;
  }
};

void RabbitmqSession::ConnectionDeleter::operator()(amqp_connection_state_t_* conn) const {
  amqp_destroy_connection(conn);
}

RabbitmqSession::RabbitmqSession(ConnectionOptions options) : options_(std::move(options)) {
  if (options_.connection_name.empty()) options_.connection_name = "syncbus";
  // Clients of one pool start at different nodes (by name), so connections spread over the
  // cluster rather than all landing on the first node listed.
  next_endpoint_ = std::hash<std::string>{}(options_.connection_name) % options_.Endpoints().size();
}

RabbitmqSession::~RabbitmqSession() {
  Close();
}

Status RabbitmqSession::Connect() {
  Close();
  ResetChannelState();
  consumers_.clear();
  cancelled_.reset();
  blocked_ = false;
  const std::vector<Address> endpoints = options_.Endpoints();
  const size_t n = endpoints.size();
  // Each node in turn, starting after the one used last: a lost connection most often means
  // that node went away. Errors that every node would repeat (a bad CA file) end the round.
  std::vector<Status> failures;
  for (size_t i = 0; i < n; ++i) {
    size_t index = (next_endpoint_ + i) % n;
    Status st = ConnectTo(endpoints[index]);
    if (st.ok()) {
      next_endpoint_ = (index + 1) % n;
      return st;
    }
    if (st.code() == Code::kInvalidArgument || n == 1) return st;
    failures.push_back(std::move(st));
  }
  // None answered: the most telling failure's code (a refused login or certificate says more
  // than a refused connection), every node's error in the message.
  Code code = Code::kUnavailable;
  std::string message = "no AMQP broker of " + std::to_string(n) + " reachable";
  for (const Status& f : failures) {
    if (code == Code::kUnavailable && f.code() != Code::kTimeout) code = f.code();
    message += "; " + f.message();
  }
  return Status(code, message);
}

Status RabbitmqSession::ConnectTo(const Address& address) {
  const std::string where = address.ToString();
  conn_.reset(amqp_new_connection());
  if (!conn_) return Internal("rabbitmq-c could not allocate a connection");
  amqp_socket_t* socket =
      options_.tls ? amqp_ssl_socket_new(conn_.get()) : amqp_tcp_socket_new(conn_.get());
  if (socket == nullptr) {
    conn_.reset();
    return Internal("rabbitmq-c could not create a socket");
  }
  if (options_.tls) {
    if (!options_.tls_ca_file.empty() &&
        amqp_ssl_socket_set_cacert(socket, options_.tls_ca_file.c_str()) != AMQP_STATUS_OK) {
      conn_.reset();
      return InvalidArgument("cannot load TLS CA file " + options_.tls_ca_file);
    }
    if (!options_.tls_cert_file.empty() &&
        amqp_ssl_socket_set_key(socket, options_.tls_cert_file.c_str(),
                                options_.tls_key_file.c_str()) != AMQP_STATUS_OK) {
      conn_.reset();
      return InvalidArgument("cannot load TLS client certificate " + options_.tls_cert_file +
                             " / key " + options_.tls_key_file);
    }
    amqp_ssl_socket_set_verify_peer(socket, options_.tls_verify_peer ? 1 : 0);
    amqp_ssl_socket_set_verify_hostname(socket, options_.tls_verify_peer ? 1 : 0);
  }

  timeval connect_tv = ToTimeval(options_.connect_timeout);
  int rc = amqp_socket_open_noblock(socket, address.host.c_str(), address.port, &connect_tv);
  if (rc != AMQP_STATUS_OK) {
    conn_.reset();
    return WithTlsHint(LibraryError(rc, "connecting to AMQP broker " + where), rc, options_,
                       address);
  }
  amqp_set_handshake_timeout(conn_.get(), &connect_tv);

  Json properties = {
      {"product", "syncbus"},
      {"connection_name", options_.connection_name},
      {"capabilities",
       {{"connection.blocked", true},
        {"consumer_cancel_notify", true},
        {"publisher_confirms", true},
        {"basic.nack", true},
        {"authentication_failure_close", true}}},
  };
  auto table = FieldTable::FromJson(properties);
  if (!table.ok()) {
    conn_.reset();
    return table.status().Annotate("encoding client properties");
  }
  amqp_rpc_reply_t reply = amqp_login_with_properties(
      conn_.get(), options_.vhost.c_str(), AMQP_DEFAULT_MAX_CHANNELS, kFrameMax,
      options_.heartbeat_seconds, &table->table(), AMQP_SASL_METHOD_PLAIN, options_.user.c_str(),
      options_.password.c_str());
  Status login =
      ReplyError(reply, "logging in to " + where + " vhost " + QuoteName(options_.vhost) + " as " +
                            QuoteName(options_.user));
  if (!login.ok()) {
    conn_.reset();
    // Over TLS 1.3 a broker checks the client's certificate after the client's side of the
    // handshake is done: a refusal shows up here, as the first read failing.
    if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
      return WithTlsHint(login, reply.library_error, options_, address);
    }
    return login;
  }

  channel_max_ = std::max(1, amqp_get_channel_max(conn_.get()));
  int heartbeat = amqp_get_heartbeat(conn_.get());
  slice_ = heartbeat > 0 ? std::clamp(milliseconds(heartbeat * 1000 / 4), milliseconds(50),
                                      milliseconds(1000))
                         : milliseconds(1000);
  connected_ = true;
  if (Status st = OpenChannel(); !st.ok()) return Drop(st);
  if (Status st = OpenPublishChannel(); !st.ok()) return Drop(st);
  log::Info("amqp: connection open", {{"connection", options_.connection_name},
                                      {"broker", where},
                                      {"vhost", options_.vhost},
                                      {"tls", options_.tls},
                                      {"heartbeat_s", heartbeat}});
  return Status::Ok();
}

void RabbitmqSession::Close() {
  if (!conn_) return;
  if (connected_) {
    closing_ = true;
    amqp_channel_close_t ch{AMQP_REPLY_SUCCESS, amqp_cstring_bytes("closing"), 0, 0};
    auto r = Rpc(channel_, AMQP_CHANNEL_CLOSE_METHOD, &ch, {AMQP_CHANNEL_CLOSE_OK_METHOD},
                 "closing the channel");
    if (r.ok()) {
      amqp_connection_close_t cc{AMQP_REPLY_SUCCESS, amqp_cstring_bytes("closing"), 0, 0};
      (void)Rpc(0, AMQP_CONNECTION_CLOSE_METHOD, &cc, {AMQP_CONNECTION_CLOSE_OK_METHOD},
                "closing the connection");
    }
    closing_ = false;
  }
  conn_.reset();
  connected_ = false;
  ResetChannelState();
  consumers_.clear();
}

void RabbitmqSession::ResetChannelState() {
  ResetConsumingState();
  ResetPublishingState();
}

void RabbitmqSession::ResetConsumingState() {
  deliveries_.clear();
  tag_offset_ = max_tag_;
}

void RabbitmqSession::ResetPublishingState() {
  next_seq_ = 1;
}

Status RabbitmqSession::Drop(Status why) {
  if (conn_) {
    log::Warn("amqp: connection lost",
              {{"connection", options_.connection_name}, {"error", why.ToString()}});
  }
  conn_.reset();
  connected_ = false;
  blocked_ = false;
  consumers_.clear();
  ResetChannelState();
  if (batch_ != nullptr) batch_->Abort(why);
  return why;
}

amqp_channel_t RabbitmqSession::NextChannel() {
  do {
    last_channel_ = static_cast<amqp_channel_t>(last_channel_ % channel_max_ + 1);
  } while (channel_max_ > 2 && (last_channel_ == channel_ || last_channel_ == publish_channel_));
  return last_channel_;
}

Status RabbitmqSession::OpenChannel() {
  channel_ = NextChannel();
  amqp_channel_open_t open{amqp_empty_bytes};
  SYNCBUS_RETURN_IF_ERROR(Rpc(channel_, AMQP_CHANNEL_OPEN_METHOD, &open,
                              {AMQP_CHANNEL_OPEN_OK_METHOD}, "opening a channel"));
  ResetConsumingState();
  return Status::Ok();
}

Status RabbitmqSession::OpenPublishChannel() {
  publish_channel_ = NextChannel();
  amqp_channel_open_t open{amqp_empty_bytes};
  SYNCBUS_RETURN_IF_ERROR(Rpc(publish_channel_, AMQP_CHANNEL_OPEN_METHOD, &open,
                              {AMQP_CHANNEL_OPEN_OK_METHOD}, "opening a publishing channel"));
  amqp_confirm_select_t select{0};
  SYNCBUS_RETURN_IF_ERROR(Rpc(publish_channel_, AMQP_CONFIRM_SELECT_METHOD, &select,
                              {AMQP_CONFIRM_SELECT_OK_METHOD}, "enabling publisher confirms"));
  ResetPublishingState();
  return Status::Ok();
}

Status RabbitmqSession::RenewPublishChannel() {
  if (!connected_)
    return Unavailable("renewing the publishing channel: not connected to the AMQP broker");
  const amqp_channel_t old = publish_channel_;
  amqp_channel_close_t close{AMQP_REPLY_SUCCESS, amqp_cstring_bytes("renewing"), 0, 0};
  auto closed = Rpc(old, AMQP_CHANNEL_CLOSE_METHOD, &close, {AMQP_CHANNEL_CLOSE_OK_METHOD},
                    "closing the publishing channel");
  if (!closed.ok()) {
    // The broker closed it first, and it has been reopened already (DispatchPublishing).
    if (connected_ && publish_channel_ != old) return Status::Ok();
    return closed.status();
  }
  Status opened = OpenPublishChannel();
  ReleaseBuffers();
  if (!opened.ok()) return connected_ ? Drop(opened) : opened;
  log::Info("amqp: publishing on a new channel", {{"connection", options_.connection_name},
                                                  {"channel", static_cast<int>(publish_channel_)}});
  return Status::Ok();
}

// After the broker closed the channel: a fresh channel with the same consumers (same tags).
// Everything unacked on the old channel has been requeued by the broker.
Status RabbitmqSession::RestoreChannel() {
  SYNCBUS_RETURN_IF_ERROR(OpenChannel());
  auto consumers = std::exchange(consumers_, {});
  for (const auto& [tag, consumer] : consumers) {
    auto restored = StartConsumer(consumer.queue, consumer.prefetch, tag, consumer.arguments);
    if (!restored.ok()) {
      if (!connected_) return restored.status();
      cancelled_ = Unavailable("consumer " + tag + " on queue " + QuoteName(consumer.queue) +
                               " could not be restored: " + restored.status().message());
    }
  }
  return Status::Ok();
}

Result<bool> RabbitmqSession::WaitFrame(SteadyTime deadline, amqp_frame_t* frame) {
  if (!connected_) return Unavailable("not connected to the AMQP broker");
  for (;;) {
    auto remaining = deadline - Steady::now();
    timeval tv = ToTimeval(std::clamp<Duration>(remaining, Duration::zero(), slice_));
    int rc = amqp_simple_wait_frame_noblock(conn_.get(), frame, &tv);
    if (rc == AMQP_STATUS_OK) return true;
    if (rc != AMQP_STATUS_TIMEOUT) return Drop(LibraryError(rc, "reading from the AMQP broker"));
    if (Steady::now() >= deadline) return false;
  }
}

void RabbitmqSession::ReleaseBuffers() {
  if (conn_) amqp_maybe_release_buffers(conn_.get());
}

Result<amqp_method_t> RabbitmqSession::Rpc(amqp_channel_t channel, amqp_method_number_t method,
                                           void* args,
                                           std::initializer_list<amqp_method_number_t> replies,
                                           const std::string& what) {
  if (!connected_) return Unavailable(what + ": not connected to the AMQP broker");
  int rc = amqp_send_method(conn_.get(), channel, method, args);
  if (rc != AMQP_STATUS_OK) return Drop(LibraryError(rc, what));
  // Closing must not hang on a dead peer for a full RPC timeout.
  const milliseconds timeout =
      closing_ ? std::min(options_.rpc_timeout, kCloseTimeout) : options_.rpc_timeout;
  const SteadyTime deadline = Steady::now() + timeout;
  for (;;) {
    amqp_frame_t f;
    auto got = WaitFrame(deadline, &f);
    if (!got.ok()) return got.status().Annotate(what);
    if (!*got) {
      return Drop(Status(Code::kTimeout, what + ": no reply from the broker within " +
                                             std::to_string(timeout.count()) + " ms"));
    }
    if (f.frame_type == AMQP_FRAME_METHOD && f.channel == channel &&
        std::find(replies.begin(), replies.end(), f.payload.method.id) != replies.end()) {
      return f.payload.method;
    }
    Status st = Dispatch(f);  // a close of `channel` is an error here
    if (!st.ok()) return st.Annotate(what);
    ReleaseBuffers();
  }
}

Status RabbitmqSession::Dispatch(const amqp_frame_t& f) {
  if (f.frame_type != AMQP_FRAME_METHOD) {
    // Content of a message on a channel we no longer use.
    return Status::Ok();
  }
  if (f.channel == 0) return DispatchConnection(f.payload.method);
  if (f.channel == publish_channel_) return DispatchPublishing(f);
  if (f.channel == channel_) return DispatchConsuming(f);
  return Status::Ok();
}

Status RabbitmqSession::DispatchConnection(const amqp_method_t& method) {
  switch (method.id) {
    case AMQP_CONNECTION_CLOSE_METHOD: {
      auto* m = static_cast<amqp_connection_close_t*>(method.decoded);
      Status why =
          ServerError(m->reply_code, Str(m->reply_text), "connection closed by the broker");
      amqp_connection_close_ok_t ok{0};
      amqp_send_method(conn_.get(), 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
      return Drop(why);
    }
    case AMQP_CONNECTION_BLOCKED_METHOD: {
      auto* m = static_cast<amqp_connection_blocked_t*>(method.decoded);
      blocked_ = true;
      blocked_reason_ = Str(m->reason);
      log::Warn("amqp: connection blocked by the broker",
                {{"connection", options_.connection_name}, {"reason", blocked_reason_}});
      return Status::Ok();
    }
    case AMQP_CONNECTION_UNBLOCKED_METHOD:
      blocked_ = false;
      log::Info("amqp: connection unblocked", {{"connection", options_.connection_name}});
      return Status::Ok();
    default: return Status::Ok();
  }
}

Status RabbitmqSession::DispatchConsuming(const amqp_frame_t& f) {
  const amqp_method_t& method = f.payload.method;
  switch (method.id) {
    case AMQP_BASIC_DELIVER_METHOD: {
      auto* m = static_cast<amqp_basic_deliver_t*>(method.decoded);
      Delivery d;
      d.delivery_tag = tag_offset_ + m->delivery_tag;
      d.redelivered = m->redelivered != 0;
      d.exchange = Str(m->exchange);
      d.routing_key = Str(m->routing_key);
      d.consumer_tag = Str(m->consumer_tag);
      auto content = ReadContent(f.channel);
      if (!content.ok()) return content.status();
      d.message = std::move(*content);
      auto it = consumers_.find(d.consumer_tag);
      if (it != consumers_.end()) d.queue = it->second.queue;
      max_tag_ = std::max(max_tag_, d.delivery_tag);
      deliveries_.push_back(std::move(d));
      return Status::Ok();
    }
    case AMQP_BASIC_CANCEL_METHOD: {
      auto* m = static_cast<amqp_basic_cancel_t*>(method.decoded);
      std::string tag = Str(m->consumer_tag);
      if (!m->nowait) {
        amqp_basic_cancel_ok_t ok{m->consumer_tag};
        int rc = amqp_send_method(conn_.get(), channel_, AMQP_BASIC_CANCEL_OK_METHOD, &ok);
        if (rc != AMQP_STATUS_OK) return Drop(LibraryError(rc, "acknowledging a cancel"));
      }
      auto it = consumers_.find(tag);
      std::string queue = it != consumers_.end() ? it->second.queue : "?";
      if (it != consumers_.end()) consumers_.erase(it);
      cancelled_ = Unavailable("consumer " + tag + " on queue " + QuoteName(queue) +
                               " was cancelled by the broker (queue deleted or moved)");
      log::Warn("amqp: consumer cancelled by the broker",
                {{"connection", options_.connection_name}, {"error", cancelled_->message()}});
      return Status::Ok();
    }
    case AMQP_CHANNEL_FLOW_METHOD: return AnswerFlow(channel_, method);
    case AMQP_CHANNEL_CLOSE_METHOD: {
      Status why;
      if (Status answered = AnswerClose(channel_, method, why); !answered.ok()) return answered;
      if (!closing_) {
        log::Info("amqp: reopening the channel after a channel error",
                  {{"connection", options_.connection_name}, {"error", why.message()}});
        Status restored = RestoreChannel();
        if (!restored.ok()) return restored;
      }
      return why;
    }
    default: return Status::Ok();
  }
}

Status RabbitmqSession::AnswerFlow(amqp_channel_t channel, const amqp_method_t& method) {
  auto* m = static_cast<amqp_channel_flow_t*>(method.decoded);
  amqp_channel_flow_ok_t ok{m->active};
  int rc = amqp_send_method(conn_.get(), channel, AMQP_CHANNEL_FLOW_OK_METHOD, &ok);
  if (rc != AMQP_STATUS_OK) return Drop(LibraryError(rc, "acknowledging channel.flow"));
  return Status::Ok();
}

Status RabbitmqSession::AnswerClose(amqp_channel_t channel, const amqp_method_t& method,
                                    Status& why) {
  auto* m = static_cast<amqp_channel_close_t*>(method.decoded);
  why = ServerError(m->reply_code, Str(m->reply_text), "channel closed by the broker");
  amqp_channel_close_ok_t ok{0};
  int rc = amqp_send_method(conn_.get(), channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
  if (rc != AMQP_STATUS_OK) return Drop(LibraryError(rc, "acknowledging channel.close"));
  return Status::Ok();
}

Status RabbitmqSession::DispatchPublishing(const amqp_frame_t& f) {
  const amqp_method_t& method = f.payload.method;
  switch (method.id) {
    case AMQP_BASIC_ACK_METHOD: {
      auto* m = static_cast<amqp_basic_ack_t*>(method.decoded);
      Confirm(m->delivery_tag, m->multiple != 0, true);
      return Status::Ok();
    }
    case AMQP_BASIC_NACK_METHOD: {
      auto* m = static_cast<amqp_basic_nack_t*>(method.decoded);
      Confirm(m->delivery_tag, m->multiple != 0, false);
      return Status::Ok();
    }
    case AMQP_BASIC_RETURN_METHOD: {
      auto* m = static_cast<amqp_basic_return_t*>(method.decoded);
      std::string exchange = Str(m->exchange), routing_key = Str(m->routing_key);
      std::string reason = std::to_string(m->reply_code) + " " + Str(m->reply_text);
      auto content = ReadContent(f.channel);
      if (!content.ok()) return content.status();
      MatchReturn(exchange, routing_key, *content, reason);
      return Status::Ok();
    }
    case AMQP_CHANNEL_FLOW_METHOD: return AnswerFlow(publish_channel_, method);
    case AMQP_CHANNEL_CLOSE_METHOD: {
      // A publication the broker closed the channel for (an exchange that does not exist): its
      // batch fails with why; the consumers on the other channel are not touched.
      Status why;
      if (Status answered = AnswerClose(publish_channel_, method, why); !answered.ok())
        return answered;
      if (batch_ != nullptr) batch_->Abort(why);
      if (!closing_) {
        Status reopened = OpenPublishChannel();
        if (!reopened.ok()) return reopened;
      }
      return why;
    }
    default: return Status::Ok();
  }
}

Result<Message> RabbitmqSession::ReadContent(amqp_channel_t channel) {
  const SteadyTime deadline = Steady::now() + options_.rpc_timeout;
  Message message;
  bool have_header = false;
  uint64_t body_size = 0;
  for (;;) {
    amqp_frame_t f;
    auto got = WaitFrame(deadline, &f);
    if (!got.ok()) return got.status();
    if (!*got) return Drop(Status(Code::kTimeout, "incomplete message from the broker"));
    if (f.channel == 0) {
      SYNCBUS_RETURN_IF_ERROR(Dispatch(f));
      continue;
    }
    if (f.channel != channel) continue;
    if (!have_header) {
      if (f.frame_type != AMQP_FRAME_HEADER) {
        return Drop(Internal("protocol error: expected a content header, got frame type " +
                             std::to_string(f.frame_type)));
      }
      message = DecodeProperties(
          *static_cast<const amqp_basic_properties_t*>(f.payload.properties.decoded));
      body_size = f.payload.properties.body_size;
      message.body.reserve(body_size);
      have_header = true;
    } else {
      if (f.frame_type != AMQP_FRAME_BODY) {
        return Drop(Internal("protocol error: expected a content body, got frame type " +
                             std::to_string(f.frame_type)));
      }
      message.body.append(static_cast<const char*>(f.payload.body_fragment.bytes),
                          f.payload.body_fragment.len);
    }
    if (have_header && message.body.size() >= body_size) return message;
  }
}

void RabbitmqSession::Confirm(uint64_t seq, bool multiple, bool ack) {
  Batch* b = batch_;
  if (b == nullptr || seq < b->first_seq) return;  // a confirm for an abandoned publication
  size_t end = std::min<size_t>(seq - b->first_seq + 1, b->index_of.size());
  size_t begin = multiple ? b->low : seq - b->first_seq;
  for (size_t off = begin; off < end; ++off) {
    if (b->resolved[off]) continue;
    const Publication& p = b->publications[b->index_of[off]];
    if (!ack) {
      b->Resolve(off,
                 Unavailable("the broker refused the message to exchange " + QuoteName(p.exchange) +
                             " with routing key " + QuoteName(p.routing_key) +
                             " (basic.nack: a queue is full or unavailable)"));
    } else if (!b->returned[off].empty()) {
      b->Resolve(off, NotFound("unroutable message to exchange " + QuoteName(p.exchange) +
                               " with routing key " + QuoteName(p.routing_key) +
                               " was returned: " + b->returned[off]));
    } else {
      b->Resolve(off, Status::Ok());
    }
  }
  while (b->low < b->index_of.size() && b->resolved[b->low]) ++b->low;
}

void RabbitmqSession::MatchReturn(const std::string& exchange, const std::string& routing_key,
                                  const Message& message, const std::string& reason) {
  Batch* b = batch_;
  if (b == nullptr) return;
  for (size_t off = b->low; off < b->index_of.size(); ++off) {
    if (b->resolved[off] || !b->returned[off].empty()) continue;
    if (SameMessage(b->publications[b->index_of[off]], exchange, routing_key, message)) {
      b->returned[off] = reason;
      return;
    }
  }
}

Status RabbitmqSession::WaitUnblocked(SteadyTime deadline) {
  while (blocked_) {
    amqp_frame_t f;
    auto got = WaitFrame(deadline, &f);
    if (!got.ok()) return got.status();
    if (!*got) {
      return Status(Code::kTimeout,
                    "publishing is blocked by the broker (" + blocked_reason_ + ")");
    }
    SYNCBUS_RETURN_IF_ERROR(Dispatch(f));
    ReleaseBuffers();
  }
  return Status::Ok();
}

Status RabbitmqSession::Declare(const Topology& topology) {
  for (const auto& e : topology.exchanges) {
    const std::string what = "declaring exchange " + QuoteName(e.name);
    auto args = FieldTable::FromJson(e.arguments);
    if (!args.ok()) return args.status().Annotate(what);
    amqp_exchange_declare_t m{0, Bytes(e.name), Bytes(e.type), 0, e.durable ? 1 : 0, 0, 0,
                              0, args->table()};
    SYNCBUS_RETURN_IF_ERROR(
        Rpc(channel_, AMQP_EXCHANGE_DECLARE_METHOD, &m, {AMQP_EXCHANGE_DECLARE_OK_METHOD}, what));
  }
  for (const auto& q : topology.queues) {
    const std::string what = "declaring queue " + QuoteName(q.name);
    auto args = FieldTable::FromJson(q.arguments);
    if (!args.ok()) return args.status().Annotate(what);
    amqp_queue_declare_t m{0, Bytes(q.name), 0, q.durable ? 1 : 0, 0, 0, 0, args->table()};
    SYNCBUS_RETURN_IF_ERROR(
        Rpc(channel_, AMQP_QUEUE_DECLARE_METHOD, &m, {AMQP_QUEUE_DECLARE_OK_METHOD}, what));
  }
  for (const auto& b : topology.bindings) {
    const std::string what = "binding queue " + QuoteName(b.destination) + " to exchange " +
                             QuoteName(b.source) + " with routing key " + QuoteName(b.routing_key);
    auto args = FieldTable::FromJson(b.arguments);
    if (!args.ok()) return args.status().Annotate(what);
    amqp_queue_bind_t m{0, Bytes(b.destination), Bytes(b.source), Bytes(b.routing_key),
                        0, args->table()};
    SYNCBUS_RETURN_IF_ERROR(
        Rpc(channel_, AMQP_QUEUE_BIND_METHOD, &m, {AMQP_QUEUE_BIND_OK_METHOD}, what));
  }
  ReleaseBuffers();
  return Status::Ok();
}

Status RabbitmqSession::Publish(const Publication& publication, milliseconds timeout) {
  return PublishSpan(std::span<const Publication>(&publication, 1), timeout)[0];
}

std::vector<Status> RabbitmqSession::PublishAll(const std::vector<Publication>& publications,
                                                milliseconds timeout) {
  return PublishSpan(publications, timeout);
}

Status RabbitmqSession::PumpConfirms(Batch& b, SteadyTime deadline) {
  for (;;) {
    bool full = b.outstanding >= kMaxInFlight;
    amqp_frame_t f;
    auto got = WaitFrame(full ? deadline : Steady::now(), &f);
    if (!got.ok()) return got.status();
    if (!*got) return full ? Status(Code::kTimeout, "no confirms from the broker") : Status::Ok();
    Status st = Dispatch(f);
    ReleaseBuffers();
    if (!st.ok()) return st;
  }
}

void RabbitmqSession::AwaitConfirms(Batch& b, SteadyTime deadline, milliseconds timeout) {
  while (b.outstanding > 0) {
    amqp_frame_t f;
    auto got = WaitFrame(deadline, &f);
    if (!got.ok()) break;  // Drop() has resolved everything outstanding
    if (!*got) {
      Status late(Code::kTimeout,
                  "no confirm from the broker within " + std::to_string(timeout.count()) + " ms" +
                      (blocked_ ? " (connection blocked: " + blocked_reason_ + ")" : ""));
      for (size_t off = b.low; off < b.index_of.size(); ++off) b.Resolve(off, late);
      break;
    }
    (void)Dispatch(f);  // a channel or connection close resolves the batch through Abort()
    ReleaseBuffers();
  }
}

std::vector<Status> RabbitmqSession::PublishSpan(std::span<const Publication> publications,
                                                 milliseconds timeout) {
  const SteadyTime deadline = Steady::now() + timeout;
  Batch b;
  b.publications = publications;
  b.results.assign(publications.size(),
                   Unavailable("not published: not connected to the AMQP broker"));
  if (!connected_ || publications.empty()) return std::move(b.results);
  if (Status st = WaitUnblocked(deadline); !st.ok()) {
    b.results.assign(publications.size(), st);
    return std::move(b.results);
  }
  b.first_seq = next_seq_;
  b.index_of.reserve(publications.size());
  batch_ = &b;
  struct Detach {
    Batch*& slot;
    ~Detach() { slot = nullptr; }
  } detach{batch_};

  for (size_t i = 0; i < publications.size(); ++i) {
    const Publication& p = publications[i];
    const Message& m = p.message;
    auto headers = FieldTable::FromJson(m.headers);
    if (!headers.ok()) {
      b.results[i] = headers.status().Annotate("message headers");
      continue;
    }
    if (blocked_ || b.outstanding >= kMaxInFlight || i % kPumpEvery == kPumpEvery - 1) {
      Status st = blocked_ ? WaitUnblocked(deadline) : PumpConfirms(b, deadline);
      if (!st.ok() || b.aborted) {
        Status why = b.aborted ? *b.aborted : st;
        for (size_t j = i; j < publications.size(); ++j) b.results[j] = why;
        break;
      }
    }
    amqp_basic_properties_t props = PropertiesOf(m, *headers);
    int rc =
        amqp_basic_publish(conn_.get(), publish_channel_, Bytes(p.exchange), Bytes(p.routing_key),
                           p.mandatory ? 1 : 0, 0, &props, Bytes(m.body));
    if (rc != AMQP_STATUS_OK) {
      Status why = LibraryError(rc, "publishing to exchange " + QuoteName(p.exchange));
      Drop(why);
      for (size_t j = i; j < publications.size(); ++j) b.results[j] = why;
      break;
    }
    b.index_of.push_back(i);
    b.resolved.push_back(0);
    b.returned.emplace_back();
    ++b.outstanding;
    ++next_seq_;
  }

  AwaitConfirms(b, deadline, timeout);
  return std::move(b.results);
}

Result<std::string> RabbitmqSession::StartConsumer(const std::string& queue, uint16_t prefetch,
                                                   const std::string& tag, const Json& arguments) {
  const std::string what = "consuming from queue " + QuoteName(queue);
  auto table = FieldTable::FromJson(arguments);
  if (!table.ok()) return table.status().Annotate(what);
  amqp_basic_qos_t qos{0, prefetch, 0};
  SYNCBUS_RETURN_IF_ERROR(Rpc(channel_, AMQP_BASIC_QOS_METHOD, &qos, {AMQP_BASIC_QOS_OK_METHOD},
                              what + " (basic.qos)"));
  amqp_basic_consume_t consume{0, Bytes(queue), Bytes(tag), 0, 0, 0, 0, table->table()};
  auto reply =
      Rpc(channel_, AMQP_BASIC_CONSUME_METHOD, &consume, {AMQP_BASIC_CONSUME_OK_METHOD}, what);
  if (!reply.ok()) return reply.status();
  std::string consumer_tag =
      Str(static_cast<amqp_basic_consume_ok_t*>(reply->decoded)->consumer_tag);
  consumers_[consumer_tag] = Consumer{queue, prefetch, arguments};
  return consumer_tag;
}

Result<std::string> RabbitmqSession::Consume(const std::string& queue, uint16_t prefetch) {
  auto tag = StartConsumer(queue, prefetch, "", Json::object());
  ReleaseBuffers();
  return tag;
}

Result<std::string> RabbitmqSession::ConsumeStream(const std::string& queue, uint16_t prefetch,
                                                   int64_t from_unix_seconds) {
  auto tag = StartConsumer(queue, prefetch, "",
                           Json{{"x-stream-offset", TimestampValue(from_unix_seconds)}});
  ReleaseBuffers();
  return tag;
}

Status RabbitmqSession::Cancel(const std::string& consumer_tag) {
  amqp_basic_cancel_t cancel{Bytes(consumer_tag), 0};
  SYNCBUS_RETURN_IF_ERROR(Rpc(channel_, AMQP_BASIC_CANCEL_METHOD, &cancel,
                              {AMQP_BASIC_CANCEL_OK_METHOD},
                              "cancelling consumer " + consumer_tag));
  consumers_.erase(consumer_tag);
  ReleaseBuffers();
  return Status::Ok();
}

Result<std::optional<Delivery>> RabbitmqSession::Next(milliseconds timeout) {
  const SteadyTime deadline = Steady::now() + timeout;
  for (;;) {
    if (!deliveries_.empty()) {
      Delivery d = std::move(deliveries_.front());
      deliveries_.pop_front();
      return std::optional<Delivery>(std::move(d));
    }
    if (!connected_) return Unavailable("not connected to the AMQP broker");
    if (cancelled_) {
      Status why = *std::exchange(cancelled_, std::nullopt);
      Close();
      return why;
    }
    amqp_frame_t f;
    auto got = WaitFrame(deadline, &f);
    if (!got.ok()) return got.status();
    if (!*got) return std::optional<Delivery>();
    Status st = Dispatch(f);
    ReleaseBuffers();
    if (!st.ok()) return st;
  }
}

Status RabbitmqSession::Settle(Settlement how, uint64_t delivery_tag, bool requeue) {
  static constexpr const char* kNames[] = {"ack", "nack", "reject"};
  const std::string what =
      std::string(kNames[static_cast<int>(how)]) + " of delivery " + std::to_string(delivery_tag);
  if (!connected_) return Unavailable(what + ": not connected to the AMQP broker");
  if (delivery_tag <= tag_offset_) {
    return Unavailable(what +
                       ": the tag belongs to a closed channel; the broker has requeued "
                       "the message");
  }
  uint64_t tag = delivery_tag - tag_offset_;
  int rc = AMQP_STATUS_OK;
  switch (how) {
    case Settlement::kAck: rc = amqp_basic_ack(conn_.get(), channel_, tag, 0); break;
    case Settlement::kNack: rc = amqp_basic_nack(conn_.get(), channel_, tag, 0, requeue); break;
    case Settlement::kReject: rc = amqp_basic_reject(conn_.get(), channel_, tag, requeue); break;
  }
  if (rc != AMQP_STATUS_OK) return Drop(LibraryError(rc, what));
  return Status::Ok();
}

Status RabbitmqSession::Ack(uint64_t delivery_tag) {
  return Settle(Settlement::kAck, delivery_tag, false);
}

Status RabbitmqSession::Nack(uint64_t delivery_tag, bool requeue) {
  return Settle(Settlement::kNack, delivery_tag, requeue);
}

Status RabbitmqSession::Reject(uint64_t delivery_tag, bool requeue) {
  return Settle(Settlement::kReject, delivery_tag, requeue);
}

Result<std::optional<Delivery>> RabbitmqSession::Get(const std::string& queue) {
  const std::string what = "getting a message from queue " + QuoteName(queue);
  amqp_basic_get_t get{0, Bytes(queue), 0};
  auto reply = Rpc(channel_, AMQP_BASIC_GET_METHOD, &get,
                   {AMQP_BASIC_GET_OK_METHOD, AMQP_BASIC_GET_EMPTY_METHOD}, what);
  if (!reply.ok()) return reply.status();
  if (reply->id == AMQP_BASIC_GET_EMPTY_METHOD) {
    ReleaseBuffers();
    return std::optional<Delivery>();
  }
  auto* m = static_cast<amqp_basic_get_ok_t*>(reply->decoded);
  Delivery d;
  d.delivery_tag = tag_offset_ + m->delivery_tag;
  d.redelivered = m->redelivered != 0;
  d.exchange = Str(m->exchange);
  d.routing_key = Str(m->routing_key);
  d.queue = queue;
  auto content = ReadContent(channel_);
  if (!content.ok()) return content.status().Annotate(what);
  d.message = std::move(*content);
  max_tag_ = std::max(max_tag_, d.delivery_tag);
  ReleaseBuffers();
  return std::optional<Delivery>(std::move(d));
}

Result<std::string> RabbitmqSession::DeclareReplyQueue() {
  // passive 0, durable 0, exclusive 1, auto_delete 1: the broker names it.
  amqp_queue_declare_t m{0, amqp_empty_bytes, 0, 0, 1, 1, 0, amqp_empty_table};
  auto reply = Rpc(channel_, AMQP_QUEUE_DECLARE_METHOD, &m, {AMQP_QUEUE_DECLARE_OK_METHOD},
                   "declaring a reply queue");
  if (!reply.ok()) return reply.status();
  std::string name = Str(static_cast<amqp_queue_declare_ok_t*>(reply->decoded)->queue);
  ReleaseBuffers();
  return name;
}

Result<QueueInfo> RabbitmqSession::Inspect(const std::string& queue) {
  amqp_queue_declare_t m{0, Bytes(queue), 1, 0, 0, 0, 0, amqp_empty_table};
  auto reply = Rpc(channel_, AMQP_QUEUE_DECLARE_METHOD, &m, {AMQP_QUEUE_DECLARE_OK_METHOD},
                   "inspecting queue " + QuoteName(queue));
  if (!reply.ok()) return reply.status();
  auto* ok = static_cast<amqp_queue_declare_ok_t*>(reply->decoded);
  QueueInfo info{ok->message_count, ok->consumer_count};
  ReleaseBuffers();
  return info;
}

Status RabbitmqSession::Poll() {
  for (;;) {
    amqp_frame_t f;
    auto got = WaitFrame(Steady::now(), &f);
    if (!got.ok()) return got.status();
    if (!*got) return Status::Ok();
    Status st = Dispatch(f);
    ReleaseBuffers();
    if (!st.ok()) return st;
  }
}

}  // namespace syncbus::amqp
