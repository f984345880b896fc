#include "common/http/transport.h"

#include <future>

namespace syncbus::http {

Result<Response> Transport::Call(Request request) {
  auto promise = std::make_shared<std::promise<Result<Response>>>();
  std::future<Result<Response>> future = promise->get_future();
  Send(std::move(request),
       [promise](Result<Response> result) { promise->set_value(std::move(result)); });
  return future.get();
}

Status Transport::Fetch(Request request, const StreamCallbacks& callbacks) {
  Result<Response> response = Call(std::move(request));
  if (!response.ok()) return response.status();
  if (callbacks.on_headers) callbacks.on_headers(response->status, response->headers);
  if (callbacks.on_data && !response->body.empty()) callbacks.on_data(response->body);
  return Status::Ok();
}

}  // namespace syncbus::http
