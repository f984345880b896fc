// FakeBroker and FakeSession: an in-memory AMQP broker behaving like RabbitMQ 3.10 where syncbus
// depends on it (routing, confirms, TTL and dead-lettering with x-death, quorum delivery limits
// from arguments and policies, prefetch, requeue), for unit tests. FakeBroker is thread-safe and
// shared by any number of FakeSessions; a FakeSession is one connection used by one thread, like
// the real Session. Message TTL follows the injected Clock (a FakeClock in tests); nothing sleeps.
// A stream queue keeps its messages in order: ConsumeStream reads copies from its first one
// (offsets in x-stream-offset; starting at a timestamp and retention are not modelled), while Get
// still takes them like a classic queue's.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/amqp/session.h"
#include "common/clock.h"

namespace syncbus::amqp {

class FakeBroker {
 public:
  struct Options {
    // What Next(timeout) and a blocked Publish do when they would have to wait: false returns
    // at once as if the timeout had passed (single-threaded tests step time with a FakeClock);
    // true blocks up to `timeout` of real time for another thread (publisher and consumer
    // threads sharing one broker).
    bool wait_in_real_time = false;
    // RabbitMQ's heartbeat timeout (0: none): a connection that makes no call for two intervals
    // of the clock has missed its heartbeats and is closed by the broker; its next call fails,
    // as rabbitmq-c only answers heartbeats inside a call.
    std::chrono::milliseconds heartbeat{0};
  };

  explicit FakeBroker(const Clock& clock);
  FakeBroker(const Clock& clock, Options options);
  ~FakeBroker();
  FakeBroker(const FakeBroker&) = delete;
  FakeBroker& operator=(const FakeBroker&) = delete;

  // While unavailable, Connect() fails with kUnavailable; becoming unavailable drops every
  // connection.
  void SetAvailable(bool available);
  // Drops every live connection as a broker restart or a forced close would: their unacked
  // messages go back to their queues as redelivered and their next call fails (kUnavailable).
  void DropConnections();
  // RabbitMQ 3.10 after `queue`'s leader died: every publishing channel open now keeps having
  // its publishes to `queue` refused (basic.nack), however long, until the session renews it
  // (RenewPublishChannel) or connects again; channels opened later are served.
  void StalePublishChannels(const std::string& queue);
  // connection.blocked: publishing waits, then fails with kTimeout, until unblocked.
  void SetBlocked(bool blocked);
  // Replaces the policies (an operator's `rabbitmqctl set_policy`, or importing definitions):
  // numeric limits take the lower of argument and policy, applied to live queues at once.
  void SetPolicies(std::vector<PolicySpec> policies);
  // Deletes a queue with its bindings and messages; its consumers are cancelled (their
  // session's Next() fails with kUnavailable naming the queue).
  void DeleteQueue(const std::string& name);

  // Inspection for tests. Each first applies the TTL expiry due at the clock's time.
  bool HasExchange(const std::string& name);
  bool HasQueue(const std::string& name);
  std::vector<Message> ReadyMessages(const std::string& queue);  // in delivery order
  size_t UnackedCount(const std::string& queue);
  size_t LiveConnections();

 private:
  friend class FakeSession;
  struct State;
  std::unique_ptr<State> state_;
};

class FakeSession final : public Session {
 public:
  explicit FakeSession(FakeBroker& broker, std::string connection_name = "fake");
  ~FakeSession() override;
  FakeSession(const FakeSession&) = delete;
  FakeSession& operator=(const FakeSession&) = delete;

  Status Connect() override;
  bool connected() const override;
  void Close() override;
  Status RenewPublishChannel() override;
  Status Declare(const Topology& topology) override;
  // A classic queue named "amq.gen-N" (kept after Close: the fake does not model exclusivity).
  Result<std::string> DeclareReplyQueue() override;
  Status Publish(const Publication& publication, std::chrono::milliseconds timeout) override;
  std::vector<Status> PublishAll(const std::vector<Publication>& publications,
                                 std::chrono::milliseconds timeout) override;
  Result<std::string> Consume(const std::string& queue, uint16_t prefetch) override;
  // Reads a stream from its first message, whatever `from_unix_seconds` says.
  Result<std::string> ConsumeStream(const std::string& queue, uint16_t prefetch,
                                    int64_t from_unix_seconds) override;
  Status Cancel(const std::string& consumer_tag) override;
  Result<std::optional<Delivery>> Next(std::chrono::milliseconds timeout) override;
  Status Ack(uint64_t delivery_tag) override;
  Status Nack(uint64_t delivery_tag, bool requeue) override;
  Status Reject(uint64_t delivery_tag, bool requeue) override;
  Result<std::optional<Delivery>> Get(const std::string& queue) override;
  Result<QueueInfo> Inspect(const std::string& queue) override;
  Status Poll() override;

 private:
  FakeBroker::State& broker_;
  std::string name_;
  uint64_t connection_ = 0;  // the broker's id of this session's connection, 0 = none
  uint64_t first_tag_ = 0;   // delivery tags below this belong to earlier connections
};

}  // namespace syncbus::amqp
