// PreviewLoop: serves the preview queue (syncbus.preview) for `syncbusctl preview`, on a broker
// connection and threads of its own, apart from the delivery loop, so that previews never hold up
// syncs. One request at a time: its clusters are previewed by up to `workers` threads while this
// thread keeps the connection's heartbeats going; then one reply per cluster is published to the
// request's reply queue (default exchange; a reply queue that is gone, its caller having given
// up, drops it) and the request is acked once the replies are confirmed. A request that does not
// decode, or names no reply queue, is acked and dropped with a warning: nothing could use an
// answer. NOT thread-safe: one thread runs Subscribe and Step; the session is its own.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "common/amqp/session.h"
#include "common/bus/preview_message.h"
#include "common/status.h"

namespace syncbus::consumer {

struct PreviewLoopOptions {
  int workers = 16;  // clusters previewed at once
  std::chrono::milliseconds publish_timeout{30000};
};

class PreviewLoop {
 public:
  // Previews one cluster; called from the worker threads at once for different clusters.
  using PreviewFn = std::function<PreviewReply(const std::string& preview_id, const Json& set,
                                               const PreviewCluster& cluster)>;
  PreviewLoop(PreviewLoopOptions options, amqp::Session& session, PreviewFn preview,
              prometheus::Registry& registry);

  // Starts consuming the preview queue (again after a reconnect).
  Status Subscribe();
  // Waits up to `timeout` for a request and serves it whole. An error means the connection is
  // gone: the request in hand, not acked, goes back to the queue.
  Status Step(std::chrono::milliseconds timeout);

 private:
  // The replies for every cluster of `request`, in its order, servicing the connection meanwhile.
  Result<std::vector<PreviewReply>> PreviewAll(const PreviewRequest& request);

  PreviewLoopOptions options_;
  amqp::Session& session_;
  PreviewFn preview_;
  prometheus::Family<prometheus::Counter>& clusters_;
  prometheus::Counter& clusters_ok_;     // clusters_'s two series: previewed
  prometheus::Counter& clusters_error_;  // clusters that could not be previewed
  prometheus::Counter& dropped_;         // requests that could not be answered
};

}  // namespace syncbus::consumer
