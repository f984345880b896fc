// Address: one broker node (host and port) and its text form "host:port" as the config writes
// it. Value types and pure functions; thread-compatible.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace syncbus::amqp {

struct Address {
  std::string host;
  int port = 5672;

  std::string ToString() const;  // "host:port", "[v6]:port"
  bool operator==(const Address&) const = default;
};

// "host:port", "[v6]:port", or "host" alone (then `default_port`). kInvalidArgument says what is
// wrong with `text`.
Result<Address> ParseAddress(std::string_view text, int default_port);

}  // namespace syncbus::amqp
