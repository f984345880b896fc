#include "common/amqp/address.h"

#include <charconv>

namespace syncbus::amqp {

std::string Address::ToString() const {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<Address> ParseAddress(std::string_view text, int default_port) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("broker address \"" + std::string(text) + "\": " + why);
  };
  Address address{"", default_port};
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return bad("missing ']' after an IPv6 address");
    address.host = std::string(text.substr(1, close - 1));
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return bad("expected ':' and a port after ']'");
      port_text = rest.substr(1);
      if (port_text.empty()) return bad("empty port");
    }
  } else {
    size_t colon = text.find(':');
    if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos) {
      return bad("an IPv6 address must be written in brackets, as [::1]:5672");
    }
    address.host = std::string(text.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = text.substr(colon + 1);
      if (port_text.empty()) return bad("empty port");
    }
  }
  if (address.host.empty()) return bad("empty host");
  if (!port_text.empty()) {
    int port = 0;
    auto [end, error] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (error != std::errc() || end != port_text.data() + port_text.size() || port < 1 ||
        port > 65535) {
      return bad("the port must be a number from 1 to 65535");
    }
    address.port = port;
  }
  return address;
}

}  // namespace syncbus::amqp
