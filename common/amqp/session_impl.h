// RabbitmqSession: the Session over rabbitmq-c 0.11 — one connection, a channel for consumers,
// acks and declarations and one in confirm mode for publishing, frames read by hand so confirms,
// returns and deliveries may interleave freely.
// NOT thread-safe (one per thread); owns its connection and closes it on destruction.
#pragma once

#include <chrono>
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <amqp.h>

#include "common/amqp/session.h"
#include "common/clock.h"

namespace syncbus::amqp {

class RabbitmqSession final : public Session {
 public:
  explicit RabbitmqSession(ConnectionOptions options);
  ~RabbitmqSession() override;
  RabbitmqSession(const RabbitmqSession&) = delete;
  RabbitmqSession& operator=(const RabbitmqSession&) = delete;

  Status Connect() override;
  bool connected() const override { return connected_; }
  void Close() override;
  Status RenewPublishChannel() override;
  Status Declare(const Topology& topology) override;
  Result<std::string> DeclareReplyQueue() override;
  Status Publish(const Publication& publication, std::chrono::milliseconds timeout) override;
  std::vector<Status> PublishAll(const std::vector<Publication>& publications,
                                 std::chrono::milliseconds timeout) override;
  Result<std::string> Consume(const std::string& queue, uint16_t prefetch) override;
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

  // True while the broker has blocked publishing (connection.blocked, e.g. a memory alarm).
  bool blocked() const { return blocked_; }

 private:
  struct ConnectionDeleter {
    void operator()(amqp_connection_state_t_* conn) const;
  };
  using ConnectionPtr = std::unique_ptr<amqp_connection_state_t_, ConnectionDeleter>;

  struct Consumer {
    std::string queue;
    uint16_t prefetch = 0;
    Json arguments = Json::object();  // basic.consume arguments (a stream's offset)
  };
  struct Batch;  // the publications of one PublishAll awaiting confirms

  std::vector<Status> PublishSpan(std::span<const Publication> publications,
                                  std::chrono::milliseconds timeout);
  // Reads what has arrived; while the in-flight window is full, waits for confirms to open it.
  Status PumpConfirms(Batch& batch, SteadyTime deadline);
  // Waits for the batch's confirms until `deadline`; what is unconfirmed then fails with a
  // timeout that names `timeout`.
  void AwaitConfirms(Batch& batch, SteadyTime deadline, std::chrono::milliseconds timeout);
  // One connection attempt to one node.
  Status ConnectTo(const Address& address);
  // A channel number not in use (channel numbers are not reused right away).
  amqp_channel_t NextChannel();
  Status OpenChannel();         // the consuming channel
  Status OpenPublishChannel();  // the publishing channel, in confirm mode
  Status RestoreChannel();
  Result<std::string> StartConsumer(const std::string& queue, uint16_t prefetch,
                                    const std::string& tag, const Json& arguments);
  enum class Settlement { kAck, kNack, kReject };
  Status Settle(Settlement how, uint64_t delivery_tag, bool requeue);

  // Waits for one frame until `deadline` in slices shorter than the heartbeat. true = frame,
  // false = deadline passed. Library errors drop the connection.
  Result<bool> WaitFrame(SteadyTime deadline, amqp_frame_t* frame);
  // Sends a method on `channel` and waits for one of `replies`, dispatching everything else.
  // The reply's decoded fields are valid until the next wait.
  Result<amqp_method_t> Rpc(amqp_channel_t channel, amqp_method_number_t method, void* args,
                            std::initializer_list<amqp_method_number_t> replies,
                            const std::string& what);
  // Handles a frame outside an RPC reply: deliveries, confirms, returns, cancels, blocked
  // notifications, channel and connection closes.
  Status Dispatch(const amqp_frame_t& frame);
  Status DispatchConnection(const amqp_method_t& method);  // channel 0
  Status DispatchPublishing(const amqp_frame_t& frame);    // the publishing channel
  Status DispatchConsuming(const amqp_frame_t& frame);     // the consuming channel
  // Answers the broker's channel.flow on `channel`; an error drops the connection.
  Status AnswerFlow(amqp_channel_t channel, const amqp_method_t& method);
  // Answers the broker's channel.close on `channel`: kOk once answered, with the broker's reason
  // in `why`; an error drops the connection.
  Status AnswerClose(amqp_channel_t channel, const amqp_method_t& method, Status& why);
  Result<Message> ReadContent(amqp_channel_t channel);
  Status WaitUnblocked(SteadyTime deadline);
  void Confirm(uint64_t seq, bool multiple, bool ack);
  void MatchReturn(const std::string& exchange, const std::string& routing_key,
                   const Message& message, const std::string& reason);
  void ReleaseBuffers();
  // Forgets the connection (after any connection-level error) and returns `why`.
  Status Drop(Status why);
  void ResetChannelState();     // both channels'
  void ResetConsumingState();   // deliveries received, tags
  void ResetPublishingState();  // publish sequence numbers

  ConnectionOptions options_;
  ConnectionPtr conn_;
  size_t next_endpoint_ = 0;  // index into options_.Endpoints() tried first
  bool connected_ = false;
  bool closing_ = false;
  bool blocked_ = false;
  std::string blocked_reason_;
  amqp_channel_t channel_ = 0;          // consumers, acks, declarations, gets
  amqp_channel_t publish_channel_ = 0;  // publications and their confirms and returns
  amqp_channel_t last_channel_ = 0;     // the number opened last
  int channel_max_ = 0;
  std::chrono::milliseconds slice_{1000};
  uint64_t next_seq_ = 1;  // publish sequence number of the next publication
  Batch* batch_ = nullptr;
  std::map<std::string, Consumer> consumers_;
  std::deque<Delivery> deliveries_;  // received but not yet returned by Next()
  std::optional<Status> cancelled_;  // a broker-side consumer cancel, reported by Next()
  uint64_t tag_offset_ = 0;          // exposed tag = tag_offset_ + broker tag
  uint64_t max_tag_ = 0;             // highest exposed tag handed out so far
};

}  // namespace syncbus::amqp
