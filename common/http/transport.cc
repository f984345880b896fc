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

}  // namespace syncbus::http
