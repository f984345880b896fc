#include <doctest/doctest.h>

#include "tests/support/test_broker.h"

namespace syncbus::testing {
namespace {

TEST_CASE("the broker fixture's env file parses into connection details") {
  auto env = ParseBrokerEnv(
      "SYNCBUS_AMQP_HOST=127.0.0.1\n"
      "SYNCBUS_AMQP_PORT=41672\n"
      "SYNCBUS_MGMT_PORT=41675\n"
      "SYNCBUS_PROMETHEUS_PORT=41676\n"
      "SYNCBUS_BROKER_USER=syncbus\n"
      "SYNCBUS_BROKER_PASSWORD='s3cret=x'\n"
      "SYNCBUS_BROKER_NODE=node@localhost\n"
      "SYNCBUS_BROKER_DIR=/tmp/b\n"
      "SYNCBUS_BROKER_PID=1234\n"
      "SYNCBUS_MGMT_URL=http://127.0.0.1:41675/\n");
  REQUIRE(env.ok());
  CHECK(env->host == "127.0.0.1");
  CHECK(env->amqp_port == 41672);
  CHECK(env->mgmt_port == 41675);
  CHECK(env->prometheus_port == 41676);
  CHECK(env->password == "s3cret=x");
  CHECK(env->node == "node@localhost");
  CHECK(env->mgmt_url == "http://127.0.0.1:41675");
}

TEST_CASE("a broken env file names the problem") {
  auto missing = ParseBrokerEnv("SYNCBUS_AMQP_HOST=h\n");
  CHECK(missing.status().code() == Code::kInvalidArgument);
  CHECK(missing.status().message().find("SYNCBUS_") != std::string::npos);
  auto bad_port = ParseBrokerEnv(
      "SYNCBUS_AMQP_HOST=h\nSYNCBUS_BROKER_USER=u\nSYNCBUS_BROKER_PASSWORD=p\n"
      "SYNCBUS_MGMT_URL=http://h\nSYNCBUS_AMQP_PORT=99999\nSYNCBUS_MGMT_PORT=1\n"
      "SYNCBUS_PROMETHEUS_PORT=2\n");
  CHECK(bad_port.status().message().find("SYNCBUS_AMQP_PORT") != std::string::npos);
  CHECK(ParseBrokerEnv("garbage").status().code() == Code::kInvalidArgument);
}

}  // namespace
}  // namespace syncbus::testing
