// InProcessTransport: an http::Transport that hands requests straight to a kubesim::Simulation
// (same routing, bearer-token check and fault injection as the socket simulator; injected latency
// and client timeouts are honoured on real time), so unit tests run real REST without sockets.
// As with the real transport, completions and stream callbacks run on the transport's own worker
// thread, never inline in the caller. Thread-safe. The Simulation must outlive the transport;
// destroying the transport ends every pending request and open stream with kCancelled.
#pragma once

#include <functional>
#include <memory>

#include "common/clock.h"
#include "common/http/transport.h"
#include "tests/kubesim/sim_simulation.h"

namespace syncbus::fakes {

class InProcessTransport final : public http::Transport {
 public:
  explicit InProcessTransport(kubesim::Simulation& simulation);
  ~InProcessTransport() override;
  InProcessTransport(const InProcessTransport&) = delete;
  InProcessTransport& operator=(const InProcessTransport&) = delete;

  // The URL's scheme and authority are ignored; its path is routed as the simulator routes it
  // ("/clusters/<name>/..." for a target, anything else for the hub, "/_sim/..." for control).
  void Send(http::Request request, DoneCallback done) override;
  std::unique_ptr<http::StreamHandle> Stream(http::Request request,
                                             StreamCallbacks callbacks) override;

 private:
  class Worker;
  class Op;
  class SendOp;
  class StreamOp;
  class Handle;

  void Execute(const std::shared_ptr<SendOp>& op, kubesim::Plan plan);
  void Execute(const std::shared_ptr<StreamOp>& op, kubesim::Plan plan);
  // Worker thread: passes a kApi plan's response to `answer` once the API server need not hold
  // it (ApiServer::MustWait) any more, or at `hold_until`.
  void Answer(kubesim::Plan plan, SteadyTime hold_until,
              std::function<void(kubesim::ApiResponse)> answer);

  kubesim::Simulation& simulation_;
  std::shared_ptr<Worker> worker_;
};

}  // namespace syncbus::fakes
