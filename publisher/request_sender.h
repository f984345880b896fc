// RequestSender: publishes a batch of sync requests on the work exchange, pipelined, and waits
// for the broker's confirms: only a confirmed request counts as sent
// (syncbus_publisher_enqueued_total) and is recorded for the trace (which a TraceFlusher publishes
// on a connection of its own, so that no batch waits for the trace stream's confirms). It
// checks right before publishing that this replica still may (a leader whose lease lapsed must
// not). A nack on a live channel is a refusal (a full work queue, or one without a leader);
// refusals that go on end the batch with an error asking for a new connection, since a RabbitMQ
// 3.10 channel opened while a quorum queue elected its leader keeps refusing
// (common/amqp/channel_renewal.h). Not thread-safe: owned by the Publisher, used on its thread
// with its Session; the session, clock, registry and trace recorder must outlive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "common/amqp/channel_renewal.h"
#include "common/amqp/session.h"
#include "common/bus/sync_message.h"
#include "common/bus/trace_recorder.h"
#include "common/clock.h"

namespace syncbus::publisher {

struct SenderOptions {
  std::string app_id = "syncbus-publisher";
  std::chrono::milliseconds confirm_timeout{std::chrono::seconds(30)};
  // Checked right before every batch; null = always allowed.
  std::function<bool()> may_publish;
  // Where confirmed requests are recorded for `syncbusctl trace`; null = no trace.
  TraceRecorder* trace = nullptr;
};

// What became of one request of a batch.
enum class SendResult {
  kConfirmed,  // the broker has it
  kRefused,    // nacked on a live channel: try again after a hold-off
  kFailed,     // not confirmed: the connection failed or the confirm timed out
  kNotSent,    // not the leader any more: nothing was published
};

struct BatchOutcome {
  std::vector<SendResult> results;  // one per request, in order
  size_t refused = 0;
  // Refusals have gone on for long: `error` asks for a new connection.
  bool renew_connection = false;
  WallTime sent_wall;         // when the batch was published
  SteadyTime confirmed_at{};  // when its confirms were in
  // kCancelled: not the leader; kUnavailable: a broker failure, or refusals that go on.
  Status error;
};

class RequestSender {
 public:
  RequestSender(amqp::Session& session, Clock& clock, SenderOptions options,
                prometheus::Registry& registry);

  // Publishes `batch` (not empty) and waits for its confirms.
  BatchOutcome Send(const std::vector<const SyncRequest*>& batch);

 private:
  void Trace(const SyncRequest& request, const std::string& message_id, WallTime sent,
             std::chrono::milliseconds took);
  // Whether refusals since the first of this streak call for a new connection.
  bool RenewalDue(size_t refused, const Status& error, SteadyTime now);

  amqp::Session& session_;
  Clock& clock_;
  SenderOptions options_;
  uint64_t sequence_ = 0;
  // Since when publishes have been refused without a batch that had none.
  std::optional<SteadyTime> refused_since_;
  amqp::ChannelRenewal renewal_;
  prometheus::Family<prometheus::Counter>& enqueued_;
  prometheus::Counter& rejected_;
  prometheus::Histogram& confirm_latency_;
};

}  // namespace syncbus::publisher
