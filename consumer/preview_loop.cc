#include "consumer/preview_loop.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <future>
#include <vector>

#include "common/bus/topology.h"
#include "common/log.h"

namespace syncbus::consumer {

PreviewLoop::PreviewLoop(PreviewLoopOptions options, amqp::Session& session, PreviewFn preview,
                         prometheus::Registry& registry)
    : options_(options),
      session_(session),
      preview_(std::move(preview)),
      clusters_(prometheus::BuildCounter()
                    .Name("syncbus_consumer_preview_clusters_total")
                    .Help("Clusters previewed for syncbusctl preview, by result")
                    .Register(registry)),
      clusters_ok_(clusters_.Add({{"result", "previewed"}})),
      clusters_error_(clusters_.Add({{"result", "error"}})),
      dropped_(prometheus::BuildCounter()
                   .Name("syncbus_consumer_preview_requests_dropped_total")
                   .Help("Preview requests dropped unanswered: undecodable or without a reply "
                         "queue")
                   .Register(registry)
                   .Add({})) {}

Status PreviewLoop::Subscribe() {
  // One request at a time: the next one waits in the queue for a consumer that is free.
  return session_.Consume(amqp::kPreviewQueue, 1).status();
}

Status PreviewLoop::Step(std::chrono::milliseconds timeout) {
  auto next = session_.Next(timeout);
  if (!next.ok()) return next.status();
  if (!next->has_value()) return Status::Ok();
  const amqp::Delivery delivery = std::move(**next);
  Result<PreviewRequest> request = DecodePreviewRequest(delivery.message.body);
  const std::string& reply_to = delivery.message.reply_to;
  if (!request.ok() || reply_to.empty()) {
    log::Warn("preview request dropped: nothing could use an answer",
              {{"message_id", delivery.message.message_id},
               {"error", request.ok() ? "no reply queue" : request.status().message()}});
    dropped_.Increment();
    return session_.Ack(delivery.delivery_tag);
  }
  Result<std::vector<PreviewReply>> replies = PreviewAll(*request);
  if (!replies.ok()) return replies.status();
  std::vector<amqp::Publication> publications;
  publications.reserve(replies->size());
  for (const PreviewReply& reply : *replies) {
    (reply.error.empty() ? clusters_ok_ : clusters_error_).Increment();
    amqp::Publication p;
    p.exchange = "";
    p.routing_key = reply_to;
    p.mandatory = false;  // the caller may have gone: its reply queue with it
    p.message.body = EncodePreviewReply(reply);
    p.message.correlation_id = request->preview_id;
    p.message.persistent = false;
    publications.push_back(std::move(p));
  }
  for (const Status& s : session_.PublishAll(publications, options_.publish_timeout)) {
    if (!s.ok()) return s.Annotate("publishing preview replies");
  }
  log::Info(
      "preview served",
      {{"preview", request->preview_id}, {"clusters", replies->size()}, {"reply_to", reply_to}});
  return session_.Ack(delivery.delivery_tag);
}

Result<std::vector<PreviewReply>> PreviewLoop::PreviewAll(const PreviewRequest& request) {
  const size_t total = request.clusters.size();
  std::vector<PreviewReply> replies(total);
  std::atomic<size_t> next{0};
  std::vector<std::future<void>> workers;
  const size_t count = std::min(total, static_cast<size_t>(std::max(1, options_.workers)));
  for (size_t w = 0; w < count; ++w) {
    workers.push_back(std::async(std::launch::async, [&] {
      for (size_t i = next++; i < total; i = next++) {
        try {
          replies[i] = preview_(request.preview_id, request.set, request.clusters[i]);
        } catch (const std::exception& e) {
          // A set no check foresaw must not take the consumer down with it (and again with every
          // consumer the request is redelivered to): this cluster's answer says what happened.
          replies[i].preview_id = request.preview_id;
          replies[i].cluster = request.clusters[i];
          replies[i].error = std::string("the preview failed: ") + e.what();
        }
      }
    }));
  }
  // The workers use this frame: they are waited for whatever happens to the connection.
  Status connection;
  for (auto& w : workers) {
    while (w.wait_for(std::chrono::milliseconds(200)) != std::future_status::ready) {
      if (connection.ok()) connection = session_.Poll();
    }
  }
  if (!connection.ok()) return connection;
  return replies;
}

}  // namespace syncbus::consumer
