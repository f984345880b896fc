#include "common/amqp/address.h"

#include <doctest/doctest.h>

using syncbus::amqp::Address;
using syncbus::amqp::ParseAddress;

TEST_CASE("broker addresses are host:port or [v6]:port or a host alone") {
  CHECK(*ParseAddress("rabbit:5671", 5672) == Address{"rabbit", 5671});
  CHECK(*ParseAddress("rabbit", 5672) == Address{"rabbit", 5672});
  CHECK(*ParseAddress("[fe80::1]:5671", 5672) == Address{"fe80::1", 5671});
  CHECK(*ParseAddress("[::1]", 5672) == Address{"::1", 5672});
  CHECK(Address{"::1", 5671}.ToString() == "[::1]:5671");
  CHECK(Address{"localhost", 5671}.ToString() == "localhost:5671");
}

TEST_CASE("bad broker addresses say what is wrong") {
  auto why = [](const char* text) { return ParseAddress(text, 5672).status().message(); };
  CHECK(why("") == "broker address \"\": empty host");
  CHECK(why(":5671") == "broker address \":5671\": empty host");
  CHECK(why("rabbit:") == "broker address \"rabbit:\": empty port");
  CHECK(why("rabbit:0") ==
        "broker address \"rabbit:0\": the port must be a number from 1 to 65535");
  CHECK(why("rabbit:56x") ==
        "broker address \"rabbit:56x\": the port must be a number from 1 to 65535");
  CHECK(why("::1:5671") ==
        "broker address \"::1:5671\": an IPv6 address must be written in brackets, as [::1]:5672");
  CHECK(why("[::1") == "broker address \"[::1\": missing ']' after an IPv6 address");
  CHECK(why("[::1]5671") == "broker address \"[::1]5671\": expected ':' and a port after ']'");
}
