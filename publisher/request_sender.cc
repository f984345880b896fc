#include "publisher/request_sender.h"

#include "common/bus/topology.h"
#include "common/log.h"
#include "common/time_format.h"

namespace syncbus::publisher {
namespace {

const prometheus::Histogram::BucketBoundaries kConfirmBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

}  // namespace

RequestSender::RequestSender(amqp::Session& session, Clock& clock, SenderOptions options,
                             prometheus::Registry& registry)
    : session_(session),
      clock_(clock),
      options_(std::move(options)),
      enqueued_(prometheus::BuildCounter()
                    .Name("syncbus_publisher_enqueued_total")
                    .Help("Sync requests published and confirmed, by lane and reason")
                    .Register(registry)),
      rejected_(
          prometheus::BuildCounter()
              .Name("syncbus_publisher_rejected_total")
              .Help("Publishes the broker refused (nack: a work queue at its length limit, or "
                    "without a leader); the cluster stays pending")
              .Register(registry)
              .Add({})),
      confirm_latency_(prometheus::BuildHistogram()
                           .Name("syncbus_publisher_confirm_seconds")
                           .Help("Time from publish to broker confirm, per batch")
                           .Register(registry)
                           .Add({}, kConfirmBuckets)) {}

BatchOutcome RequestSender::Send(const std::vector<const SyncRequest*>& batch) {
  BatchOutcome outcome;
  if (options_.may_publish && !options_.may_publish()) {
    outcome.results.assign(batch.size(), SendResult::kNotSent);
    outcome.error = Status(Code::kCancelled, "not the leader any more");
    return outcome;
  }
  std::vector<amqp::Publication> pubs;
  pubs.reserve(batch.size());
  outcome.sent_wall = clock_.WallNow();
  for (const SyncRequest* request : batch) {
    amqp::Publication p;
    p.exchange = amqp::kWorkExchange;
    p.routing_key = amqp::LaneName(request->lane);
    p.message = ToAmqpMessage(*request, options_.app_id,
                              request->ClusterKey() + "/" + request->revision.substr(0, 12) + "/" +
                                  std::to_string(++sequence_),
                              outcome.sent_wall);
    pubs.push_back(std::move(p));
  }
  SteadyTime start = clock_.Now();
  std::vector<Status> confirms = session_.PublishAll(pubs, options_.confirm_timeout);
  confirm_latency_.Observe(std::chrono::duration<double>(clock_.Now() - start).count());
  const SteadyTime now = clock_.Now();
  outcome.confirmed_at = now;
  outcome.results.reserve(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    if (i >= confirms.size() || !confirms[i].ok()) {
      const Status confirm = i < confirms.size() ? confirms[i] : Status::Ok();
      if (!confirm.ok() && confirm.code() == Code::kUnavailable && session_.connected()) {
        // basic.nack on a live channel: the queue is full (reject-publish) or has no leader. The
        // connection is fine; the request goes out again once the hold-off has passed.
        outcome.results.push_back(SendResult::kRefused);
        ++outcome.refused;
        continue;
      }
      outcome.results.push_back(SendResult::kFailed);
      if (outcome.error.ok())
        outcome.error = confirm.ok() ? Unavailable("publish not confirmed") : confirm;
      continue;
    }
    const SyncRequest& request = *batch[i];
    outcome.results.push_back(SendResult::kConfirmed);
    enqueued_.Add({{"lane", amqp::LaneName(request.lane)}, {"reason", request.reason}}).Increment();
    log::Debug("enqueued", {{"cluster", request.ClusterKey()},
                            {"reason", request.reason},
                            {"lane", amqp::LaneName(request.lane)},
                            {"revision", request.revision}});
    Trace(request, pubs[i].message.message_id, outcome.sent_wall,
          std::chrono::duration_cast<std::chrono::milliseconds>(now - start));
  }
  if (outcome.refused > 0) rejected_.Increment(static_cast<double>(outcome.refused));
  if (RenewalDue(outcome.refused, outcome.error, now)) {
    outcome.renew_connection = true;
    outcome.error = Unavailable(
        "publishes refused for " +
        std::to_string(
            std::chrono::duration_cast<std::chrono::seconds>(now - *refused_since_).count()) +
        " s on a live channel (one opened while a queue elected its leader keeps refusing): "
        "opening a new connection");
    renewal_.Renewed();
    refused_since_.reset();
  }
  return outcome;
}

bool RequestSender::RenewalDue(size_t refused, const Status& error, SteadyTime now) {
  if (refused == 0) {
    if (error.ok()) {
      refused_since_.reset();
      renewal_.Accepted();
    }
    return false;
  }
  if (!refused_since_) refused_since_ = now;
  return error.ok() && renewal_.Due(*refused_since_, now);
}

void RequestSender::Trace(const SyncRequest& request, const std::string& message_id, WallTime sent,
                          std::chrono::milliseconds took) {
  if (options_.trace == nullptr) return;
  TraceEvent e;
  e.step = TraceStep::kPublished;
  e.cluster = request.ClusterKey();
  e.request = message_id;
  e.at = sent;  // sent; the broker has it before any consumer can record a delivery
  e.duration = took;
  e.reason = request.reason;
  e.lane = amqp::LaneName(request.lane);
  e.revision = request.revision.substr(0, 12);
  auto decided = ParseRfc3339(request.enqueued_at);
  e.decided_at = decided.ok() ? *decided : sent;
  options_.trace->Record(std::move(e));
}

}  // namespace syncbus::publisher
