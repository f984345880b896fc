// Session: one AMQP connection as syncbus uses it: one channel for consuming, settling and
// declaring, one for publishing (with confirms), so that the latter can be replaced without
// giving back the deliveries held on the former. The real implementation
// (session_impl.h) sits on rabbitmq-c 0.11; FakeSession (tests/fakes/common/amqp/fake_session.h) is
// an in-memory broker for unit tests. NOT thread-safe: one Session per thread (rabbitmq-c
// connections must not be shared). Heartbeats are serviced only inside calls (Publish*, Next, Get,
// Poll, ...): a caller busy elsewhere for longer than the heartbeat interval must call Poll() in
// between.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/amqp/address.h"
#include "common/amqp/topology.h"
#include "common/json.h"
#include "common/status.h"

namespace syncbus::amqp {

// Where and how to connect. Parsed from the daemons' YAML config.
struct ConnectionOptions {
  std::string host = "127.0.0.1";
  int port = 5672;
  // The nodes of one RabbitMQ cluster, tried in turn; empty = just host:port. Outside Kubernetes
  // (no Service in front of the cluster) a client lists every node so it can fail over.
  std::vector<Address> addresses;
  std::string vhost = "/";
  std::string user = "guest";
  std::string password = "guest";
  std::string connection_name;  // shown in the management UI
  // A frozen or cut-off client is dropped by the broker after about two intervals, and its
  // unacked deliveries go to another consumer: 10 s keeps that within a cluster lease.
  int heartbeat_seconds = 10;
  std::chrono::milliseconds connect_timeout{5000};
  // Limit for each synchronous broker round trip (declare, consume, get, ...); exceeding it
  // drops the connection (kTimeout, then connected() is false).
  std::chrono::milliseconds rpc_timeout{30000};
  bool tls = false;
  std::string tls_ca_file, tls_cert_file, tls_key_file;
  bool tls_verify_peer = true;

  // `addresses`, or host:port when it is empty.
  std::vector<Address> Endpoints() const {
    return addresses.empty() ? std::vector<Address>{{host, port}} : addresses;
  }
  // The endpoints as one string for logs: "a:5671,b:5671".
  std::string DescribeEndpoints() const {
    std::string text;
    for (const Address& a : Endpoints()) text += (text.empty() ? "" : ",") + a.ToString();
    return text;
  }
};

// Message properties and body. Headers are an AMQP field table expressed as a JSON object
// (strings, integers, booleans, doubles, arrays, nested tables, e.g. x-death).
struct Message {
  std::string body;
  std::string content_type = "application/json";
  std::string message_id;
  std::string app_id;
  std::string type;
  int64_t timestamp = 0;   // seconds since the epoch
  bool persistent = true;  // delivery_mode 2
  std::string expiration;  // per-message TTL in ms as a string, empty = none
  // Request/reply: the queue to answer to (via the default exchange) and what the answer echoes.
  std::string reply_to;
  std::string correlation_id;
  Json headers = Json::object();
};

struct Publication {
  std::string exchange;
  std::string routing_key;
  Message message;
  bool mandatory = true;  // unroutable -> returned -> Publish fails with kNotFound
};

// Delivery tags are unique for the Session's lifetime. After the consuming channel was reopened or
// the connection re-established, the broker has requeued everything unacked: acking an older tag
// fails with kUnavailable and the message comes back redelivered.
struct Delivery {
  uint64_t delivery_tag = 0;
  bool redelivered = false;
  std::string exchange;
  std::string routing_key;
  std::string consumer_tag;
  std::string queue;  // the queue this consumer tag was registered for
  Message message;
};

struct QueueInfo {
  uint32_t messages = 0;  // ready messages
  uint32_t consumers = 0;
};

class Session {
 public:
  virtual ~Session() = default;

  // Opens (or re-opens after a failure) the connection and channel, advertising the
  // connection.blocked and consumer_cancel_notify capabilities, and enables publisher confirms.
  // Any previous consumers are gone after a reconnect: Consume() again.
  virtual Status Connect() = 0;
  virtual bool connected() const = 0;
  // Closes cleanly (channel.close, connection.close). Unacked deliveries return to their queues.
  virtual void Close() = 0;
  // Replaces the publishing channel with a new one on the same connection; consumers and their
  // unacked deliveries stay. For publishes a channel keeps being refused although the queue could
  // take them (RabbitMQ 3.10 after a quorum queue's leader died, channel_renewal.h). An error
  // means the connection is gone.
  virtual Status RenewPublishChannel() = 0;

  // Declares exchanges, queues (with arguments) and bindings. Idempotent; a declaration that
  // clashes with an existing one (other arguments) is kConflict naming the object.
  virtual Status Declare(const Topology& topology) = 0;

  // Declares a server-named, exclusive, auto-delete, non-durable queue and returns its name: a
  // place for replies that lives as long as this connection (a reconnect loses it).
  virtual Result<std::string> DeclareReplyQueue() = 0;

  // Publishes and waits until the broker confirms (basic.ack). nack, reject-publish overflow
  // -> kUnavailable; unroutable mandatory message (basic.return) -> kNotFound; timeout -> kTimeout.
  virtual Status Publish(const Publication& publication, std::chrono::milliseconds timeout) = 0;
  // Pipelines many publishes and waits for every confirm; one Status per publication, in order.
  virtual std::vector<Status> PublishAll(const std::vector<Publication>& publications,
                                         std::chrono::milliseconds timeout) = 0;

  // Starts consuming `queue` with manual acks and at most `prefetch` unacked deliveries for this
  // consumer (basic.qos per consumer; quorum queues refuse a global qos; 0 = unlimited).
  // Returns the consumer tag; kNotFound when the queue does not exist.
  virtual Result<std::string> Consume(const std::string& queue, uint16_t prefetch) = 0;
  // Reads a stream queue (x-queue-type stream) from its first message at or after `from`,
  // without consuming it: deliveries must still be acked to get more (prefetch is the credit).
  virtual Result<std::string> ConsumeStream(const std::string& queue, uint16_t prefetch,
                                            int64_t from_unix_seconds) = 0;
  virtual Status Cancel(const std::string& consumer_tag) = 0;
  // Waits up to `timeout` for a delivery. nullopt on timeout. A broker-side consumer cancel or a
  // lost connection is an error (kUnavailable), after which connected() is false.
  virtual Result<std::optional<Delivery>> Next(std::chrono::milliseconds timeout) = 0;

  virtual Status Ack(uint64_t delivery_tag) = 0;
  virtual Status Nack(uint64_t delivery_tag, bool requeue) = 0;
  virtual Status Reject(uint64_t delivery_tag, bool requeue) = 0;

  // basic.get with manual ack: one message or nullopt when the queue is empty.
  virtual Result<std::optional<Delivery>> Get(const std::string& queue) = 0;
  // Passive declare: exact counts, at once (management API numbers lag).
  virtual Result<QueueInfo> Inspect(const std::string& queue) = 0;

  // Services heartbeats and takes in whatever the broker sent (deliveries are kept for Next)
  // without waiting. An error means the connection is gone.
  virtual Status Poll() = 0;
};

}  // namespace syncbus::amqp
